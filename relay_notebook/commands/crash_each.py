"""``relay test NAME --crash-each``: crash a relay at every point it can crash, recover each run,
and compare with an uncrashed run.

Design note: the relay runs once cleanly; every call of that run's workflow (steps, agent and
MCP calls) then gives two crash points, ``after:CALL#N`` (its checkpoint saved) and
``during:CALL#N`` (its body ran, no checkpoint). Each point is a real run killed there and
recovered until it settles, exactly as a user would with ``--crash`` and ``relay recover``.
Two things are reported: a run whose result differs from the clean one (something in the
workflow body is not deterministic — time, randomness, I/O outside steps — or a step is not
safe to repeat), and the calls whose bodies ran more than once (the at-least-once steps that
must be idempotent). A run that stops for reconciliation (an uncertain agent or MCP call killed
mid-way) is reported as such, not as a failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from relay_notebook import commands
from relay_notebook.errors import CleanRunFailedError
from relay_notebook.workspace import Workspace

__all__ = ["CrashEachReport", "CrashPoint", "crash_each"]

_SETTLED: Final = frozenset({"succeeded", "failed", "rejected", "needs_reconciliation"})
MAX_RECOVERIES: Final = 3
TIMEOUT_S: Final = 120.0


@dataclass
class CrashPoint:
    """One crashed-and-recovered run."""

    point: str
    run_id: str
    status: str
    attempts: int
    same_result: bool | None
    ran_again: list[str] = field(default_factory=list)
    result: Any = None
    note: str = ""


@dataclass
class CrashEachReport:
    """The clean run and every crash point; ``ok`` when every recovered result matches."""

    relay: str
    clean_run: str
    clean_result: Any
    points: list[CrashPoint]

    @property
    def differing(self) -> list[CrashPoint]:
        return [p for p in self.points if p.same_result is False]

    @property
    def repeated(self) -> list[str]:
        """Calls whose bodies ran more than once at some crash point (must be idempotent)."""
        seen: dict[str, None] = {}
        for p in self.points:
            seen.update(dict.fromkeys(p.ran_again))
        return list(seen)

    @property
    def ok(self) -> bool:
        return not self.differing

    def to_dict(self) -> dict[str, Any]:
        return {
            "relay": self.relay,
            "clean_run": self.clean_run,
            "clean_result": self.clean_result,
            "ok": self.ok,
            "differing": [p.point for p in self.differing],
            "repeated": self.repeated,
            "points": [asdict(p) for p in self.points],
        }


def _calls(workspace: Workspace, run_id: str) -> list[str]:
    """The clean run's calls in order, as crash targets (``fetch#2``): its root workflow's, then
    the steps its child workflows ran, numbered as ``--crash`` counts them (over the whole
    attempt, which is how the ledger numbers them)."""
    log = commands.logs(workspace, run_id)
    calls = [
        s.label
        for s in log.steps
        if s.workflow_id == run_id and s.kind != "workflow" and not s.name.startswith("DBOS.")
    ]
    for e in log.events_of("step_start", 1):
        step, occurrence = e.get("step"), e.get("occurrence")
        if e.get("workflow_id") != run_id and isinstance(step, str) and occurrence:
            label = f"{step}#{occurrence}"
            if label not in calls:
                calls.append(label)
    return calls


def _ran_again(workspace: Workspace, run_id: str) -> list[str]:
    log = commands.logs(workspace, run_id)
    return [s.label for s in log.steps if len(s.executed_in) > 1]


def crash_each(
    workspace: Workspace,
    relay: str,
    run_input: Any = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> CrashEachReport:
    """Run ``relay`` cleanly, then crashed at every point and recovered (see the module note)."""
    clean = commands.run(workspace, relay, run_input=run_input).wait(TIMEOUT_S)
    if clean.status != "succeeded":
        # with no input, the likeliest cause is a relay that needs one: say how to pass it
        hint = (
            f" It ran with an empty input: if {relay} needs one, pass it with: relay test "
            f"{relay} --crash-each --input JSON"
            if not run_input
            else ""
        )
        raise CleanRunFailedError(
            f"The clean run {clean.run_id} of {relay} ended {clean.status} "
            f"({(clean.error or {}).get('message', 'no error')}); --crash-each compares "
            f"crashed runs with a clean one, so fix that first (relay logs {clean.run_id}).{hint}"
        )
    points = []
    for call in _calls(workspace, clean.run_id):
        for when in ("after", "during"):
            point = f"{when}:{call}"
            if progress:
                progress(point)
            first = commands.run(workspace, relay, run_input=run_input, crash=point)
            outcome = first.wait(TIMEOUT_S)
            note = ""
            if outcome.status != "interrupted":
                note = f"the run ended {outcome.status} before the crash point"
            recoveries = 0
            while outcome.status not in _SETTLED and recoveries < MAX_RECOVERIES:
                outcome = commands.recover(workspace, first.run_id).wait(TIMEOUT_S)
                recoveries += 1
            same: bool | None = None
            if outcome.status == "succeeded":
                same = outcome.result == clean.result
            elif outcome.status == "needs_reconciliation":
                note = "stopped for reconciliation: an uncertain call was killed mid-way"
            else:
                same = False
                note = note or f"ended {outcome.status}: {(outcome.error or {}).get('message')}"
            points.append(
                CrashPoint(
                    point, first.run_id, outcome.status, outcome.attempt, same,
                    _ran_again(workspace, first.run_id), outcome.result, note,
                )
            )  # fmt: skip
    return CrashEachReport(relay, clean.run_id, clean.result, points)


def report_lines(report: CrashEachReport) -> list[str]:
    """The terminal's table, then what was found."""
    width = max([len(p.point) for p in report.points] + [5])
    lines = [f"clean run {report.clean_run}: {json.dumps(report.clean_result)}"]
    lines.append(f"{'point':<{width}}  {'run':<12} {'status':<20} result     ran again")
    for p in report.points:
        same = {True: "same", False: "DIFFERS", None: "–"}[p.same_result]
        again = ", ".join(p.ran_again) or "–"
        tail = f"  ({p.note})" if p.note else ""
        lines.append(f"{p.point:<{width}}  {p.run_id:<12} {p.status:<20} {same:<10} {again}{tail}")
    if report.differing:
        lines.append(
            f"{len(report.differing)} crash point(s) changed the result: "
            + ", ".join(p.point for p in report.differing)
            + " — something in the workflow body is not deterministic (time, randomness, I/O "
            "outside steps), or a step is not safe to repeat"
        )
    if report.repeated:
        lines.append(
            "bodies that ran more than once (at-least-once steps: make them idempotent): "
            + ", ".join(report.repeated)
        )
    verdict = "ok" if report.ok else "FAILED"
    lines.append(f"{report.relay}: {len(report.points)} crash points, {verdict}")
    return lines


def report_frame(report: CrashEachReport) -> Any:
    """The report as a DataFrame: one row per crash point (the notebook's table)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "point": p.point,
                "run": p.run_id,
                "status": p.status,
                "result": {True: "same", False: "DIFFERS", None: "–"}[p.same_result],
                "ran again": ", ".join(p.ran_again),
                "note": p.note,
            }
            for p in report.points
        ]
    )
