"""The ``run`` object of a run graph: which run, its status, the attempt, counts and the error.

Design note: this is what a person reads first on a run view (the header), so it comes from
the same record as everything else (run.json's attempts and status, the step table) and says
why a run stopped in the run's own terms: the relay's exception and line for a failed run,
the crash or lost process for an interrupted one, the uncertain call for one that needs
reconciliation. What to type next depends on where the user is (a notebook or a terminal), so
it is added by the view (``relay_notebook.views.header``), not here.
"""

from __future__ import annotations

import re
import time
from typing import Any, Final, NotRequired, TypedDict

from relay_notebook.history.model_calls import usage_summary
from relay_notebook.history.records import RunLog
from relay_notebook.record.run_record import MAX_ATTEMPTS, WaitState

__all__ = ["ATTEMPTS_MAX", "WaitingHeader", "relay_line", "run_header", "waiting_header"]

#: the attempt budget when run.json does not say
ATTEMPTS_MAX: Final = MAX_ATTEMPTS
_FRAME: Final = re.compile(r'File "([^"]+)", line (\d+)')


def relay_line(traceback: str | None, entry: str = "relay.py") -> int | None:
    """The line of the innermost frame in the relay's module, from a trimmed traceback."""
    if not traceback:
        return None
    lines = [int(n) for file, n in _FRAME.findall(traceback) if file == entry]
    return lines[-1] if lines else None


def _counts(log: RunLog, attempt: int | None) -> tuple[int, int]:
    """Bodies executed and checkpoints reused by ``attempt`` (root workflow and children)."""
    if attempt is None:
        return 0, 0
    record = log.attempts[-1]
    fork = log.run.fork
    copied = set(fork.get("copied") or ()) if isinstance(fork, dict) else set()
    if record.ended_at and not log.run.live:
        reused_ids = set(record.reused) - copied
        return len(record.executed), len(reused_ids)
    steps = log.steps
    executed = sum(1 for s in steps if attempt in s.executed_in)
    reused = sum(1 for s in steps if attempt in s.reused_in and not s.copied_from)
    return executed, reused


def _stopped(log: RunLog) -> str | None:
    """Why the last attempt of an interrupted run ended, in words."""
    if not log.attempts:
        return None
    last = log.attempts[-1]
    crash = last.crash
    if isinstance(crash, dict) and crash.get("step"):
        nth = f"#{crash['occurrence']}" if int(crash.get("occurrence") or 1) > 1 else ""
        return f"crashed on purpose {crash.get('when')} {crash['step']}{nth} (--crash)"
    if last.lost:
        return "its supervisor was lost before the attempt ended"
    code = last.returncode
    if isinstance(code, int) and code < 0:
        return f"its process was killed by signal {-code}"
    if isinstance(code, int):
        return f"its process exited with code {code} before the run finished"
    return None


def _last_words(error: object) -> str | None:
    """The last line an interrupted attempt wrote to stderr (kept in its error record), cut to
    200 characters: what a traceback ends with, e.g. ``OSError: [Errno 28] ...``."""
    tail = error.get("stderr") if isinstance(error, dict) else None
    lines = (
        [line.strip() for line in tail.splitlines() if line.strip()]
        if isinstance(tail, str)
        else []
    )
    return lines[-1][:200] if lines else None


def _recovered(log: RunLog) -> str | None:
    """``recovered from attempt 1's crash``: for a run whose latest attempt went on after
    earlier attempts were interrupted (crashed, killed, lost)."""
    if len(log.attempts) < 2 or log.attempts[-1].status == "interrupted":
        return None
    crashed = [a.attempt for a in log.attempts[:-1] if a.status == "interrupted"]
    if not crashed:
        return None
    if len(crashed) == 1:
        return f"recovered from attempt {crashed[0]}'s crash"
    return f"recovered from the crashes of attempts {', '.join(map(str, crashed))}"


class WaitingHeader(TypedDict):
    """The header's ``waiting``: what the run waits for, in words (``text``) and as facts."""

    kind: str
    text: str
    workflow_id: str
    topic: NotRequired[str]
    until_ms: NotRequired[float]
    #: ``until_ms`` as HH:MM:SS, on the reader's clock
    until: NotRequired[str | None]
    since_ms: NotRequired[float]


def waiting_header(state: WaitState) -> WaitingHeader:
    """The header's ``waiting``: what the run waits for, in words (``text``) and as facts.

    ``waiting for a message on topic "approval" until 14:05:09 UTC`` (when its recv has a
    timeout), or ``sleeping until 14:05:09 UTC``, then that no process is held meanwhile; times
    are the reader's local clock, with its time zone.
    """
    until = (
        time.strftime("%H:%M:%S %Z", time.localtime(state.until_ms / 1000)).strip()
        if state.until_ms is not None
        else None
    )
    if state.kind == "sleep":
        text = f"sleeping until {until}" if until else "sleeping"
    else:
        text = f"waiting for {state.describe()}" + (f" until {until}" if until else "")
    text += " · no process is held meanwhile"
    out = WaitingHeader(kind=state.kind, text=text, workflow_id=state.workflow_id)
    if state.topic is not None:
        out["topic"] = state.topic
    if state.until_ms is not None:
        out["until_ms"] = state.until_ms
        out["until"] = until
    out["since_ms"] = state.since_ms
    return out


def run_header(log: RunLog) -> dict[str, Any]:
    """The ``run`` object of ``relay-graph/v1`` for ``log``: see the module's design note."""
    run = log.run
    attempt = log.attempts[-1].attempt if log.attempts else None
    executed, reused = _counts(log, attempt)
    header: dict[str, Any] = {
        "run_id": log.run_id,
        "relay": run.relay,
        "status": run.status,
        "attempt": attempt,
        "attempts_max": int(run.max_attempts or ATTEMPTS_MAX),
        # attempts that ended waiting are not counted against the budget
        "attempts_counted": sum(1 for a in log.attempts if a.status != "waiting"),
        "executed": executed,
        "reused": reused,
    }
    if run.release:
        header["release"] = run.release
    fork = run.fork
    if isinstance(fork, dict):
        edits = fork.get("edits")
        header["fork"] = {
            "parent": fork.get("parent"),
            "from": fork.get("from"),
            "copied": len(fork.get("copied") or ()),
            "edited": list(edits.get("outputs") or ()) if edits else [],
            "input_edited": bool(edits and edits.get("input")),
            "code": fork.get("code"),
        }
    error = run.error
    status = run.status
    waiting = WaitState.from_json(run.waiting) if status == "waiting" else None
    if waiting is not None:
        header["waiting"] = waiting_header(waiting)
    recovered = _recovered(log)
    if recovered:
        header["recovered"] = recovered
    if log.usage is not None and log.usage.calls:
        header["usage"] = usage_summary(log.usage)
    if status == "interrupted":
        reason = _stopped(log)
        said = _last_words(error)
        if reason and said and reason.startswith("its process"):
            reason = f"{reason}; its last words: {said}"
        uncertain = [r for r in log.receipts if r.state == "pending" and r.blocking]
        if uncertain:
            # its next recovery holds until a person settles them (record.rules): say so now
            header["status"] = "needs_reconciliation"
            header["uncertain"] = [
                {"key": r.key, "call": f"{r.kind} {r.name!r}", "attempt": r.attempt}
                for r in uncertain
            ]
            calls = ", ".join(f"{r.kind} {r.name!r}" for r in uncertain)
            left = (
                f"{calls} {'was' if len(uncertain) == 1 else 'were'} left uncertain: it may or "
                "may not have had its effect"
            )
            reason = f"{reason}; {left}" if reason else left
        if reason:
            header["reason"] = reason
    elif isinstance(error, dict) and status not in ("succeeded", "waiting"):
        # a waiting run's record says what it waits for in "error" too: "waiting" says it here
        shown: dict[str, Any] = {"code": error.get("code"), "message": error.get("message")}
        line = relay_line(error.get("traceback"))
        if line is not None:
            shown["line"] = line
        call = error.get("call")
        if isinstance(call, dict):
            shown["call"] = {k: call[k] for k in ("kind", "name", "key") if k in call}
        header["error"] = shown
    return header
