"""Waits for INPUT["gates"] messages on topic "go", one after another, and adds them up."""

from dbos import DBOS


@DBOS.step()
async def total(values):
    return {"total": sum(values), "gates": len(values)}


@DBOS.workflow()
async def run(INPUT):
    values = []
    for _ in range(INPUT.get("gates", 1)):
        values.append(await DBOS.recv_async("go", timeout_seconds=3600))
    return await total(values)
