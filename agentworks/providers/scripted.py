"""The scripted provider: model turns read from a JSON file, for tests and tutorials.

Design note: the turn to play is chosen from the conversation itself (the number of assistant
messages already in it), never from a counter kept in the provider. A call restarted from scratch
after a crash therefore replays the same script, and every agent call starts at turn 0, so a
scripted run is deterministic across recovery without any state of its own to persist.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from agentworks.errors import ProviderError
from agentworks.providers.base import AssistantTurn, ChatMessage, ToolCall, ToolSpec

__all__ = ["ScriptedProvider"]

_TURN_KEYS = frozenset({"content", "tool_calls"})
_CALL_KEYS = frozenset({"name", "arguments", "id"})
_EXAMPLE = '{"AGENT": [{"tool_calls": [{"name": "TOOL", "arguments": {}}]}, {"content": "done"}]}'


def _kind(value: object) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number"


class ScriptedProvider:
    """Plays the turns scripted for each agent in a JSON file, chosen by turn index."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.model_name = f"scripted:{self.path.name}"
        self._scripts = self._load()

    def __repr__(self) -> str:
        return f"ScriptedProvider({str(self.path)!r})"

    @property
    def agents(self) -> list[str]:
        """The scripted agent names, sorted."""
        return sorted(self._scripts)

    async def complete(
        self, *, agent: str, messages: list[ChatMessage], tools: list[ToolSpec], model: str
    ) -> AssistantTurn:
        """The scripted turn for ``agent`` at the index given by the assistant messages so far."""
        script = self._scripts.get(agent)
        if script is None:
            names = ", ".join(repr(name) for name in self.agents) or "none"
            raise ProviderError(
                f"The model script {self.path} has no turns for agent {agent!r} "
                f"(scripted agents: {names}). Add a list of turns under {agent!r} to the file, "
                "or pass the agent name the script uses."
            )
        index = sum(1 for message in messages if message.get("role") == "assistant")
        if index >= len(script):
            raise ProviderError(
                f"The script for agent {agent!r} in {self.path} has {len(script)} "
                f"turn{'' if len(script) == 1 else 's'} and turn {index + 1} was requested. "
                "Add turns to the script, or end the conversation earlier (a final "
                '{"content": ...} turn ends an agent call).'
            )
        content, calls = script[index]
        tool_calls = [
            ToolCall(
                id=call_id or f"call-{agent}-{index}-{k}",
                name=name,
                arguments=copy.deepcopy(arguments),
            )
            for k, (call_id, name, arguments) in enumerate(calls)
        ]
        return AssistantTurn(content=content, tool_calls=tool_calls, model=self.model_name)

    def _load(self) -> dict[str, list[tuple[str | None, list[tuple[str | None, str, Any]]]]]:
        """Read and check the whole file, so a mistake shows before the first turn is played."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise self._malformed("the file does not exist; create it beside the relay") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise self._malformed(f"it cannot be read as UTF-8 text ({exc})") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self._malformed(
                f"it is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from exc
        if not isinstance(data, dict):
            raise self._malformed(
                f"expected an object mapping agent names to lists of turns, got {_kind(data)}"
            )
        scripts: dict[str, list[tuple[str | None, list[tuple[str | None, str, Any]]]]] = {}
        for agent, turns in data.items():
            if not isinstance(turns, list):
                raise self._malformed(
                    f"agent {agent!r}: expected a list of turns, got {_kind(turns)}"
                )
            scripts[agent] = [
                self._turn(f"agent {agent!r}, turn {i + 1}", turn) for i, turn in enumerate(turns)
            ]
        return scripts

    def _object(self, where: str, value: object, keys: frozenset[str], has: str) -> dict[str, Any]:
        """``value``, checked to be an object with no key but ``keys`` (``has`` names them)."""
        if not isinstance(value, dict):
            raise self._malformed(f"{where}: expected an object, got {_kind(value)}")
        unknown = sorted(set(value) - keys)
        if unknown:
            raise self._malformed(f"{where}: unknown key {unknown[0]!r} ({has})")
        return value

    def _turn(
        self, where: str, raw: object
    ) -> tuple[str | None, list[tuple[str | None, str, Any]]]:
        """One checked turn: its content (JSON values serialized) and its tool calls."""
        turn = self._object(where, raw, _TURN_KEYS, "a turn has 'content' and/or 'tool_calls'")
        if not turn:
            raise self._malformed(f"{where}: expected 'content' or 'tool_calls', got neither")
        content = turn.get("content")
        if content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        raw_calls = turn.get("tool_calls", [])
        if not isinstance(raw_calls, list):
            raise self._malformed(
                f"{where}: 'tool_calls' must be a list of calls, got {_kind(raw_calls)}"
            )
        if "content" not in turn and not raw_calls:
            raise self._malformed(f"{where}: 'tool_calls' is empty and there is no 'content'")
        calls: list[tuple[str | None, str, Any]] = []
        for k, raw_call in enumerate(raw_calls):
            at = f"{where}, tool call {k + 1}"
            call = self._object(at, raw_call, _CALL_KEYS, "a call has 'name', 'arguments', 'id'")
            name = call.get("name")
            if not isinstance(name, str) or not name:
                raise self._malformed(f"{at}: 'name' must be a non-empty string, got {name!r}")
            arguments = call.get("arguments", {})
            if not isinstance(arguments, dict):
                raise self._malformed(
                    f"{at}: 'arguments' must be an object, got {_kind(arguments)}"
                )
            call_id = call.get("id")
            if call_id is not None and (not isinstance(call_id, str) or not call_id):
                raise self._malformed(f"{at}: 'id' must be a non-empty string, got {call_id!r}")
            calls.append((call_id, name, arguments))
        return content, calls

    def _malformed(self, what: str) -> ProviderError:
        return ProviderError(
            f"Cannot use the model script {self.path}: {what}. Expected a JSON object such as "
            f"{_EXAMPLE}."
        )
