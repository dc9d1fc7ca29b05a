"""A run's events and stream values for people: terminal lines, a DataFrame, and the short
lines a run view's fallbacks show under the header.

Everything here takes the plain documents of ``history.run_events`` (``RunEvents.to_dict``
and ``RunEvents.latest``), whose values are already decoded safely and redacted.
"""

from __future__ import annotations

from typing import Any, Final

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


def _where(row: dict[str, Any], run_id: str) -> str:
    return "" if row["workflow_id"] == run_id else f" (workflow {row['workflow_id']})"


def events_lines(doc: dict[str, Any]) -> list[str]:
    """``relay events RUN``: each event's latest value, each stream's values, the messages."""
    run_id = doc["run_id"]
    lines = []
    if not (doc["events"] or doc["streams"] or doc["messages"]):
        return [f"run {run_id}: no events, stream values or messages yet"]
    for row in doc["events"]:
        calls = sum(
            1
            for h in doc["history"]
            if (h["workflow_id"], h["key"]) == (row["workflow_id"], row["key"])
        )
        times = f", set {calls} times" if calls > 1 else ""
        lines.append(f"event {row['key']}{_where(row, run_id)}: {row['preview']}{times}")
    closed = {(c["workflow_id"], c["key"]) for c in doc["closed"]}
    shown: set[tuple[str, str]] = set()
    for row in doc["streams"]:
        key = (row["workflow_id"], row["key"])
        if key not in shown:
            shown.add(key)
            count = sum(1 for r in doc["streams"] if (r["workflow_id"], r["key"]) == key)
            state = "closed" if key in closed else "open"
            lines.append(f"stream {row['key']}{_where(row, run_id)}: {count} values, {state}")
        lines.append(f"  [{row['offset']}] {row['preview']}")
    for key in sorted(closed - shown):
        lines.append(f"stream {key[1]}: 0 values, closed")
    for row in doc["messages"]:
        state = "received" if row["consumed"] else "not received yet"
        lines.append(f"message on topic {row['topic']!r}: {row['preview']} ({state})")
    return lines


def events_frame(doc: dict[str, Any]) -> Any:
    """``%relay events RUN``: one row per event (its latest value), stream value and message."""
    import pandas as pd

    rows = [
        {"kind": "event", **{k: r.get(k) for k in EVENT_TABLE_COLUMNS[1:]}} for r in doc["events"]
    ]
    rows += [
        {"kind": "stream", **{k: r.get(k) for k in EVENT_TABLE_COLUMNS[1:]}} for r in doc["streams"]
    ]
    rows += [
        {"kind": "message", "workflow_id": r["workflow_id"], "key": r["topic"], "value": r["value"]}
        for r in doc["messages"]
    ]
    return pd.DataFrame(rows, columns=list(EVENT_TABLE_COLUMNS))


def latest_lines(latest: dict[str, Any], limit: int = 4) -> list[str]:
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
