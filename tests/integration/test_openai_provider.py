"""The OpenAI-compatible provider against a real chat-completions server on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import traceback
from typing import Any

import pytest

from agentworks.errors import ProviderError
from agentworks.providers.base import AssistantTurn
from agentworks.providers.openai_compat import OpenAICompatProvider
from tests.servers.chat_server import ChatServer, chat_server

KEY = "sk-test-do-not-leak-0042"
LOOKUP = {
    "name": "lookup",
    "description": "Find an order.",
    "parameters": {
        "type": "object",
        "properties": {"order": {"type": "integer"}},
        "required": ["order"],
    },
}


def complete(
    provider: OpenAICompatProvider,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
) -> AssistantTurn:
    return asyncio.run(
        provider.complete(agent="clerk", messages=messages, tools=tools or [], model="openai:tiny")
    )


def failure_text(error: ProviderError) -> str:
    """Everything a user could see of the error: message, repr and the chained traceback."""
    return "".join(traceback.format_exception(error)) + repr(error)


def test_plain_completion() -> None:
    """A conversation without tools gets the server's content, resolved model and usage."""
    with chat_server() as (base_url, server):
        provider = OpenAICompatProvider(base_url, "tiny", KEY)
        turn = complete(
            provider, [{"role": "system", "content": "hi"}, {"role": "user", "content": "ping"}]
        )
    assert turn.content == "echo: ping"
    assert turn.tool_calls == []
    assert turn.model == "loopback-chat-1"
    assert turn.usage == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.authorization == f"Bearer {KEY}"
    assert request.body["model"] == "tiny"
    assert "tools" not in request.body


def test_tool_call_round_trip() -> None:
    """A tool call comes back with parsed arguments, and its result is sent with tool_call_id."""
    with chat_server() as (base_url, server):
        provider = OpenAICompatProvider(base_url, "tiny", KEY)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "find order 1"}]
        first = complete(provider, messages, [LOOKUP])
        (call,) = first.tool_calls
        assert (call.name, call.arguments) == ("lookup", {"order": 1})
        messages.append(first.to_message())
        messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"status": "paid"}'})
        second = complete(provider, messages, [LOOKUP])
    assert second.content == 'echo: {"status": "paid"}'
    sent = server.requests[1].body
    assert sent["tools"] == [{"type": "function", "function": LOOKUP}]
    assistant, tool = sent["messages"][1:]
    assert assistant["tool_calls"] == [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"order": 1})},
        }
    ]
    assert tool == {"role": "tool", "tool_call_id": call.id, "content": '{"status": "paid"}'}


def test_tool_arguments_that_are_not_json() -> None:
    """Tool arguments that are not JSON fail with a ProviderError naming the tool."""
    with chat_server(ChatServer(bad_arguments=True)) as (base_url, _):
        provider = OpenAICompatProvider(base_url, "tiny", KEY)
        with pytest.raises(ProviderError, match=r"tool 'lookup' of agent 'clerk'.*not valid JSON"):
            complete(provider, [{"role": "user", "content": "go"}], [LOOKUP])


def test_server_error_is_retried_then_reported() -> None:
    """A server answering 500 is retried, then reported with its status and message."""
    with chat_server(ChatServer(failure=500)) as (base_url, server):
        provider = OpenAICompatProvider(base_url, "tiny", KEY, max_retries=2)
        with pytest.raises(ProviderError) as caught:
            complete(provider, [{"role": "user", "content": "go"}])
    assert len(server.requests) == 3
    message = str(caught.value)
    assert "answered HTTP 500: the loopback server was told to fail with 500" in message
    assert message.endswith("[provider-error]")
    assert KEY not in failure_text(caught.value)


def test_unauthorized_never_repeats_the_key() -> None:
    """A 401 whose body echoes the key is reported without the key, pointing at the vault."""
    with chat_server(ChatServer(failure=401)) as (base_url, server):
        provider = OpenAICompatProvider(base_url, "tiny", KEY)
        with pytest.raises(ProviderError) as caught:
            complete(provider, [{"role": "user", "content": "go"}])
    assert len(server.requests) == 1
    message = str(caught.value)
    assert "HTTP 401: Incorrect API key provided: ***" in message
    assert "OPENAI_API_KEY" in message
    assert KEY not in failure_text(caught.value)


def test_unreachable_server() -> None:
    """A server that is not listening is reported as unreachable."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", "tiny", KEY, max_retries=0)
    with pytest.raises(ProviderError, match="could not be reached"):
        complete(provider, [{"role": "user", "content": "go"}])


def test_bad_base_url_and_unknown_role() -> None:
    """A base URL that is not http(s) and a message with an unknown role fail before sending."""
    with pytest.raises(ProviderError, match="expected an http:// or https:// URL"):
        OpenAICompatProvider("localhost:8000", "tiny", KEY)
    with chat_server() as (base_url, server):
        provider = OpenAICompatProvider(base_url, "tiny", KEY)
        with pytest.raises(ProviderError, match=r"message 1.*got 'robot'"):
            complete(provider, [{"role": "robot", "content": "go"}])
    assert server.requests == []
