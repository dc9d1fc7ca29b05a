"""What a waiting run waits for, read from its DBOS store: a message there for it, a wait answered.

Design note: DBOS keeps the messages sent to a workflow in ``notifications`` (``consumed``
once a ``recv`` took one) and a ``recv``'s result in ``operation_outputs`` under the recv's
function id. A waiting run is *ready* to resume when its timer is due, when a message on its
topic waits unconsumed, or when its recv already consumed one (the process left just after).
These reads go through the record's one read-only opener; the kit never writes DBOS's tables
(messages are sent with DBOS's own client: see ``runner.messages``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import Backend
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import open_run_database

__all__ = ["NULL_TOPIC", "delivered_message", "pending_message", "wait_ready"]

#: how DBOS stores the topic ``None`` (a private name of DBOS's, read in ``runner.dbos_private``;
#: the DBOS canary checks the two agree)
NULL_TOPIC = "__null__topic__"


def _topic(topic: str | None) -> str:
    return NULL_TOPIC if topic is None else topic


def _exists(
    folder: RunFolder, record: RunRecord, backend: Backend | None, sql: str, params: tuple[Any, ...]
) -> bool:
    """Whether ``sql`` finds a row in the run's DBOS store (not yet created: no)."""
    try:
        with open_run_database(folder, record, live=True, backend=backend) as conn:
            return conn is not None and conn.execute(sql, params).fetchone() is not None
    except sqlite3.OperationalError:
        return False


def _waiting_workflow(record: RunRecord) -> str:
    wait = record.waiting
    return wait.workflow_id if wait is not None and wait.workflow_id else record.run_id


def pending_message(
    folder: RunFolder, record: RunRecord, backend: Backend | None, topic: str | None
) -> bool:
    """Whether a message on ``topic`` waits, unconsumed, for the run's workflow."""
    return _exists(
        folder, record, backend,
        dbos_tables.MESSAGE_PENDING,
        (_waiting_workflow(record), _topic(topic), False),
    )  # fmt: skip


def delivered_message(
    folder: RunFolder, record: RunRecord, backend: Backend | None, key: str
) -> bool:
    """Whether a message sent with idempotency key ``key`` reached the run (DBOS's id for it)."""
    return _exists(
        folder, record, backend,
        dbos_tables.MESSAGE_DELIVERED,
        (f"{key}::{record.workflow_id}",),
    )  # fmt: skip


def wait_ready(
    folder: RunFolder, record: RunRecord, backend: Backend | None, now_ms: float
) -> bool:
    """Whether the waiting run's next attempt would get past its wait now."""
    wait = record.waiting
    if wait is None:
        return True
    if wait.due(now_ms):
        return True
    if wait.kind != "message":
        return False
    if pending_message(folder, record, backend, wait.topic):
        return True
    # the recv already consumed one: its result is recorded under its function id
    function_id = record.raw.get("waiting", {}).get("function_id")
    recv = (_waiting_workflow(record), function_id)
    return type(function_id) is int and _exists(
        folder, record, backend, dbos_tables.RECV_RECORDED, recv
    )
