import asyncio
from dbos import DBOS

@DBOS.step()
async def nap(seconds):
    await asyncio.sleep(seconds)
    return seconds

@DBOS.workflow()
async def run(INPUT):
    return {"slept": await nap(INPUT["seconds"])}
