from dbos import DBOS


@DBOS.step()
async def fetch(i):
    return i * 10


@DBOS.step()
def add(a, b):
    return a + b


@DBOS.workflow()
async def run(INPUT):
    total = 0
    for i in range(INPUT["n"]):
        value = await fetch(i)
        total = add(total, value)
    return {"total": total}
