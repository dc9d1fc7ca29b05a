"""``agent()``: one model conversation with tools, as a journaled platform call."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentworks._runtime import Runtime, current
from agentworks.errors import AgentError, AgentOutputError, AgentworksError, ToolError
from agentworks.platform import (
    current_call_key,
    in_tool,
    journal_of,
    platform_call,
    platform_entry,
)
from agentworks.providers.base import AssistantTurn, Provider, ToolCall
from agentworks.restart import ToolJournal

__all__ = ["agent"]

MAX_MESSAGES = 100
MAX_TURNS = 100


def _check_arguments(
    name: str,
    user_message: str | None,
    messages: Sequence[str] | None,
    max_turns: int,
    recovery: str | None,
    replay_safe: bool,
) -> list[str]:
    if not isinstance(name, str) or not name:
        raise AgentError("agent() needs name=, e.g. agent(name='extract', ...).")
    if (user_message is None) == (messages is None):
        raise AgentError(
            f"agent {name!r}: pass exactly one of user_message='...' or messages=['...', ...]."
        )
    texts = [user_message] if user_message is not None else list(messages or [])
    if not 1 <= len(texts) <= MAX_MESSAGES or not all(isinstance(t, str) for t in texts):
        raise AgentError(
            f"agent {name!r}: expected 1 to {MAX_MESSAGES} user messages as strings, got "
            f"{len(texts)}."
        )
    if not isinstance(max_turns, int) or not 1 <= max_turns <= MAX_TURNS:
        raise AgentError(
            f"agent {name!r}: max_turns must be an integer from 1 to {MAX_TURNS}, got "
            f"{max_turns!r}."
        )
    if recovery not in (None, "restart"):
        raise AgentError(f"agent {name!r}: recovery must be None or 'restart', got {recovery!r}.")
    if recovery == "restart" and replay_safe:
        raise AgentError(
            f"agent {name!r}: recovery='restart' cannot be combined with replay_safe=True; "
            f"the restart journal already decides which tool calls may run again."
        )
    return texts


def _parse_output(name: str, content: str, schema: dict[str, Any]) -> Any:
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :] if "\n" in text else text
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise AgentOutputError(
            f"agent {name!r} was asked for JSON (output_schema) but its final message is not "
            f"JSON: {content[:200]!r}. Catch AgentOutputError to retry or ask another agent."
        ) from exc
    import jsonschema

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise AgentOutputError(
            f"agent {name!r} returned JSON that does not match output_schema at {where}: "
            f"{exc.message}."
        ) from exc
    return value


class _Conversation:
    """The loop: ask the model, run the tools it calls, until it answers."""

    def __init__(
        self,
        rt: Runtime,
        name: str,
        provider: Provider,
        model: str,
        tools: dict[str, Any],
        max_turns: int,
        call_dir: Path,
    ) -> None:
        self.rt, self.name, self.provider, self.model = rt, name, provider, model
        self.tools, self.max_turns, self.call_dir = tools, max_turns, call_dir
        self.receipts: list[dict[str, Any]] = []
        self.resolved_model = model
        self.tool_journal: ToolJournal | None = None
        #: tokens over the call's turns as the provider reported them (None: never reported)
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    async def _run_tool(self, call: ToolCall) -> Any:
        spec = self.tools.get(call.name)
        started = time.perf_counter()
        receipt: dict[str, Any] = {"tool": call.name, "arguments": call.arguments}
        token = in_tool.set(call.name)
        try:
            if spec is None:
                raise ToolError(
                    f"unknown tool {call.name!r}; available: {', '.join(sorted(self.tools))}"
                )
            if self.tool_journal is not None:
                result, reused = await self.tool_journal.call(
                    call.name, call.arguments, spec["invoke"]
                )
                receipt["reused"] = reused
            else:
                result = await spec["invoke"](call.arguments)
            receipt["result"] = result
            return result
        except ToolError as exc:
            receipt["error"] = str(exc)
            cause = exc.__cause__
            if isinstance(cause, AgentworksError) and not isinstance(cause, ToolError):
                raise cause from None  # nested calls, denied access: not for the model to fix
            return {"error": str(exc)}
        finally:
            in_tool.reset(token)
            receipt["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
            self.receipts.append(receipt)

    def _count(self, usage: dict[str, int]) -> None:
        if "prompt_tokens" in usage:
            self.input_tokens = (self.input_tokens or 0) + int(usage["prompt_tokens"])
        if "completion_tokens" in usage:
            self.output_tokens = (self.output_tokens or 0) + int(usage["completion_tokens"])

    async def converse(self, messages: list[dict[str, Any]], texts: list[str]) -> str:
        specs = [t["spec"] for _, t in sorted(self.tools.items())]
        content = ""
        for text in texts:
            messages.append({"role": "user", "content": text})
            for _turn in range(self.max_turns):
                reply: AssistantTurn = await self.provider.complete(
                    agent=self.name, messages=messages, tools=specs, model=self.model
                )
                self.resolved_model = reply.model or self.resolved_model
                self._count(reply.usage)
                messages.append(reply.to_message())
                if not reply.tool_calls:
                    content = reply.content or ""
                    break
                for call in reply.tool_calls:
                    result = await self._run_tool(call)
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": call.id,
                            "name": call.name,
                            "content": json.dumps(result, sort_keys=True, default=repr),
                        }
                    )
            else:
                raise AgentError(
                    f"agent {self.name!r} used all {self.max_turns} turns without a final "
                    f"answer; raise max_turns or simplify the task."
                )
        return content


async def _tool_table(
    rt: Runtime, name: str, tools: Sequence[Any], mcp: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for t in tools:
        spec = getattr(t, "spec", None)
        if spec is None:
            raise AgentError(
                f"agent {name!r}: tools=[...] takes functions decorated with @tool, got "
                f"{type(t).__name__}."
            )
        table[t.name] = {
            "spec": t.spec(),
            "invoke": t.invoke,
            "lookup": t.lookup if getattr(t, "recover", None) is not None else None,
        }
    for entry in mcp:
        from agentworks.mcp import attached_tools

        table.update(await attached_tools(rt, entry))
    return table


@platform_entry
async def agent(
    *,
    name: str,
    system_prompt: str | None = None,
    user_message: str | None = None,
    messages: Sequence[str] | None = None,
    model: str | None = None,
    tools: Sequence[Any] = (),
    mcp: Sequence[dict[str, Any]] = (),
    skills: Sequence[str] = (),
    output_schema: dict[str, Any] | None = None,
    max_turns: int = 20,
    recovery: str | None = None,
    replay_safe: bool = False,
) -> Any:
    """Run an agent to its final message (parsed JSON when ``output_schema`` is given)."""
    texts = _check_arguments(name, user_message, messages, max_turns, recovery, replay_safe)
    rt = current("agent()")
    if skills:
        raise AgentError(
            f"agent {name!r}: skills are not available in relay_notebook yet "
            f"(skills={list(skills)}); describe the skill in system_prompt instead."
        )
    from agentworks.providers.resolve import resolve_provider
    from agentworks.vault import vault

    provider, resolved = resolve_provider(
        model, default=rt.default_model, base_dir=rt.code_dir, secret=vault
    )

    async def perform() -> Any:
        try:
            key: str | None = current_call_key()
        except AgentworksError:
            key = None  # relay_durability: none journals nothing
        call_dir = rt.next_call_dir(name, key)
        table = await _tool_table(rt, name, tools, mcp)
        convo = _Conversation(rt, name, provider, resolved, table, max_turns, call_dir)
        if recovery == "restart":
            if mcp:
                raise AgentError(
                    f"agent {name!r}: recovery='restart' journals Python @tool calls only; "
                    f"attached MCP servers are not available in this mode."
                )
            convo.tool_journal = ToolJournal(rt, journal_of(rt), current_call_key(), name)
            await convo.tool_journal.resolve_pending(table)
        history: list[dict[str, Any]] = []
        if system_prompt:
            history.append({"role": "system", "content": system_prompt})
        started = time.perf_counter()
        error: str | None = None
        try:
            content = await convo.converse(history, texts)
            return _parse_output(name, content, output_schema) if output_schema else content
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            receipt = {
                "agent": name,
                "model": convo.resolved_model,
                "turns": sum(1 for m in history if m["role"] == "assistant"),
                "messages": history,
                "tool_calls": convo.receipts,
                "input_tokens": convo.input_tokens,
                "output_tokens": convo.output_tokens,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                "error": error,
            }
            text = rt.redactor.scrub(json.dumps(receipt, indent=2, sort_keys=True, default=repr))
            (call_dir / "receipt.json").write_text(text + "\n", encoding="utf-8")
            try:
                call_key: str | None = current_call_key()  # links the receipt to its step
            except AgentworksError:
                call_key = None  # relay_durability: none journals nothing
            rt.emit(
                "receipt",
                key=call_key,
                call_kind="agent",
                name=name,
                model=convo.resolved_model,
                turns=receipt["turns"],
                input_tokens=convo.input_tokens,
                output_tokens=convo.output_tokens,
                duration_ms=receipt["duration_ms"],
                tool_calls=[
                    {k: v for k, v in r.items() if k in {"tool", "duration_ms", "error"}}
                    for r in convo.receipts
                ],
                call_dir=call_dir.name,
                error=error,
            )

    call = {"model": resolved, "tools": [getattr(t, "name", "?") for t in tools]}
    return await platform_call(
        "agent", name, call, perform, replay_safe=replay_safe, restartable=recovery == "restart"
    )
