"""A small order service spoken over MCP stdio, started by the test suite as a real subprocess.

Orders persist in the JSON file named by ``ORDERS_DB`` (relative to the server's working
folder), so two separate sessions see the same orders. ``create_order`` deduplicates by
``idempotency_key`` and counts every attempt, which is what recovery tests look at.
``list_orders`` and ``order_summary`` deliberately return unstructured content (JSON text
and plain text) so the client's three result shapes are all exercised.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer[Any] = MCPServer("orders", log_level="WARNING")


def _db_path() -> Path:
    return Path(os.environ.get("ORDERS_DB", "orders.json"))


def _load() -> dict[str, Any]:
    path = _db_path()
    if not path.exists():
        return {"orders": {}, "keys": {}, "attempts": 0}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _save(data: dict[str, Any]) -> None:
    path = _db_path()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def _get(data: dict[str, Any], order_id: str) -> dict[str, Any]:
    try:
        order: dict[str, Any] = data["orders"][order_id]
    except KeyError:
        known = ", ".join(sorted(data["orders"])) or "none"
        raise ToolError(f"No order {order_id!r}; known orders: {known}.") from None
    return order


@server.tool()
def create_order(sku: str, quantity: int, idempotency_key: str) -> dict[str, Any]:
    """Create an order once per idempotency key; a repeated key returns the first order."""
    data = _load()
    data["attempts"] += 1
    existing = data["keys"].get(idempotency_key)
    if existing is not None:
        order = data["orders"][existing]
        order["attempts"] += 1
        _save(data)
        return {**order, "created": False}
    order_id = f"ord-{len(data['orders']) + 1}"
    order = {
        "order_id": order_id,
        "sku": sku,
        "quantity": quantity,
        "idempotency_key": idempotency_key,
        "attempts": 1,
    }
    data["orders"][order_id] = order
    data["keys"][idempotency_key] = order_id
    _save(data)
    return {**order, "created": True}


@server.tool()
def get_order(order_id: str) -> dict[str, Any]:
    """Return one order by id."""
    return _get(_load(), order_id)


@server.tool(structured_output=False)
def list_orders() -> str:
    """All orders by id and the total number of create attempts, as JSON text."""
    data = _load()
    orders = [data["orders"][key] for key in sorted(data["orders"])]
    return json.dumps({"orders": orders, "attempts": data["attempts"]}, sort_keys=True)


@server.tool(structured_output=False)
def order_summary(order_id: str) -> str:
    """One order as a plain sentence."""
    order = _get(_load(), order_id)
    return f"{order['order_id']}: {order['quantity']} x {order['sku']}"


@server.tool()
def fail(message: str) -> dict[str, Any]:
    """Always fail with the given message, as a tool error."""
    raise ToolError(message)


@server.tool()
async def sleep(seconds: float) -> dict[str, Any]:
    """Sleep, then answer; lets tests reach a client-side call timeout."""
    await anyio.sleep(seconds)
    return {"slept": seconds}


if __name__ == "__main__":
    server.run("stdio")
