from dbos import DBOS

from agentworks import mcp


@DBOS.step()
async def order(sku):
    return await mcp(
        server="orders",
        tool="create_order",
        arguments={"sku": sku, "quantity": 1, "idempotency_key": "k-" + sku},
    )


@DBOS.workflow()
async def run(INPUT):
    made = await order(INPUT["sku"])
    listing = await mcp(server="orders", tool="list_orders")
    return {
        "order": made["order_id"],
        "count": len(listing["orders"]),
        "attempts": listing["attempts"],
    }
