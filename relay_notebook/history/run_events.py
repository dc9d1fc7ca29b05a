"""A run's DBOS events, stream values and messages, read from its store (read-only).

Design note: ``DBOS.set_event`` keeps the latest value of each key (``workflow_events``) and,
since DBOS 2, one row per call (``workflow_events_history``, with the call's function id);
``DBOS.write_stream`` appends ``(key, offset)`` rows to ``streams``, and ``close_stream``
writes a sentinel there. Messages sent to the run wait in ``notifications`` until a ``recv``
consumes them. Every value is a DBOS-serialized value (usually a base64 pickle): they are
decoded with the history's builtins-only unpickler (``history.outputs``), never by running
the relay's code, and vault values are replaced. The tables are read through the record's one
opener, which on PostgreSQL scopes them to the run's own workflows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict

from agentworks.redact import Redactor
from relay_notebook.history.outputs import decode_value
from relay_notebook.history.records import _live_attempt
from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import workspace_backend
from relay_notebook.record.folders import find_run
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import open_run_database
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

__all__ = [
    "ClosedStream",
    "EventValue",
    "LatestEvents",
    "Message",
    "RunEvents",
    "StreamValue",
    "read_run_events",
]

#: the value DBOS's ``close_stream`` writes as a stream's last row
STREAM_CLOSED: Final = "__DBOS_STREAM_CLOSED__"
#: the newest stream values a view shows per stream
LATEST: Final = 5


class EventValue(TypedDict):
    """One ``set_event`` value of a workflow (the latest per key, or one call's)."""

    workflow_id: str
    key: str
    #: the call that set it (``None``: DBOS before 2 kept no history)
    function_id: int | None
    value: Any
    preview: str
    json: bool


class StreamValue(TypedDict):
    """One ``write_stream`` value, at its offset in its stream."""

    workflow_id: str
    key: str
    offset: int
    function_id: int | None
    value: Any
    preview: str
    json: bool


class ClosedStream(TypedDict):
    """A stream its writer closed (``close_stream``)."""

    workflow_id: str
    key: str


class Message(TypedDict):
    """A message sent to one of the run's workflows, received or still waiting."""

    workflow_id: str
    topic: str | None
    created_at_ms: int
    consumed: bool
    value: Any
    preview: str
    json: bool


class LatestEvent(TypedDict):
    """An event's latest value, as a run view shows it."""

    workflow_id: str
    key: str
    preview: str
    function_id: int | None


class StreamPreview(TypedDict):
    offset: int
    preview: str


class LatestStream(TypedDict):
    """A stream as a run view shows it: its newest values and how many there are."""

    workflow_id: str
    key: str
    count: int
    closed: bool
    values: list[StreamPreview]


class LatestEvents(TypedDict):
    """What a run view shows of what the run published (``RunEvents.latest``)."""

    events: list[LatestEvent]
    streams: list[LatestStream]


@dataclass
class RunEvents:
    """What a run published: its events (latest value per key, and every ``set_event`` call),
    its stream values in order, and the messages sent to it."""

    run_id: str
    #: one per (workflow, key): the latest value, with the function id that set it
    events: list[EventValue] = field(default_factory=list)
    #: every set_event call, in call order
    history: list[EventValue] = field(default_factory=list)
    #: every stream value, by workflow, key and offset (the close sentinel left out)
    streams: list[StreamValue] = field(default_factory=list)
    #: streams whose writer closed them
    closed: list[ClosedStream] = field(default_factory=list)
    #: messages sent to the run's workflows (topic, consumed or still waiting)
    messages: list[Message] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "events": self.events,
            "history": self.history,
            "streams": self.streams,
            "closed": self.closed,
            "messages": self.messages,
        }

    def values(self) -> dict[str, Any]:
        """The root workflow's events as ``{key: value}`` and streams as ``{key: [values]}``
        (a child workflow's keys are prefixed with its workflow id and a slash)."""

        def name(row: EventValue | StreamValue) -> str:
            wf = row["workflow_id"]
            return row["key"] if wf == self.run_id else f"{wf}/{row['key']}"

        streams: dict[str, list[Any]] = {}
        for row in self.streams:
            streams.setdefault(name(row), []).append(row["value"])
        return {"events": {name(r): r["value"] for r in self.events}, "streams": streams}

    def latest(self, per_stream: int = LATEST) -> LatestEvents:
        """What a run view shows: every event's latest value and each stream's newest values
        (with how many came before), previews only."""
        groups: dict[tuple[str, str], list[StreamValue]] = {}
        for row in self.streams:
            groups.setdefault((row["workflow_id"], row["key"]), []).append(row)
        closed = {(c["workflow_id"], c["key"]) for c in self.closed}
        return LatestEvents(
            events=[
                LatestEvent(
                    workflow_id=r["workflow_id"],
                    key=r["key"],
                    preview=r["preview"],
                    function_id=r["function_id"],
                )
                for r in self.events
            ],
            streams=[
                LatestStream(
                    workflow_id=wf,
                    key=key,
                    count=len(rows),
                    closed=(wf, key) in closed,
                    values=[
                        StreamPreview(offset=r["offset"], preview=r["preview"])
                        for r in rows[-per_stream:]
                    ],
                )
                for (wf, key), rows in groups.items()
            ],
        )

    def __bool__(self) -> bool:
        return bool(self.events or self.streams or self.messages)


def _read(conn: Any, run_id: str, redactor: Redactor | None) -> RunEvents:
    found = RunEvents(run_id)
    if conn is None:
        return found
    try:
        latest = conn.execute(dbos_tables.EVENTS).fetchall()
        calls = conn.execute(dbos_tables.EVENT_HISTORY).fetchall()
        streams = conn.execute(dbos_tables.STREAMS).fetchall()
        messages = conn.execute(dbos_tables.MESSAGES).fetchall()
    except sqlite3.OperationalError:
        return found  # DBOS has not created (all) its tables yet
    last_call: dict[tuple[str, str], int] = {}
    for wf, fid, key, value, ser in calls:
        last_call[(wf, key)] = fid
        saved = decode_value(value, ser, redactor)
        found.history.append(
            EventValue(
                workflow_id=wf, key=key, function_id=fid, value=saved.value,
                preview=saved.preview, json=saved.jsonable,
            )
        )  # fmt: skip
    for wf, key, value, ser in latest:
        saved = decode_value(value, ser, redactor)
        found.events.append(
            EventValue(
                workflow_id=wf, key=key, function_id=last_call.get((wf, key)), value=saved.value,
                preview=saved.preview, json=saved.jsonable,
            )
        )  # fmt: skip
    for wf, key, offset, fid, value, ser in streams:
        if ser == "portable_json" and value == f'"{STREAM_CLOSED}"':
            found.closed.append(ClosedStream(workflow_id=wf, key=key))
            continue
        saved = decode_value(value, ser, redactor)
        found.streams.append(
            StreamValue(
                workflow_id=wf, key=key, offset=offset, function_id=fid, value=saved.value,
                preview=saved.preview, json=saved.jsonable,
            )
        )  # fmt: skip
    for wf, topic, value, ser, created, consumed in messages:
        saved = decode_value(value, ser, redactor)
        found.messages.append(
            Message(
                workflow_id=wf, topic=topic, created_at_ms=created, consumed=bool(consumed),
                value=saved.value, preview=saved.preview, json=saved.jsonable,
            )
        )  # fmt: skip
    # the root workflow first, then its children, each in its own order
    found.events.sort(key=lambda r: (r["workflow_id"] != run_id, r["workflow_id"]))
    found.streams.sort(key=lambda r: (r["workflow_id"] != run_id, r["workflow_id"]))
    return found


def read_run_events(workspace: Workspace, run_id: str) -> RunEvents:
    """``run_id``'s events, stream values and messages; safe while it runs, changes nothing."""
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    live = _live_attempt(record) is not None
    secrets = Vault(workspace.home).values()
    redactor = Redactor(secrets, encoded=True) if secrets else None  # old runs too
    with open_run_database(folder, record, live=live, backend=workspace_backend(workspace)) as conn:
        return _read(conn, folder.run_id, redactor)
