import os
from dbos import DBOS


def note(text):
    with open("effects.log", "a") as f:
        f.write(text + "\n")


@DBOS.step()
def price(sku):
    note(f"price {sku}")
    return 10


@DBOS.step()
def pack(sku):
    note(f"pack {sku}")
    return sku


@DBOS.step()
def ship(total):
    note("ship")
    return {"shipped": total}


@DBOS.workflow()
async def run(INPUT):
    total = 0
    for sku in INPUT["items"]:
        total += price(sku)
        pack(sku)
    if total > 15:
        return ship(total)
    return {"shipped": 0}
