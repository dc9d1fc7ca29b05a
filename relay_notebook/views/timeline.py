"""A run's timeline as a static plotly figure: step bodies per attempt on a time axis.

One row per process attempt. Each body that ran is a bar on the row of its attempt; calls an
attempt took from their checkpoints are diamonds where it replayed them; failed tries of a
retried step are crosses; a crash on purpose is a red mark. The figure is a plain
``go.Figure`` (not a FigureWidget: no widget state in saved notebooks) with fixed trace uids,
so the same run always gives the same document.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

import plotly.graph_objects as go

from relay_notebook.history.log_records import Attempt
from relay_notebook.history.records import RunLog

__all__ = ["TRACE_NAMES", "timeline_figure"]

#: the figure's traces, in order (each trace's ``uid`` is ``relay-`` + its name)
TRACE_NAMES: Final = ("attempts", "executed", "reused", "failed tries", "crashes")
_COLOURS: Final = {
    "attempt": "#e2e8f0",
    "executed": "#2563eb",
    "reused": "#7c3aed",
    "failed": "#dc2626",
    "crash": "#b91c1c",
}
_ROW_HEIGHT: Final = 70


def _when(epoch_ms: float) -> str:
    """An ISO time with milliseconds, UTC (plotly's date axis reads it as is)."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _row(attempt: Attempt) -> str:
    return f"attempt {attempt.attempt} · {attempt.status}"


#: each marker trace's uid and colour, by its legend name
_MARKERS: Final = {
    "reused": ("relay-reused", "reused"),
    "failed tries": ("relay-failed-tries", "failed"),
    "crashes": ("relay-crashes", "crash"),
}


def _markers(
    name: str, symbol: tuple[str, int], points: list[tuple[float, str, str]]
) -> go.Scatter:
    """One legend entry of markers: ``(epoch ms, row, hover text)`` each."""
    uid, colour = _MARKERS[name]
    return go.Scatter(
        uid=uid,
        name=name,
        mode="markers",
        x=[_when(ts) for ts, _, _ in points],
        y=[row for _, row, _ in points],
        marker={"symbol": symbol[0], "size": symbol[1], "color": _COLOURS[colour]},
        hovertext=[text for _, _, text in points],
        hoverinfo="text",
    )


def _bars(
    name: str,
    colour: str,
    width: float,
    spans: list[tuple[float, float, str]],
    hovertext: list[str] | None = None,
) -> go.Bar:
    """One legend entry of horizontal bars: ``(start epoch ms, length ms, row)`` each; hovered,
    a bar shows its ``hovertext``, or its row where there is none."""
    return go.Bar(
        uid=f"relay-{name}",
        name=name,
        orientation="h",
        base=[_when(start) for start, _, _ in spans],
        x=[length for _, length, _ in spans],
        y=[row for _, _, row in spans],
        marker={"color": _COLOURS[colour]},
        width=width,
        hovertext=hovertext,
        hoverinfo="y" if hovertext is None else "text",
    )


def timeline_figure(log: RunLog, *, title: str | None = None) -> go.Figure:
    """The run's attempts and step bodies on a time axis (see the module docstring)."""
    rows = {a.attempt: _row(a) for a in log.attempts}
    order = [rows[a.attempt] for a in log.attempts]
    steps = log.all_steps()
    latest = max((s.completed_at_ms or s.started_at_ms or 0 for s in steps), default=0)
    spans: list[tuple[float, float, str]] = []
    for a in log.attempts:
        if a.started_at is None:
            continue
        end = a.ended_at or max(a.started_at, latest)
        spans.append((a.started_at, max(end - a.started_at, 1), rows[a.attempt]))
    attempts = _bars("attempts", "attempt", 0.8, spans)
    bodies: list[tuple[float, float, str]] = []
    texts: list[str] = []
    for step in steps:
        done = step.executed_in[-1] if step.executed_in else None
        begin, completed = step.started_at_ms, step.completed_at_ms
        if done is None or begin is None or done not in rows:
            continue
        finish = completed if completed is not None else begin
        bodies.append((begin, max(finish - begin, 1), rows[done]))
        texts.append(
            f"{step.name} #{step.occurrence or 1} (call {step.function_id}"
            f"{'' if step.workflow_id == log.run_id else ' of ' + step.workflow_id})"
            f"<br>{step.status}, {finish - begin:g} ms"
        )
    executed = _bars("executed", "executed", 0.4, bodies, texts)
    replays = [e for e in log.events_of("step_reused") if e.get("attempt") in rows]
    reused = _markers(
        "reused", ("diamond", 9),
        [(e["ts"], rows[e["attempt"]], f"{e.get('step')} #{e.get('occurrence')} reused")
         for e in replays],
    )  # fmt: skip
    failed = _markers(
        "failed tries", ("x", 10),
        [(r.ts, rows[r.attempt], f"{s.name} try {r.step_attempt}: {r.error_type}: {r.error}")
         for s in steps for r in s.retries
         if r.ts is not None and r.attempt is not None and r.attempt in rows],
    )  # fmt: skip
    crash_events = [e for e in log.events_of("crash_injected") if e.get("attempt") in rows]
    crashes = _markers(
        "crashes", ("star", 14),
        [(e["ts"], rows[e["attempt"]],
          f"crash {e.get('when')}:{e.get('step')}#{e.get('occurrence')}")
         for e in crash_events],
    )  # fmt: skip
    figure = go.Figure(data=[attempts, executed, reused, failed, crashes])
    figure.update_layout(
        title={"text": title or f"run {log.run_id}: {log.run.status}"},
        barmode="overlay",
        height=140 + _ROW_HEIGHT * max(len(order), 1),
        margin={"l": 10, "r": 10, "t": 50, "b": 40},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
        xaxis={"type": "date", "title": {"text": "time (UTC)"}},
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": list(reversed(order)),
            "title": {"text": ""},
        },
    )
    return figure
