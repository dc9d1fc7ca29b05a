"""A real chat-completions server on loopback for provider tests, with a fixed policy.

Policy: when tools are offered and no tool result is in the conversation yet, the server calls
the first offered tool (arguments from ``tool_arguments``, else built from the tool's schema);
otherwise it answers with ``"echo: "`` plus the last message's content. Every request is
recorded; ``failure`` makes every request fail with that HTTP status (500s ask clients to retry
after 1 ms, so retries are fast); ``bad_arguments`` sends tool arguments that are not JSON.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "RecordedRequest", "chat_server"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    path: str
    authorization: str | None
    body: dict[str, Any]


@dataclass
class ChatServer:
    """The server's state: what it answers and what it received."""

    model: str = "loopback-chat-1"
    failure: int | None = None
    bad_arguments: bool = False
    tool_arguments: dict[str, Any] | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply(self, request: RecordedRequest) -> tuple[int, dict[str, str], dict[str, Any]]:
        """Status, extra headers and JSON body for one request; records it first."""
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
        if self.failure is not None:
            return self._failure(self.failure, request)
        if request.path != "/v1/chat/completions":
            return 404, {}, {"error": {"message": f"no route {request.path}", "type": "not_found"}}
        messages: list[dict[str, Any]] = request.body.get("messages", [])
        tools: list[dict[str, Any]] = request.body.get("tools", [])
        message: dict[str, Any]
        if tools and not any(m.get("role") == "tool" for m in messages):
            function = tools[0]["function"]
            arguments = (
                "{not json"
                if self.bad_arguments
                else json.dumps(self.tool_arguments or _sample(function.get("parameters", {})))
            )
            call = {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            last = messages[-1].get("content") if messages else ""
            message = {"role": "assistant", "content": f"echo: {last}"}
            finish = "stop"
        body = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": len(messages),
                "completion_tokens": 1,
                "total_tokens": len(messages) + 1,
            },
        }
        return 200, {}, body

    @staticmethod
    def _failure(
        status: int, request: RecordedRequest
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        if status == 401:
            # Like some real servers, echo the credential back: clients must not repeat it.
            key = (request.authorization or "").removeprefix("Bearer ")
            text = f"Incorrect API key provided: {key}"
            return 401, {}, {"error": {"message": text, "type": "invalid_request_error"}}
        headers = {"retry-after-ms": "1"} if status >= 500 else {}
        text = f"the loopback server was told to fail with {status}"
        return status, headers, {"error": {"message": text, "type": "server_error"}}


def _sample(schema: dict[str, Any]) -> dict[str, Any]:
    """Deterministic arguments for the required properties of an object schema."""
    samples: dict[str, Any] = {"string": "x", "integer": 1, "number": 1.5, "boolean": True}
    properties: dict[str, Any] = schema.get("properties", {})
    return {
        name: samples.get(properties.get(name, {}).get("type"))
        for name in schema.get("required", [])
    }


def _handler(state: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"unparsed": raw.decode("utf-8", "replace")}
            recorded = RecordedRequest(self.path, self.headers.get("Authorization"), body)
            status, headers, payload = state.reply(recorded)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet; requests are recorded on the state instead."""

    return Handler


@contextmanager
def chat_server(state: ChatServer | None = None) -> Iterator[tuple[str, ChatServer]]:
    """Serve on 127.0.0.1 (a free port) until the block exits; yields (base_url, server)."""
    state = state or ChatServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(
        target=httpd.serve_forever, args=(0.01,), name="chat-server", daemon=True
    )
    thread.start()
    try:
        host, port = httpd.server_address[:2]
        yield f"http://{host!s}:{port}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
