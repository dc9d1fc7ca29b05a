"""The provider seam: one model turn from chat messages and tool specs.

Messages use the chat-completions shape: ``{"role": "system"|"user"|"assistant"|"tool",
"content": str, ...}``; an assistant turn that calls tools carries ``tool_calls`` and each
result comes back as ``{"role": "tool", "tool_call_id": id, "content": json_text}``. Tool specs
are ``{"name", "description", "parameters"}`` with a JSON Schema for the arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

__all__ = ["AssistantTurn", "ChatMessage", "Provider", "ToolCall", "ToolSpec"]

#: one chat message in the chat-completions shape (see above)
ChatMessage: TypeAlias = dict[str, Any]
#: one tool as the model is offered it: ``{"name", "description", "parameters"}``
ToolSpec: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """The model asks for one tool call."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class AssistantTurn:
    """One model reply: final ``content``, or ``tool_calls`` to run before the next turn."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""
    usage: dict[str, int] = field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        """This turn as an assistant chat message."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ]
        return msg


class Provider(Protocol):
    """Anything that produces the next assistant turn."""

    async def complete(
        self, *, agent: str, messages: list[ChatMessage], tools: list[ToolSpec], model: str
    ) -> AssistantTurn: ...
