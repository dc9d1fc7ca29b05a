"""Model providers: a deterministic scripted one and an OpenAI-compatible HTTP one."""

from agentworks.providers.base import AssistantTurn, Provider, ToolCall

__all__ = ["AssistantTurn", "Provider", "ToolCall"]
