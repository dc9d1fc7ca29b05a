"""Drafts a refund, waits for a manager's approval (a message), then pays or stops."""

import asyncio

from dbos import DBOS


@DBOS.step()
async def draft(order, pause):
    return {"order": order, "amount": 40, "pause": pause}


@DBOS.step()
async def pay(refund, note):
    await asyncio.sleep(refund["pause"])  # long enough to be killed in (tests)
    return {"paid": refund["amount"], "note": note}


@DBOS.workflow()
async def run(INPUT):
    refund = await draft(INPUT.get("order", "A-1"), INPUT.get("pause", 0))
    await DBOS.set_event_async("draft", refund)
    answer = await DBOS.recv_async("approval", timeout_seconds=INPUT.get("timeout", 3600))
    if answer is None:
        return {"status": "timed out", "order": refund["order"]}
    if not answer.get("approved"):
        return {"status": "rejected", "order": refund["order"]}
    done = await pay(refund, answer.get("note"))
    return {"status": "paid", **done}
