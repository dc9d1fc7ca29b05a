from dbos import DBOS


@DBOS.step()
async def price(order):
    return sum(item["qty"] * item["unit"] for item in order["items"])


@DBOS.step()
async def pack(item):
    return item["sku"]


@DBOS.step()
async def ship(mode):
    return {"mode": mode}


@DBOS.step()
async def notify(message):
    if message == "boom":
        raise ValueError("the mail service refused the message")
    return message


@DBOS.workflow()
async def run(INPUT):
    if not INPUT.get("items"):
        raise ValueError("order has no items")
    total = await price(INPUT)
    packed = []
    for item in INPUT["items"]:
        packed.append(await pack(item))
    if total > 100:
        label = await ship("express")
    else:
        label = await ship("standard")
    try:
        sent = await notify(INPUT.get("note", "thanks"))
    except ValueError:
        sent = await notify("fallback")
    return {"total": total, "packed": packed, "label": label, "sent": sent}
