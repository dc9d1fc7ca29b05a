"""The lab's order service: a real HTTP server on loopback that counts every attempt and
creates one order per idempotency key (the kind of service a safe action relies on)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OrderBook", "OrderService", "order_service"]


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
            pass  # the lab shows attempts itself; no access log on the kernel's stderr

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
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = str(body["idempotency_key"])
            except (ValueError, KeyError, TypeError):
                self._reply(400, {"error": "expected JSON with sku, quantity, idempotency_key"})
                return
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


class OrderService:
    """A running service on 127.0.0.1 (a free port) until ``stop``."""

    def __init__(self, token: str) -> None:
        self.book = OrderBook(token)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.book))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        #: what a relay that calls the service declares (``%%relay NAME --allow=ENDPOINT``)
        self.endpoint = f"127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"OrderService({self.url!r}, {len(self.book.orders)} orders)"

    def attempts_for(self, key: str) -> int:
        """How many requests carried idempotency key ``key``."""
        with self.book.lock:
            return sum(a.get("idempotency_key") == key for a in self.book.attempts)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def order_service(token: str) -> Iterator[tuple[str, OrderBook]]:
    """A running service for the duration of a ``with`` block; yields its URL and its book."""
    service = OrderService(token)
    try:
        yield service.url, service.book
    finally:
        service.stop()
