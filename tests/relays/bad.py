from dbos import DBOS

def run(INPUT):
    DBOS.launch()
    return 1
