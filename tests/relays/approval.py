from dbos import DBOS


@DBOS.step()
def draft_refund(order):
    return {"order": order, "amount": 42, "text": f"Refund 42 EUR on order {order}"}


@DBOS.step()
def act_on(draft, answer):
    if answer and answer.get("approved"):
        return {"paid": draft["amount"], "note": answer.get("note")}
    return {"paid": 0, "note": (answer or {}).get("note")}


@DBOS.workflow()
async def run(INPUT):
    draft = draft_refund(INPUT.get("order", "A-1"))
    await DBOS.set_event_async("draft", draft)
    answer = await DBOS.recv_async("approval", timeout_seconds=3600)
    return act_on(draft, answer)
