import asyncio

from dbos import DBOS


@DBOS.step()
async def nap(seconds):
    await asyncio.sleep(seconds)
    return seconds


@DBOS.step()
def wake(slept):
    return {"slept": slept}


@DBOS.workflow()
async def run(INPUT):
    slept = await nap(INPUT.get("seconds", 0))
    return wake(slept)
