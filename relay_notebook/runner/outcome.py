"""Run outcomes: settling an attempt after its child exits, and the run's status and trace."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agentworks.codes import SECRET_LEAK
from relay_notebook.errors import codes
from relay_notebook.record.checkpoints import read_checkpoints
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import EventWriter, now_ms, read_events
from relay_notebook.record.ledger_events import Event
from relay_notebook.record.rules import after_interruption, waiting_message
from relay_notebook.record.run_record import WAITING, AttemptRecord, RunRecord, WaitState
from relay_notebook.record.store import replaced_database
from relay_notebook.runner.backend import Backend
from relay_notebook.runner.confine import attempt_write_rules
from relay_notebook.runner.leak_check import Leak, check_attempt
from relay_notebook.runner.leave import DISK_FULL_EXIT_CODE
from relay_notebook.workspace.file_io import write_bytes_atomic, write_json_atomic

__all__ = [
    "EXIT_CODES",
    "TRACE_LIMIT",
    "AttemptExit",
    "RunOutcome",
    "full_message",
    "settle_attempt",
    "settle_lost_attempts",
    "write_trace",
]

TRACE_LIMIT = 2 * 1024 * 1024
#: ledger events copied into relay_trace.json (logs stay in dbos_events.jsonl only)
TRACE_KINDS = frozenset(
    {
        "step_start",
        "step_end",
        "step_error",
        "step_reused",
        "workflow_error",
        "crash_injected",
        "receipt",
        "call_reused",
        "attempt_end",
    }
)
EXIT_CODES = {
    "succeeded": 0,
    "failed": 1,
    "denied": 1,
    "rejected": 1,
    "interrupted": 3,
    "needs_reconciliation": 4,
    "waiting": 5,
}


@dataclass
class RunOutcome:
    """What ``relay run`` / ``relay recover`` report: one attempt's end, or a settled run."""

    run_id: str
    relay: str
    status: str
    attempt: int
    result: Any = None
    error: dict[str, Any] | None = None
    executed: list[int] = field(default_factory=list)
    reused: list[int] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "relay": self.relay,
            "status": self.status,
            "attempt": self.attempt,
        }
        if self.status == "succeeded":
            out["result"] = self.result
        else:
            out["error"] = self.error
        out["executed"] = self.executed
        out["reused"] = self.reused
        return out


def full_message(folder: RunFolder, attempt: int) -> str:
    """Why a full disk stopped attempt ``attempt`` and what to type next."""
    return (
        f"The disk holding {folder.path} is full: attempt {attempt} of run {folder.run_id} "
        f"stopped, and the run is interrupted with its checkpoints kept. Free space there "
        f"(df -h {folder.path}), then recover it with: relay recover {folder.run_id}"
    )


def _exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _classify(
    folder: RunFolder,
    record: RunRecord,
    attempt: int,
    events: list[Event],
    backend: Backend | None = None,
) -> tuple[list[int], list[int]]:
    """Function ids executed in this attempt (checkpoint written after it began) and reused.

    DBOS records no "reused" flag: a checkpoint completed before the attempt started and
    replayed by it (a ``step_reused`` event, matched to rows by name and occurrence) was
    reused; DBOS's own operations before the last reused or executed id count as reused too.
    A fork's calls copied from its parent are neither: its attempts replay them, but they were
    copied (``relay runs``, ``relay logs`` and the run graph say so).
    """
    start = next(
        (e for e in events if e.get("attempt") == attempt and e.get("kind") == "attempt_start"),
        None,
    )
    t0 = _started_ms(record, attempt, start)
    rows = read_checkpoints(folder, backend, live=False, record=record)  # the attempt has ended
    if t0 is None:
        return [], []
    executed = [r.function_id for r in rows if (r.completed_at_ms or 0) >= t0]
    reused_calls = {
        (e["step"], e["occurrence"])
        for e in events
        if e.get("kind") == "step_reused" and e.get("attempt") == attempt
    }
    seen: dict[str, int] = {}
    reused: list[int] = []
    for r in rows:
        if (r.completed_at_ms or 0) >= t0:
            continue
        seen[r.name] = seen.get(r.name, 0) + 1
        if (r.name, seen[r.name]) in reused_calls:
            reused.append(r.function_id)
    reach = max([*executed, *reused], default=0)
    for r in rows:
        earlier = r.function_id < reach and (r.completed_at_ms or 0) < t0
        if earlier and r.function_id not in executed and r.function_id not in reused:
            reused.append(r.function_id)
    fork = record.fork
    copied = set(fork.get("copied") or ()) if isinstance(fork, dict) else set()
    return sorted(executed), sorted(i for i in reused if i not in copied)


def _started_ms(record: RunRecord, attempt: int, start: Event | None) -> float | None:
    """When the attempt began, as the supervisor recorded it before starting the child.

    Not the child's ``attempt_start`` event: the relay can rewrite the ledger, and which
    checkpoints count as saved (what ``checkpoints-lost`` later relies on) must not depend on it.
    """
    entry = record.attempt_entry(attempt)
    if entry is not None and isinstance(entry.started_at, int | float):
        return float(entry.started_at)
    return float(start["t0"]) if start else None


@dataclass(frozen=True)
class AttemptExit:
    """How an attempt's child ended, as its supervisor saw it."""

    attempt: int
    attempt_dir: Path
    returncode: int
    crashed_on_purpose: bool = False
    deadline_hit: bool = False
    #: the child's own report of its confinement check, if it sent one
    confinement: dict[str, Any] | None = None


def settle_attempt(
    folder: RunFolder,
    record: RunRecord,
    end: AttemptExit,
    *,
    on_event: Callable[[Event], None] | None = None,
    backend: Backend | None = None,
    secrets: Mapping[str, str] | None = None,
) -> RunOutcome:
    """Record the end of an attempt in the ledger and in ``record`` (saved to run.json); return
    its outcome.

    ``record`` is the run's record as read under the run lock, which is still held: no other
    process writes run.json meanwhile. ``backend`` is the live database setting (it carries a
    PostgreSQL run's password); ``secrets`` are the values the attempt could read: first,
    whatever the attempt left is checked for them (``runner.leak_check``), and a hit fails it
    with ``secret-leak``.
    """
    attempt, attempt_dir, returncode = end.attempt, end.attempt_dir, end.returncode
    leak = _check_secrets(folder, attempt_dir, secrets, backend)
    events = read_events(folder.events)
    replaced = _replaced_database(folder, backend)
    if replaced is None:
        executed, reused = _classify(folder, record, attempt, events, backend)
    else:  # not read: it would be whatever the relay pointed it at (record.store)
        executed, reused = [], []
    outcome_file = _child_file(attempt_dir, "outcome.json")
    stderr_tail = _tail(attempt_dir / "stderr.log")
    result: Any = None
    waiting: dict[str, Any] | None = None
    if leak is not None:  # nothing the attempt left is read as its outcome, nor shown
        status = "failed"
        error = SECRET_LEAK.record(leak.message(folder.run_id, folder.relay))
    elif replaced is not None:  # nor when the relay replaced its database by a link
        status = "failed"
        error = codes.RUN_RECORD_DAMAGED.record(replaced)
    elif outcome_file.is_file() and returncode == 0:
        child = json.loads(_read_child_file(outcome_file))
        status, error = child["status"], child.get("error")
        _explain_closed_server(error, stderr_tail)
        if status == "succeeded":
            result = _take_result(folder, attempt_dir)
        if status == WAITING:
            waiting = _waiting(child.get("waiting"))
            state = WaitState.from_json(waiting)
            if state is not None:
                error = codes.WAITING.record(waiting_message(folder.run_id, state))
            else:  # not what a child writes: read it as an interruption
                status = "interrupted"
                error = codes.INTERRUPTED.record(
                    f"Attempt {attempt} of run {folder.run_id} ended waiting without saying "
                    f"what for. Recover it with: relay recover {folder.run_id}"
                )
    elif end.deadline_hit:
        status = "failed"
        error = codes.DEADLINE_EXCEEDED.record(
            f"Run {folder.run_id} passed its deadline and was stopped; a run keeps "
            f"its first attempt's deadline. Start a new run with: relay run {folder.relay}"
        )
    elif returncode == DISK_FULL_EXIT_CODE:  # the child met a full disk before its outcome
        status = "interrupted"
        error = codes.DISK_FULL.record(full_message(folder, attempt))
    else:
        status = "interrupted"
        how = (
            "crashed on purpose (--crash)"
            if end.crashed_on_purpose
            else _exit_description(returncode)
        )
        error = codes.INTERRUPTED.record(
            f"Attempt {attempt} of run {folder.run_id} {how} before finishing. "
            f"{after_interruption(record)}"
        )
        if stderr_tail and not end.crashed_on_purpose:
            error["stderr"] = stderr_tail
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=attempt)
    ended = writer.emit(
        "attempt_end",
        status=status,
        returncode=returncode,
        exit=_exit_description(returncode),
        executed=executed,
        reused=reused,
        error_code=error.get("code") if error else None,
    )
    writer.sync()
    writer.close()
    if on_event is not None:
        with contextlib.suppress(Exception):
            on_event(ended)
    record.status, record.error = status, error
    record.raw["waiting"] = waiting
    entry = record.attempt_entry(attempt)
    if entry is not None:
        more: dict[str, Any] = {"waiting": waiting} if waiting is not None else {}
        confinement = end.confinement
        if confinement is not None:
            details = {k: v for k, v in confinement.items() if k != "confined"}
            more["confined"] = confinement["confined"] is True
            more["confinement"] = details
        entry.end(
            ended_at=now_ms(),
            returncode=returncode,
            status=status,
            executed=executed,
            reused=reused,
            **more,
        )
    # the trace first: a reader who sees the final status in run.json finds the final trace
    # the ledger as read, and what was appended since, unless another writer appended too
    write_trace(folder, record, [*events, ended] if ended["seq"] == len(events) + 1 else None)
    record.save(folder)
    return RunOutcome(folder.run_id, folder.relay, status, attempt, result, error, executed, reused)


def _replaced_database(folder: RunFolder, backend: Backend | None) -> str | None:
    """Why the run's SQLite database is not read, if the relay replaced it by a link (or by
    anything but a file): ``record.store.replaced_database``."""
    if backend is not None and backend.is_postgres:
        return None
    return replaced_database(folder.database)


def _check_secrets(
    folder: RunFolder,
    attempt_dir: Path,
    secrets: Mapping[str, str] | None,
    backend: Backend | None,
) -> Leak | None:
    """The supervisor's secret check of what the attempt could write (skipped without secrets)."""
    if not secrets:
        return None
    writable = attempt_write_rules(folder, attempt_dir).writable
    sqlite = backend is None or not backend.is_postgres
    postgres = (backend, folder.run_id) if backend is not None and backend.is_postgres else None
    return check_attempt(
        folder.path,
        attempt_dir,
        writable,
        folder.database,
        secrets,
        sqlite=sqlite,
        postgres=postgres,
    )


def _waiting(data: Any) -> dict[str, Any] | None:
    """The child's account of what its run waits for, checked (``None`` if unusable)."""
    state = WaitState.from_json(data)
    if state is None:
        return None
    function_id = data.get("function_id")
    out = {**state.to_json(), "function_id": function_id if type(function_id) is int else None}
    if isinstance(data.get("crash"), dict):
        out["crash"] = data["crash"]  # a --crash point not reached yet: the resumed attempt's
    return out


def settle_lost_attempts(
    folder: RunFolder,
    record: RunRecord,
    backend: Backend | None = None,
    secrets: Mapping[str, str] | None = None,
) -> list[int]:
    """Settle attempts whose supervisor went away before it could, in ``record`` (saved);
    returns their numbers.

    Call only while holding the run lock: then no process of those attempts is running. A
    child that finished on its own (a kernel killed mid-run leaves its child going) left its
    outcome file, which is settled as usual; otherwise the attempt is ``interrupted`` and
    marked ``lost``. Either way it counts against the run's budget of attempts.
    """
    lost = [a for a in record.attempts if not a.ended]
    for a in lost:
        attempt_dir = folder.ipc / f"attempt-{a.id}"
        if _child_file(attempt_dir, "outcome.json").is_file():
            end = AttemptExit(a.attempt, attempt_dir, returncode=0)
            settle_attempt(folder, record, end, backend=backend, secrets=secrets)
        else:
            _settle_lost(folder, record, a, backend)
    return [a.attempt for a in lost]


def _settle_lost(
    folder: RunFolder, record: RunRecord, a: AttemptRecord, backend: Backend | None
) -> None:
    attempt = a.attempt
    executed: list[int] = []
    reused: list[int] = []
    replaced = _replaced_database(folder, backend)
    if replaced is None:  # else not read, and the run fails as a settled attempt's does
        events = read_events(folder.events)
        executed, reused = _classify(folder, record, attempt, events, backend)
        status = "interrupted"
        where = a.executor_id or "its supervisor"
        error = codes.INTERRUPTED.record(
            f"Attempt {attempt} of run {folder.run_id} was lost with {where} on "
            f"{a.host or 'this machine'}, which stopped before the attempt ended. "
            f"{after_interruption(record)}"
        )
    else:
        status, error = "failed", codes.RUN_RECORD_DAMAGED.record(replaced)
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=attempt)
    writer.emit(
        "attempt_end",
        status=status,
        returncode=None,
        exit="supervisor lost",
        executed=executed,
        reused=reused,
        error_code=error["code"],
    )
    writer.sync()
    writer.close()
    a.end(
        ended_at=now_ms(),
        returncode=None,
        status=status,
        executed=executed,
        reused=reused,
        lost=True,
    )
    record.status, record.error = status, error
    record.raw["waiting"] = None
    write_trace(folder, record)
    record.save(folder)


#: what an MCP client raises when its stdio server exits (the MCP SDK's error, under either of
#: its class names), as the child records it: ``TYPE: MESSAGE``
_SERVER_GONE: Final = ("MCPError: Connection closed", "McpError: Connection closed")


def _explain_closed_server(error: Any, stderr_tail: str) -> None:
    """A relay that failed because an MCP server it started exited (a framework's toolset
    raises a bare "Connection closed"): say why it may have, and keep the server's last words
    (its stderr is the attempt's, scrubbed) for the surfaces to show."""
    if not isinstance(error, dict) or error.get("message") not in _SERVER_GONE:
        return
    error["message"] = (
        f"{error['message']}: an MCP server the relay started exited. It runs inside the run's "
        "sandbox, which lets it read only the relay's code, its run folder and what "
        "mcp_servers.yaml declares: declare the server there (servers: NAME: {command: ..., "
        "args: [...]}). The attempt's stderr says what the server met."
    )
    if stderr_tail:
        error["stderr"] = stderr_tail


def _child_file(attempt_dir: Path, name: str) -> Path:
    """A file the child wrote: in the attempt's ``child/`` folder (or, before it, beside the
    spec)."""
    path = attempt_dir / "child" / name
    return path if path.exists() or not (attempt_dir / name).exists() else attempt_dir / name


def _read_child_file(path: Path, limit: int = 8 * 1024 * 1024) -> str:
    """A file from a folder the relay may write: never through a symlink, and bounded."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit).decode("utf-8")


def _take_result(folder: RunFolder, attempt_dir: Path) -> Any:
    """The child's result, copied to relay_result.json, which only the supervisor writes."""
    path = _child_file(attempt_dir, "result.json")
    if not path.exists():  # an attempt of a kit that let the child write it in place
        return json.loads(folder.result.read_text(encoding="utf-8"))
    result = json.loads(_read_child_file(path))
    write_json_atomic(folder.result, result)
    return result


#: one value of the trace, with ``json``'s C encoder (``indent`` would take its Python one,
#: about ten times slower: a trace holds two calls per step)
_VALUE: Final = json.JSONEncoder(sort_keys=True, separators=(", ", ": ")).encode


def _listed(items: list[str]) -> str:
    return "[\n    " + ",\n    ".join(items) + "\n  ]" if items else "[]"


def _encode(fields: dict[str, Any], calls: list[str]) -> bytes:
    """The trace: its fields sorted, one per line, its attempts and its calls (each already
    encoded by ``_VALUE``) one per line, as a reader scrolls through them."""
    parts = {key: _VALUE(value) for key, value in fields.items() if key != "attempts"}
    parts["attempts"] = _listed([_VALUE(a) for a in fields["attempts"]])
    parts["calls"] = _listed(calls)
    body = ",\n".join(f"  {_VALUE(key)}: {parts[key]}" for key in sorted(parts))
    return ("{\n" + body + "\n}\n").encode()


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace").strip()


def write_trace(
    folder: RunFolder, record: RunRecord | None = None, events: list[Event] | None = None
) -> None:
    """``relay_trace.json``: attempts, step calls and errors, capped at 2 MiB with a marker.
    ``events``: the ledger as the caller has just read it and appended to it, if it has."""
    record = RunRecord.load(folder) if record is None else record
    if events is None:
        events = read_events(folder.events)
    calls = [
        _VALUE({k: v for k, v in e.items() if k != "run_id"})
        for e in events
        if e.get("kind") in TRACE_KINDS
    ]
    fields: dict[str, Any] = {
        "run_id": folder.run_id,
        "relay": folder.relay,
        "status": record.status,
        "attempts": [a.to_json() for a in record.attempts],
        "error": record.error,
    }
    encoded = _encode(fields, calls)  # ASCII (``ensure_ascii``): a character is a byte
    if len(encoded) > TRACE_LIMIT:
        # the oldest calls go first, the newest explain the end; the marker's room is kept
        # for the largest count it can say
        fields["truncated"] = {"dropped_calls": len(calls), "limit_bytes": TRACE_LIMIT}
        room = TRACE_LIMIT - len(_encode(fields, [])) - 16  # and the list's own brackets
        kept = len(calls)
        while kept and room - len(calls[kept - 1]) - 6 >= 0:  # ",\n    " before each
            room -= len(calls[kept - 1]) + 6
            kept -= 1
        fields["truncated"]["dropped_calls"] = kept
        encoded = _encode(fields, calls[kept:])
    # derived from the ledger and the record, both synced: never half a file, but no fsync
    write_bytes_atomic(folder.trace, encoded, sync=False)
