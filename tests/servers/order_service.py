"""A small order service on loopback for tests: counts attempts, deduplicates idempotency keys."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class OrderBook:
    """What the service saw: every attempt, and the orders it created (one per key)."""

    token: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(book: OrderBook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path != "/orders":
                self._reply(404, {"error": "not found"})
                return
            if self.headers.get("Authorization") != f"Bearer {book.token}":
                self._reply(401, {"error": "bad token"})
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = body["idempotency_key"]
            with book.lock:
                book.attempts.append(body)
                order = book.orders.get(key)
                if order is None:
                    order = {
                        "order_id": f"ord-{len(book.orders) + 1}",
                        "sku": body["sku"],
                        "quantity": body["quantity"],
                    }
                    book.orders[key] = order
            self._reply(200, order)

    return Handler


@contextmanager
def order_service(token: str) -> Iterator[tuple[str, OrderBook]]:
    """A running service on 127.0.0.1 (a free port); yields its base URL and its book."""
    book = OrderBook(token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(book))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", book
    finally:
        server.shutdown()
        server.server_close()
