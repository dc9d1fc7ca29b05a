"""Checks in, sleeps durably for INPUT["seconds"], then checks out."""

from dbos import DBOS


@DBOS.step()
async def check_in(who):
    return {"who": who}


@DBOS.step()
async def check_out(visit):
    return {**visit, "out": True}


@DBOS.workflow()
async def run(INPUT):
    visit = await check_in(INPUT.get("who", "ada"))
    await DBOS.sleep_async(INPUT.get("seconds", 5))
    return await check_out(visit)
