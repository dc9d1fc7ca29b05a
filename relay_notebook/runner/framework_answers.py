"""A fork's new answer for a framework's model request: ``--set STEP#N=...`` in the user's terms.

A framework's model request is checkpointed as the framework's own response object (Pydantic
AI's ``ModelResponse``, the Agents SDK's ``ModelResponse``), which nobody types on a command
line. The value given to ``relay fork --set`` for such a call is read as the answer the model
should have given: text (the model's final message), or ``{"text": ..., "tool_calls": [{"tool":
NAME, "args": {...}}]}``. The saved response is loaded and rebuilt with that answer, keeping its
model name and usage; any other step's value is returned as given.
"""

from __future__ import annotations

import json
from typing import Any

from agentworks.frameworks import step_role
from relay_notebook.errors import InvalidInputError

__all__ = ["edited_answer"]


def _answer(value: Any, step: str) -> tuple[str | None, list[dict[str, Any]]]:
    if isinstance(value, str):
        return value, []
    if isinstance(value, dict) and set(value) <= {"text", "tool_calls"}:
        calls = value.get("tool_calls") or []
        if isinstance(calls, list) and all(isinstance(c, dict) and "tool" in c for c in calls):
            text = value.get("text")
            return (str(text) if text is not None else None), calls
    raise InvalidInputError(
        f"The answer given for {step} is not a model answer: give text (the model's reply), "
        f'or {{"text": ..., "tool_calls": [{{"tool": NAME, "args": {{...}}}}]}}.'
    )


def edited_answer(step: str, saved: Any, value: Any) -> Any:
    """``value`` as the checkpoint of ``step`` whose saved output is ``saved`` (see above)."""
    role = step_role(step)
    if role is None or role.kind != "model" or not _is_response(saved, role.framework):
        return value  # a relay's own step of that name keeps the value as given
    text, calls = _answer(value, step)
    if role.framework == "pydantic_ai":
        return _pydantic(saved, text, calls)
    return _openai(saved, text, calls)


def _is_response(saved: Any, framework: str) -> bool:
    """Whether ``saved`` is the framework's model response (the framework installed)."""
    try:
        if framework == "pydantic_ai":
            from pydantic_ai.messages import ModelResponse
        else:
            from agents.items import ModelResponse  # type: ignore[assignment]
    except ImportError:
        return False
    return isinstance(saved, ModelResponse)


def _pydantic(saved: Any, text: str | None, calls: list[dict[str, Any]]) -> Any:
    from dataclasses import replace

    from pydantic_ai.messages import TextPart, ToolCallPart

    parts: list[Any] = [TextPart(text)] if text is not None else []
    parts += [
        ToolCallPart(str(c["tool"]), c.get("args") or {}, tool_call_id=f"fork-call-{i}")
        for i, c in enumerate(calls, 1)
    ]
    return replace(saved, parts=parts)


def _openai(saved: Any, text: str | None, calls: list[dict[str, Any]]) -> Any:
    from dataclasses import replace

    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    output: list[Any] = []
    if text is not None:
        content = ResponseOutputText(type="output_text", text=text, annotations=[])
        output.append(
            ResponseOutputMessage(
                id="fork-msg",
                type="message",
                role="assistant",
                status="completed",
                content=[content],
            )
        )
    output += [
        ResponseFunctionToolCall(
            type="function_call",
            call_id=f"fork-call-{i}",
            name=str(c["tool"]),
            arguments=json.dumps(c.get("args") or {}),
        )
        for i, c in enumerate(calls, 1)
    ]
    return replace(saved, output=output)
