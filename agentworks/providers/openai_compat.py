"""The OpenAI-compatible provider: one chat-completions request per model turn.

Design note: a fresh ``AsyncOpenAI`` client is opened and closed for every turn. Its connection
pool belongs to the event loop that created it, and the runner may drive successive steps from
different loops; a per-turn client costs one TCP connection and cannot outlive its loop. The API
key lives only in that client and in one private attribute: every message this module builds
is scrubbed of it, and the SDK's exception is not chained when its text carries the key.
"""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import urlsplit

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
)

from agentworks.errors import ProviderError
from agentworks.providers.base import AssistantTurn, ChatMessage, ToolCall, ToolSpec

__all__ = ["OpenAICompatProvider"]

_ROLES = ("system", "user", "assistant", "tool")
_UNREACHABLE = "Check that the server is running and that OPENAI_BASE_URL in the vault is right"


class OpenAICompatProvider:
    """Asks any server speaking the chat-completions API for the next assistant turn."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float = 60,
        *,
        max_retries: int = 2,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ProviderError(
                f"Cannot use model server base URL {base_url!r}: expected an http:// or https:// "
                "URL such as https://api.openai.com/v1. Set OPENAI_BASE_URL in the vault."
            )
        if not model:
            raise ProviderError(
                "Cannot use the OpenAI-compatible provider without a model name: expected "
                "model='openai:MODEL', got an empty MODEL."
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.__api_key = api_key or "unused"

    def __repr__(self) -> str:
        return f"OpenAICompatProvider(base_url={self.base_url!r}, model={self.model!r})"

    async def complete(
        self, *, agent: str, messages: list[ChatMessage], tools: list[ToolSpec], model: str
    ) -> AssistantTurn:
        """One chat completion for ``agent``; ``model`` (the profile as written) is not sent."""
        wire_messages = [self._to_wire(i, message) for i, message in enumerate(messages)]
        wire_tools = [{"type": "function", "function": spec} for spec in tools]
        client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.__api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        try:
            async with client:
                completion = await client.chat.completions.create(
                    model=self.model,
                    messages=cast("list[ChatCompletionMessageParam]", wire_messages),
                    tools=cast("list[ChatCompletionToolUnionParam]", wire_tools)
                    if wire_tools
                    else openai.omit,
                )
        except openai.APIStatusError as exc:
            raise self._error(
                exc, f"answered HTTP {exc.status_code}: {self._server_message(exc)}"
            ) from self._cause(exc)
        except openai.APITimeoutError as exc:
            raise self._error(
                exc, f"did not answer within {self.timeout:g} s", _UNREACHABLE
            ) from self._cause(exc)
        except openai.APIConnectionError as exc:
            raise self._error(
                exc, f"could not be reached ({exc.message})", _UNREACHABLE
            ) from self._cause(exc)
        except openai.OpenAIError as exc:
            raise self._error(exc, f"failed: {exc}") from self._cause(exc)
        return self._from_wire(agent, completion)

    def _to_wire(self, index: int, message: dict[str, Any]) -> dict[str, Any]:
        """Our chat message as the API's: JSON-string tool arguments, typed tool calls."""
        role = message.get("role")
        if role not in _ROLES:
            raise ProviderError(
                f"Cannot send message {index + 1} to the model server: expected a role among "
                f"{', '.join(_ROLES)}, got {role!r}."
            )
        if role == "tool":
            content = message.get("content")
            return {
                "role": "tool",
                "tool_call_id": str(message.get("tool_call_id", "")),
                "content": content if isinstance(content, str) else json.dumps(content),
            }
        wire: dict[str, Any] = {"role": role, "content": message.get("content")}
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            wire["tool_calls"] = [self._call_to_wire(call) for call in calls]
        elif wire["content"] is None:
            wire["content"] = ""
        return wire

    @staticmethod
    def _call_to_wire(call: dict[str, Any]) -> dict[str, Any]:
        if "function" in call:  # already in the API's shape
            return {"type": "function", **call}
        return {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
        }

    def _from_wire(self, agent: str, completion: ChatCompletion) -> AssistantTurn:
        """The API's reply as an AssistantTurn; tool arguments must be a JSON object."""
        resolved = completion.model or self.model
        if not completion.choices:
            raise ProviderError(
                f"The model server at {self.base_url} returned no choices for agent {agent!r} "
                f"(model {resolved}); expected one assistant message. Retry, or check the server."
            )
        message = completion.choices[0].message
        tool_calls: list[ToolCall] = []
        for call in message.tool_calls or []:
            if call.type != "function":
                raise ProviderError(
                    f"The model {resolved} asked agent {agent!r} for a {call.type!r} tool call; "
                    "only function tool calls are supported."
                )
            tool_calls.append(
                ToolCall(
                    id=call.id,
                    name=call.function.name,
                    arguments=self._arguments(
                        agent, resolved, call.function.name, call.function.arguments
                    ),
                )
            )
        usage: dict[str, int] = {}
        if completion.usage is not None:
            usage = {
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
                "total_tokens": completion.usage.total_tokens,
            }
        return AssistantTurn(
            content=message.content, tool_calls=tool_calls, model=resolved, usage=usage
        )

    @staticmethod
    def _arguments(agent: str, model: str, tool: str, text: str) -> dict[str, Any]:
        if not text.strip():
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProviderError(
                f"The model {model} called tool {tool!r} of agent {agent!r} with arguments that "
                f"are not valid JSON ({exc.msg} at position {exc.pos}): {text[:200]!r}. Retry the "
                "call, or use a model that supports tool calling."
            ) from exc
        if not isinstance(value, dict):
            raise ProviderError(
                f"The model {model} called tool {tool!r} of agent {agent!r} with arguments "
                f"{text[:200]!r}; expected a JSON object. Retry the call, or use a model that "
                "supports tool calling."
            )
        return cast("dict[str, Any]", value)

    @staticmethod
    def _server_message(exc: openai.APIStatusError) -> str:
        body = exc.body
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return str(body["message"])
        return exc.message

    def _error(self, exc: Exception, what: str, hint: str | None = None) -> ProviderError:
        if hint is None:
            status = getattr(exc, "status_code", None)
            hint = {
                401: "Check OPENAI_API_KEY in the vault",
                403: "Check that the API key may use this model",
                404: "Check OPENAI_BASE_URL in the vault and the model name",
            }.get(status or 0, "Retry the run later, or check the server's logs")
        text = f"The model server at {self.base_url} (model {self.model}) {what}. {hint}."
        return ProviderError(self._redact(text))

    def _cause(self, exc: Exception) -> Exception | None:
        """The SDK error to chain, unless its text carries the API key."""
        return None if self._redact(str(exc)) != str(exc) else exc

    def _redact(self, text: str) -> str:
        key = self.__api_key
        return text.replace(key, "***") if key and key != "unused" else text
