from dbos import DBOS


@DBOS.step()
def score(x):
    return 2 * x


@DBOS.workflow()
def run(INPUT):
    total = 0
    for x in INPUT.get("xs", [1, 2, 3]):
        total += score(x)
    return {"total": total}
