"""Run records for people: a run's log, a list of runs, a recovery preview.

``text/plain`` is compared by nbval, so it holds only what the same run always gives: no
clock times, durations or paths. The HTML form adds durations.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from relay_notebook.history.log_records import Receipt, RunHeader, StepCall
from relay_notebook.history.preview import PreviewCall, RecoveryPreview
from relay_notebook.history.records import RunLog, RunSummary
from relay_notebook.views.wording import command, duration_text, reword

__all__ = [
    "RecoveryPreviewView",
    "RunListView",
    "RunLogView",
    "preview_text",
    "run_log_text",
    "runs_text",
]

#: step calls listed per workflow before the middle ones are summarized
STEP_LINES: Final = 30
_TAIL: Final = 5


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _release(run: RunHeader) -> str:
    release = run.release
    return f"v{release['version']}" if isinstance(release, dict) else "draft"


def _attempts(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def _step_label(step: StepCall) -> str:
    return step.name + (f" #{step.occurrence}" if (step.occurrence or 1) > 1 else "")


def _step_line(step: StepCall, width: int) -> str:
    label = _step_label(step)
    marks = []
    if step.executed_in:
        marks.append(f"ran in {_attempts(step.executed_in)}")
    if step.reused_in:
        marks.append(f"reused in {_attempts(step.reused_in)}")
    if step.retries:
        marks.append(_plural(len(step.retries), "failed try").replace("trys", "tries"))
    if step.receipts:
        marks.append(_plural(len(step.receipts), "platform call"))
    if step.child_workflow_id and step.kind == "workflow":
        marks.append(f"started {step.child_workflow_id}")
    return (
        f"  {step.function_id:>5}  {label:<{width}}  {step.kind:<8}  "
        f"{step.status:<12}  {'; '.join(marks)}".rstrip()
    )


def _steps_block(steps: Sequence[StepCall], limit: int) -> list[str]:
    head, tail = (steps, []) if len(steps) <= limit else (steps[: limit - _TAIL], steps[-_TAIL:])
    width = min(max((len(_step_label(s)) for s in [*head, *tail]), default=8), 40)
    if not tail:
        return [_step_line(s, width) for s in steps]
    hidden = len(steps) - len(head) - len(tail)
    return [
        *(_step_line(s, width) for s in head),
        f"  {'…':>5}  {_plural(hidden, 'more call')}",
        *(_step_line(s, width) for s in tail),
    ]


def run_log_text(log: RunLog, *, limit: int = STEP_LINES) -> str:
    """A run's attempts, step calls, child workflows and platform calls, one line each."""
    run = log.run
    status = run.status
    if run.live:
        status = f"running (attempt {len(log.attempts)} going)"
    reused = sum(len(a.reused) for a in log.attempts)
    head = [
        f"run {log.run_id} of {run.relay} ({_release(run)}): {status}",
        f"  DBOS {run.dbos_status or 'no workflow yet'} · "
        f"{_plural(len(log.attempts), 'attempt')} · {_plural(reused, 'checkpoint')} reused",
    ]
    head += [
        f"  not made by the kit: workflow {w.describe()} is in the run's DBOS database"
        for w in run.outside
    ]
    if run.status in ("succeeded", "failed") and run.dbos_status in ("ENQUEUED", "PENDING"):
        fork = command("notebook", f"fork {run.run_id} --from CALL")
        head.append(
            f"  DBOS's own tool re-enqueued the workflow (dbos workflow resume); the kit does "
            f"not run a finished run again: {fork}"
        )
    error = run.error
    if isinstance(error, dict) and error.get("code") and status != "succeeded":
        first = str(error.get("message", "")).splitlines()[0] if error.get("message") else ""
        head.append(f"  error [{error['code']}]: {reword(first, 'notebook')}")
    lines = [*head, "attempts:"]
    for a in log.attempts:
        crash = a.crash
        spec = f"  crash {crash['when']}:{crash['step']}#{crash['occurrence']}" if crash else ""
        lines.append(
            f"  {a.attempt:>5}  {a.status:<21} executed {len(a.executed)}, "
            f"reused {len(a.reused)}{spec}"
        )
    lines.append(f"steps of {log.run_id}: {_plural(len(log.steps), 'call')}")
    lines += _steps_block(log.steps, limit)
    for child in log.children:
        started = child.parent_function_id
        by = f", started by call {started}" if started is not None else ""
        lines.append(
            f"child workflow {child.workflow_id} ({child.name}): {child.status}{by}, "
            f"{_plural(len(child.steps), 'call')}"
        )
        lines += _steps_block(child.steps, limit)
    if log.receipts:
        lines.append(f"platform calls: {len(log.receipts)}")
        lines += [_receipt_line(r, log.run_id) for r in log.receipts[:limit]]
        if len(log.receipts) > limit:
            lines.append(f"  … {_plural(len(log.receipts) - limit, 'more call')}")
    if log.usage is not None:
        from relay_notebook.views.usage_text import usage_lines

        lines += usage_lines(log.usage, limit=limit)
    return "\n".join(lines)


def _receipt_line(r: Receipt, run_id: str) -> str:
    where = f"call {r.step_id}" if r.step_id is not None else "no step"
    if r.workflow_id not in (None, run_id):
        where += f" of {r.workflow_id}"
    extra = f", reused in {_attempts(r.reused_in)}" if r.reused_in else ""
    return f"  {r.kind} {r.name!r}: {r.state} ({where}, attempt {r.attempt}{extra})"


def runs_text(runs: Sequence[RunSummary]) -> str:
    """One line per run: id, relay, release, status, attempts, reused checkpoints."""
    if not runs:
        return "no runs yet (start one with %relay run NAME)"
    width = max(len(r.run_id) for r in runs)
    lines = [_plural(len(runs), "run")]
    lines += [
        f"  {r.run_id:<{width}}  {r.release:<6} {r.status:<21} attempts {r.attempts}  "
        f"reused {r.reused}"
        for r in runs
    ]
    return "\n".join(lines)


def _call_names(calls: list[PreviewCall], limit: int = 8) -> str:
    names = [
        c["name"] + (f" #{c['occurrence']}" if (c["occurrence"] or 1) > 1 else "") for c in calls
    ]
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit:,} more)" if len(names) > limit else "")


def preview_text(preview: RecoveryPreview) -> str:
    """What recovering the run would do, and what stops it."""
    if preview.outcome == "recover":
        head = f"recovering {preview.run_id} starts attempt {preview.attempt}"
    elif preview.outcome == "returns":
        head = f"recovering {preview.run_id} returns it as it was ({preview.status})"
    else:
        code = preview.reason["code"] if preview.reason else "refused"
        head = f"recovering {preview.run_id} stops now [{code}]"
    lines = [head]
    if preview.reused:
        lines.append(
            f"  reused: {_plural(len(preview.reused), 'checkpoint')} "
            f"({_call_names(preview.reused)})"
        )
    for again in preview.rerun:
        lines.append(
            f"  runs again: {again['name']} (call {again['function_id']}, started in attempt "
            f"{_attempts(again['started_in'])}, no checkpoint)"
        )
    for call in preview.replayed_calls:
        lines.append(f"  called again (replay-safe): {call['call']} (key {call['key']})")
    for call in preview.blocking:
        step = f" in {call['step']}" if call["step"] else ""
        lines.append(f"  uncertain: {call['call']}{step} (key {call['key']}): stops recovery")
    if preview.reason and preview.outcome != "recover":
        lines.append(f"  {reword(preview.reason['message'], 'notebook')}")
    return "\n".join(lines)


_NOWRAP: Final = ' style="white-space:nowrap"'


def _table(head: Sequence[str], rows: list[Sequence[Any]], nowrap: Sequence[int] = (0,)) -> str:
    """An HTML table; the cells of columns ``nowrap`` (ids, durations) never wrap."""
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{_NOWRAP if i in nowrap else ''}>{html.escape(str(c))}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="relay-records"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _ms(value: Any) -> str:
    return f"{value:,.0f} ms" if isinstance(value, int | float) else "–"


@dataclass
class RunLogView:
    """A run's log in the notebook (``text/plain`` stable for nbval; HTML with durations)."""

    log: RunLog

    def __repr__(self) -> str:
        return run_log_text(self.log)

    def html(self) -> str:
        log = self.log
        attempts = _table(
            ("attempt", "status", "duration", "executed", "reused"),
            [
                (a.attempt, a.status, _ms(a.duration_ms), len(a.executed), len(a.reused))
                for a in log.attempts
            ],
            nowrap=(0, 2),
        )
        steps = log.all_steps()[: STEP_LINES * 4]
        calls = _table(
            (
                "workflow",
                "call",
                "step",
                "status",
                "ran in",
                "reused in",
                "tries failed",
                "took",
                "output",
            ),
            [
                (
                    s.workflow_id,
                    s.function_id,
                    s.name,
                    s.status,
                    _attempts(s.executed_in),
                    _attempts(s.reused_in),
                    len(s.retries),
                    _ms(s.duration_ms),
                    s.output_preview or s.error_preview or "",
                )
                for s in steps
            ],
            nowrap=(0, 7),
        )
        title = html.escape(run_log_text(self.log).splitlines()[0])
        usage = ""
        if log.usage is not None:
            from relay_notebook.views.usage_text import usage_lines

            text = html.escape("\n".join(usage_lines(log.usage, limit=STEP_LINES)))
            usage = f"<pre class='relay-usage'>{text}</pre>"
        return f"<div class='relay-run-log'><p><b>{title}</b></p>{attempts}{calls}{usage}</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": run_log_text(self.log), "text/html": self.html()}


@dataclass
class RunListView:
    """Runs in the notebook: ``text/plain`` without times, HTML with durations."""

    runs: Sequence[RunSummary]

    def __repr__(self) -> str:
        return runs_text(self.runs)

    def html(self) -> str:
        return _table(
            ("run", "relay", "release", "status", "attempts", "reused", "duration"),
            [
                (
                    r.run_id,
                    r.relay,
                    r.release,
                    r.status,
                    r.attempts,
                    r.reused,
                    duration_text(r.active_ms, r.duration_ms, r.attempts),
                )
                for r in self.runs
            ],
            nowrap=(0, 6),
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": runs_text(self.runs), "text/html": self.html()}


@dataclass
class RecoveryPreviewView:
    """A recovery preview in the notebook."""

    preview: RecoveryPreview

    def __repr__(self) -> str:
        return preview_text(self.preview)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        text = preview_text(self.preview)
        return {"text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}
