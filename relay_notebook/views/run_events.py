"""A run's events and stream values for people: terminal lines, a DataFrame, and the short
lines a run view's fallbacks show under the header.

Everything here takes the records of ``history.run_events`` (``RunEvents`` and
``RunEvents.latest``), whose values are already decoded safely and redacted.
"""

from __future__ import annotations

from typing import Any, Final

from relay_notebook.history.run_events import EventValue, LatestEvents, RunEvents, StreamValue

__all__ = ["EVENT_TABLE_COLUMNS", "events_frame", "events_lines", "latest_lines"]

#: the columns of ``%relay events RUN``'s table
EVENT_TABLE_COLUMNS: Final = (
    "kind",
    "workflow_id",
    "key",
    "offset",
    "function_id",
    "value",
)


def _where(row: EventValue | StreamValue, run_id: str) -> str:
    return "" if row["workflow_id"] == run_id else f" (workflow {row['workflow_id']})"


def events_lines(found: RunEvents) -> list[str]:
    """``relay events RUN``: each event's latest value, each stream's values, the messages."""
    run_id = found.run_id
    lines = []
    if not (found.events or found.streams or found.messages):
        return [f"run {run_id}: no events, stream values or messages yet"]
    for row in found.events:
        calls = sum(
            1
            for h in found.history
            if (h["workflow_id"], h["key"]) == (row["workflow_id"], row["key"])
        )
        times = f", set {calls} times" if calls > 1 else ""
        lines.append(f"event {row['key']}{_where(row, run_id)}: {row['preview']}{times}")
    closed = {(c["workflow_id"], c["key"]) for c in found.closed}
    shown: set[tuple[str, str]] = set()
    for value in found.streams:
        key = (value["workflow_id"], value["key"])
        if key not in shown:
            shown.add(key)
            count = sum(1 for r in found.streams if (r["workflow_id"], r["key"]) == key)
            state = "closed" if key in closed else "open"
            lines.append(f"stream {value['key']}{_where(value, run_id)}: {count} values, {state}")
        lines.append(f"  [{value['offset']}] {value['preview']}")
    for key in sorted(closed - shown):
        lines.append(f"stream {key[1]}: 0 values, closed")
    for message in found.messages:
        state = "received" if message["consumed"] else "not received yet"
        lines.append(f"message on topic {message['topic']!r}: {message['preview']} ({state})")
    return lines


def events_frame(found: RunEvents) -> Any:
    """``%relay events RUN``: one row per event (its latest value), stream value and message."""
    import pandas as pd

    # a message has no offset or function id: left out, not None (pandas reads them as NaN)
    rows: list[dict[str, object]] = [
        {"kind": "event", "workflow_id": r["workflow_id"], "key": r["key"], "offset": None,
         "function_id": r["function_id"], "value": r["value"]}
        for r in found.events
    ]  # fmt: skip
    rows += [
        {"kind": "stream", "workflow_id": r["workflow_id"], "key": r["key"],
         "offset": r["offset"], "function_id": r["function_id"], "value": r["value"]}
        for r in found.streams
    ]  # fmt: skip
    rows += [
        {"kind": "message", "workflow_id": r["workflow_id"], "key": r["topic"], "value": r["value"]}
        for r in found.messages
    ]
    return pd.DataFrame(rows, columns=list(EVENT_TABLE_COLUMNS))


def latest_lines(latest: LatestEvents, limit: int = 4) -> list[str]:
    """A run view's events strip as short lines (the SVG and text fallbacks):
    ``event draft: {...}``, ``stream output (3): "part 2"``."""
    lines = [f"event {e['key']}: {e['preview']}" for e in latest.get("events", [])]
    for s in latest.get("streams", []):
        values = s.get("values") or []
        last = values[-1]["preview"] if values else "—"
        closed = ", closed" if s.get("closed") else ""
        lines.append(f"stream {s['key']} ({s['count']}{closed}): {last}")
    if len(lines) > limit:
        lines = [*lines[: limit - 1], f"… and {len(lines) - limit + 1} more"]
    return lines
