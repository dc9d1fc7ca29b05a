"""The call journal: intent before every platform call, its outcome after, durable on disk.

Design note: a process can die between an agent, MCP or service call and the checkpoint of
the step that made it. DBOS would then run the call again on recovery, which is wrong for a
call that may already have had its effect. The journal records an *intent* (fsync'd) before
the call and its *result* or *error* after, keyed by where the call sits in the workflow
(workflow id, step id, n-th platform call of that step's body). On recovery a key with a
result returns the saved result; a key with only an intent is *uncertain*: the run stops for
reconciliation unless the call was declared ``replay_safe`` or the user resolved it
(``relay reconcile``), by supplying the outcome or allowing a retry.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentworks import _runtime
from agentworks.errors import SecretLeakError
from agentworks.redact import Redactor

__all__ = ["CallState", "Journal"]

State = Literal["new", "pending", "done", "failed", "retry"]


@dataclass(frozen=True)
class CallState:
    """What the journal knows about one call key."""

    key: str
    state: State
    call: dict[str, Any] | None = None
    result: Any = None
    attempt: int | None = None
    #: a person must decide (``relay reconcile``) before the run can go on
    blocking: bool = False

    def describe(self) -> str:
        """``agent 'clerk'`` or ``tool 'charge'``: the call in the user's terms."""
        call = self.call or {}
        if "tool" in call:
            return f"tool {call['tool']!r}"
        return f"{call.get('kind', 'call')} {call.get('name')!r}"


class Journal:
    """Append-only JSON lines in ``<run>/.relay_ipc/journal.jsonl``.

    Inside a run, an entry carrying a vault value is refused (``SecretLeakError``) before it
    is written: callers scrub call descriptions and refuse results first, so this is the last
    check, not the usual one. ``redactor`` defaults to the run's, if one is installed.
    """

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        if redactor is None and _runtime._current is not None:
            redactor = _runtime._current.redactor
        self._redactor = redactor

    def entries(self) -> list[dict[str, Any]]:
        """Every complete entry, in the order written (a torn last line is skipped)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for line in data.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a killed writer
            if isinstance(entry, dict):
                out.append(entry)
        return out

    def _append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, sort_keys=True) + "\n"
        leaked = self._redactor.find(entry) if self._redactor else None
        if leaked:
            raise SecretLeakError(
                f"A {entry['kind']} entry for call {entry['key']} carries the value of vault "
                f"secret {leaked}; the run's call journal is kept on disk, so it was refused."
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            prefix = b""
            if size:
                with open(self.path, "rb") as fh:
                    fh.seek(size - 1)
                    prefix = b"" if fh.read(1) == b"\n" else b"\n"
            os.write(fd, prefix + line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def states(self) -> dict[str, CallState]:
        """The latest state of every key, in first-seen order."""
        states: dict[str, CallState] = {}
        for e in self.entries():
            key = e["key"]
            prev = states.get(key)
            kind = e["kind"]
            if kind == "intent":
                call = e.get("call") or {}
                blocking = call.get("kind") in {"agent", "mcp", "step"} and not call.get(
                    "replay_safe"
                )
                states[key] = CallState(
                    key, "pending", e.get("call"), None, e.get("attempt"), blocking
                )
            elif kind == "lookup_failed" and prev is not None and prev.state == "pending":
                states[key] = CallState(key, "pending", prev.call, None, prev.attempt, True)
            elif kind == "result" and prev is not None:
                states[key] = CallState(key, "done", prev.call, e.get("result"), prev.attempt)
            elif kind == "error" and prev is not None:
                states[key] = CallState(key, "failed", prev.call, e.get("error"), prev.attempt)
            elif kind == "resolved" and prev is not None:
                if e.get("retry"):
                    states[key] = CallState(key, "retry", prev.call, None, prev.attempt)
                else:
                    states[key] = CallState(key, "done", prev.call, e.get("result"), prev.attempt)
        return states

    def state(self, key: str) -> CallState:
        return self.states().get(key, CallState(key, "new"))

    def pending(self) -> list[CallState]:
        """Uncertain calls: an intent with no result, error or resolution."""
        return [s for s in self.states().values() if s.state == "pending"]

    def blocking(self) -> list[CallState]:
        """Uncertain calls only a person can settle (not replay-safe, or a failed lookup)."""
        return [s for s in self.pending() if s.blocking]

    def lookup_failed(self, key: str, reason: str) -> None:
        self._append({"kind": "lookup_failed", "key": key, "reason": reason})

    def intent(self, key: str, call: dict[str, Any], attempt: int) -> None:
        self._append({"kind": "intent", "key": key, "call": call, "attempt": attempt})

    def result(self, key: str, result: Any) -> None:
        self._append({"kind": "result", "key": key, "result": result})

    def error(self, key: str, error: str) -> None:
        self._append({"kind": "error", "key": key, "error": error})

    def resolve(self, key: str, *, result: Any = None, retry: bool = False) -> None:
        """Reconcile an uncertain call: its ``result`` as established by the user, or a retry."""
        self._append({"kind": "resolved", "key": key, "result": result, "retry": retry})
