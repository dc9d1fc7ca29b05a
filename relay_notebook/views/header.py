"""The run header of a run view: the run named on screen, and what to type next.

The header's facts come from ``history.run_summary``; this module words them for the surface
the user is on (``%relay …`` in a notebook, ``relay …`` in a terminal) and draws them for the
fallbacks (text and SVG title) that show where the JupyterLab renderer does not.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["Surface", "attempt_text", "code_text", "header_line", "next_command", "with_next"]

Surface = Literal["notebook", "terminal"]


def _command(surface: Surface, words: str) -> str:
    return f"%relay {words}" if surface == "notebook" else f"relay {words}"


def attempt_text(run: dict[str, Any]) -> str:
    """``attempt 2 of 3``; when earlier attempts ended waiting (not counted against the
    budget), ``attempt 3 · 1 of 3 counted``."""
    attempt, most = run["attempt"], run.get("attempts_max", 3)
    counted = run.get("attempts_counted")
    # a run waiting now: its latest attempt is not counted either, and says so by its status
    plain = attempt - 1 if run.get("status") == "waiting" else attempt
    if isinstance(counted, int) and counted != plain:
        return f"attempt {attempt} · {counted} of {most} counted"
    return f"attempt {attempt} of {most}"


def next_command(run: dict[str, Any], surface: Surface = "notebook") -> str | None:
    """What the user types next for a run in this state, worded for ``surface``; None if
    nothing is needed (a run that succeeded, or one still going)."""
    run_id = run.get("run_id")
    status = run.get("status")
    if status == "interrupted":
        used, most = run.get("attempts_counted", run.get("attempt")), run.get("attempts_max")
        if isinstance(used, int) and isinstance(most, int) and used >= most:
            return None  # the budget is spent: recovery would be refused
        return f"recover it with {_command(surface, f'recover {run_id}')}"
    if status == "needs_reconciliation":
        see = _command(surface, f"reconcile {run_id}")
        return (
            f"see the uncertain call with {see}, settle it with "
            f"{_command(surface, f'reconcile {run_id} --result JSON')} or "
            f"{_command(surface, f'reconcile {run_id} --retry')}, then "
            f"{_command(surface, f'recover {run_id}')}"
        )
    if status == "denied":
        relay = run.get("relay")
        return (
            f"restore access with {_command(surface, f'grant {relay}')}, then "
            f"{_command(surface, f'recover {run_id}')}"
        )
    if status == "failed":
        return f"see its logs with {_command(surface, f'logs {run_id}')}"
    if status == "cancelled":  # by DBOS's own tool: resumed there, then recovered here
        return (
            f"resume it with dbos workflow resume {run_id}, then "
            f"{_command(surface, f'recover {run_id}')}"
        )
    waiting = run.get("waiting")
    if status == "waiting" and isinstance(waiting, dict):
        if waiting.get("kind") == "message":
            topic = waiting.get("topic") or "TOPIC"
            return f"answer it with {_command(surface, f'send {run_id} {topic} JSON')}"
        return f"it resumes once due, on {_command(surface, 'wake')} or the next relay command"
    return None


def code_text(run: dict[str, Any], surface: Surface = "notebook") -> str | None:
    """What the graph is drawn on, when that is not the draft as it is now (``run["code"]``,
    from ``commands.run_flow``): None for a release's run or a draft unchanged since."""
    code = run.get("code")
    if not isinstance(code, dict) or code.get("kind") != "draft" or not code.get("changed"):
        return None
    compare = _command(surface, f"check {run.get('relay')} --replay {run.get('run_id')}")
    if code.get("kept", True):
        return (
            "drawn on the code this run ran; the draft has changed since — compare the draft "
            f"with this run: {compare}"
        )
    return (
        "drawn on the current draft, which has changed since this run started (the run's own "
        f"code was not kept): calls may not match their nodes; compare: {compare}"
    )


def with_next(run: dict[str, Any], surface: Surface = "notebook") -> dict[str, Any]:
    """``run`` with its ``next`` and ``drawn`` for ``surface`` (a copy; none added when
    nothing is needed)."""
    out = dict(run)
    hint = next_command(run, surface)
    if hint is not None:
        out["next"] = hint
    else:
        out.pop("next", None)
    drawn = code_text(run, surface)
    if drawn is not None:
        out["drawn"] = drawn
    else:
        out.pop("drawn", None)
    return out


def header_line(run: dict[str, Any]) -> str:
    """The header as one line: run, status, attempt of the budget, counts, why, what next."""
    parts = [f"run {run.get('run_id')}: {run.get('status')}"]
    if run.get("attempt"):
        parts.append(attempt_text(run))
    counts = []
    if run.get("executed"):
        counts.append(f"{run['executed']} executed")
    if run.get("reused"):
        counts.append(f"{run['reused']} reused")
    if counts:
        parts.append(", ".join(counts))
    fork = run.get("fork")
    if isinstance(fork, dict):
        parts.append(
            f"forked from {fork.get('parent')} at {fork.get('from')} "
            f"({fork.get('copied', 0)} copied)"
        )
    line = " · ".join(parts)
    error = run.get("error")
    waiting = run.get("waiting")
    if isinstance(waiting, dict) and waiting.get("text"):
        line += f" — {waiting['text']}"
    if run.get("reason"):
        line += f" — {run['reason']}"
    elif isinstance(error, dict) and error.get("message"):
        where = f" (relay.py line {error['line']})" if error.get("line") else ""
        line += f" — {error['message']}{where}"
    if run.get("result") is not None:
        line += f" — result: {run['result']}"
    if run.get("recovered"):
        line += f" — {run['recovered']}"
    if run.get("usage"):
        line += f" — {run['usage']}"
    if run.get("note"):
        line += f" — {run['note']}"
    if run.get("drawn"):
        line += f" — {run['drawn']}"
    if run.get("next"):
        line += f"; {run['next']}"
    return line
