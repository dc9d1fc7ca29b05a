"""``recovery="restart"``: a restarted agent reuses its journaled tool results.

Design note: checkpointing a whole agent call cannot make its individual tool effects durable.
In restart mode each Python tool call is journaled under the agent call's key plus the tool
name and its normalized JSON arguments: intent before the call, result before the model sees
it. After a process interruption the whole agent starts again; identical requests get their
saved results (the tool body does not run twice), and calls left pending by the crash are
resolved first through the tool's ``recover=`` lookup of a durable service receipt. A missing
or failing lookup stops the run for reconciliation, and an exception from a tool body stops
the agent rather than being handed to the model to work around. The journal protects the
declared Python tools only; a restarted model may still choose new arguments.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentworks import codes
from agentworks._runtime import Runtime
from agentworks.errors import AgentError, SecretLeakError, ToolError
from agentworks.journal import Journal

__all__ = ["ToolJournal", "operation_key"]


def operation_key(agent_key: str, tool: str, arguments: dict[str, Any]) -> str:
    """One operation: the agent call, the tool name and its normalized JSON arguments."""
    normal = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(normal.encode()).hexdigest()[:16]
    return f"{agent_key}/tool:{tool}:{digest}"


class ToolJournal:
    """Journaled tool calls of one restartable agent call."""

    def __init__(self, rt: Runtime, journal: Journal, agent_key: str, agent: str) -> None:
        self.rt, self.journal, self.agent_key, self.agent = rt, journal, agent_key, agent

    async def resolve_pending(self, tools: dict[str, Any]) -> None:
        """Before a fresh agent starts: settle every tool call the crash left uncertain."""
        prefix = self.agent_key + "/tool:"
        for state in self.journal.pending():
            if not state.key.startswith(prefix) or state.call is None:
                continue
            name, arguments = state.call["tool"], state.call["arguments"]
            entry = tools.get(name)
            lookup = entry.get("lookup") if entry else None
            try:
                if lookup is None:
                    raise ToolError(f"tool {name!r} has no recover= lookup")
                result = await lookup(arguments)
            except Exception as exc:
                self.rt.stop(
                    "needs_reconciliation",
                    codes.NEEDS_RECONCILIATION.record(
                        f"Run {self.rt.run_id} stopped: agent {self.agent!r} was "
                        f"interrupted during tool {name!r} and its outcome could not be "
                        f"established ({type(exc).__name__}: {self.rt.redactor.scrub(str(exc))})"
                        f". Supply it with 'relay reconcile {self.rt.run_id} --key {state.key} "
                        f"--result JSON' or allow a retry with --retry, then recover.",
                        call={"key": state.key, "kind": "tool", "name": name},
                    ),
                )
            self.journal.result(state.key, result)
            self.rt.emit("tool_recovered", agent=self.agent, tool=name, key=state.key)

    async def call(self, name: str, arguments: dict[str, Any], invoke: Any) -> tuple[Any, bool]:
        """Run one tool call through the journal; returns (result, reused)."""
        key = operation_key(self.agent_key, name, arguments)
        state = self.journal.state(key)
        if state.state == "done":
            return state.result, True
        if state.state == "pending":
            raise AgentError(
                f"agent {self.agent!r}: tool call {name!r} is still uncertain; recovery must "
                f"resolve it before the agent runs again."
            )
        safe_args = json.loads(self.rt.redactor.scrub(json.dumps(arguments, sort_keys=True)))
        self.journal.intent(key, {"tool": name, "arguments": safe_args}, self.rt.attempt)
        try:
            result = await invoke(arguments)
        except ToolError as exc:
            if type(exc).__name__ == "ToolArgumentsError":
                # the body never ran: certain, and the model may correct its arguments
                self.journal.error(key, self.rt.redactor.scrub(str(exc)))
                raise
            shown = self.rt.redactor.scrub(str(exc))
            self.journal.error(key, shown)
            raise AgentError(
                f"agent {self.agent!r} stopped: tool {name!r} raised, so its effect is "
                f"uncertain ({shown}). In recovery='restart' mode a failing tool stops the agent."
            ) from None
        leaked = self.rt.redactor.find(result)
        if leaked:
            self.journal.error(key, "result withheld: it contained a vault value")
            raise SecretLeakError(
                f"agent {self.agent!r} stopped: tool {name!r} returned the value of vault secret "
                f"{leaked}. In recovery='restart' mode tool results are journaled on disk, so it "
                f"was refused; keep secrets out of what tools return."
            )
        self.journal.result(key, result)
        return result, False
