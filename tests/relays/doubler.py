from dbos import DBOS

@DBOS.step()
async def double(x):
    return 2 * x

@DBOS.workflow()
async def run(INPUT):
    out = []
    for x in INPUT["xs"]:
        out.append(await double(x))
    return {"out": out}
