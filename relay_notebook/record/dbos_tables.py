"""DBOS's system tables as the kit reads them: every SQL statement on them, in one place.

DBOS keeps a workflow's state in its own tables (``workflow_status``, ``operation_outputs``,
``workflow_events``, ``workflow_events_history``, ``streams``, ``notifications``). Their
columns are not DBOS's public API, so the kit spells each statement it runs on them here, and
``tests/integration/test_dbos_canary.py`` prepares every one against the schema the installed
DBOS makes (SQLite, and PostgreSQL in its own test): a DBOS upgrade that renames a column fails
there with the statement's name, not somewhere in a run. No other module of the kit names a DBOS
table in SQL (the canary greps for it); ``runner/dbos_private.py`` holds the private Python
names.

Two dialects:

- ``SQLITE`` statements are written for a run's SQLite file (unqualified tables, ``?``
  placeholders). They run on PostgreSQL too, through ``record.store.PostgresRunReader``, which
  narrows each table to the rows of the run's own DBOS application.
- ``POSTGRES`` statements run on the shared ``dbos`` schema of a PostgreSQL database directly
  (the worker pool, the replay check's export, the secret check), with psycopg's ``%s``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CALLS",
    "CHECKPOINTS",
    "EVENTS",
    "EVENT_HISTORY",
    "FUNCTION_IDS",
    "MESSAGES",
    "MESSAGE_DELIVERED",
    "MESSAGE_PENDING",
    "PG_APP_WORKFLOWS",
    "PG_DEAD_EXECUTORS",
    "PG_EXPORT",
    "PG_PENDING_ON_EXECUTOR",
    "PG_QUEUE_OF",
    "PG_SCHEMA_READY",
    "PG_STATUS_BY_ID",
    "POSTGRES",
    "RECV_RECORDED",
    "SAVED_OUTPUTS",
    "SQLITE",
    "STATUS",
    "STATUS_AND_EXECUTOR",
    "STATUS_COLUMNS",
    "STATUS_ONLY",
    "STEP_COLUMNS",
    "STEP_ROWS",
    "STREAMS",
    "TABLES_BY_WORKFLOW",
    "WORKFLOWS",
    "WORKFLOW_EXISTS",
    "WORKFLOW_ORIGINS",
]

# -- a run's own database (SQLite form) ---------------------------------------------------------

#: the ``workflow_status`` columns ``record.checkpoints.read_workflow_status`` returns, in order
STATUS_COLUMNS: Final = (
    "status",
    "recovery_attempts",
    "application_version",
    "executor_id",
    "created_at",
    "updated_at",
)
STATUS: Final = f"SELECT {', '.join(STATUS_COLUMNS)} FROM workflow_status WHERE workflow_uuid = ?"
STATUS_ONLY: Final = "SELECT status FROM workflow_status WHERE workflow_uuid = ?"
STATUS_AND_EXECUTOR: Final = (
    "SELECT status, executor_id FROM workflow_status WHERE workflow_uuid = ?"
)
WORKFLOW_EXISTS: Final = "SELECT 1 FROM workflow_status WHERE workflow_uuid = ?"
#: every workflow of the run (the root, its children), oldest first
WORKFLOWS: Final = (
    "SELECT workflow_uuid, status, name, parent_workflow_id, recovery_attempts "
    "FROM workflow_status ORDER BY created_at, workflow_uuid"
)
#: where each workflow came from: a parent (a child of the run) or ``forked_from`` (a fork made
#: by ``dbos workflow fork``, DBOS's own tool: ``record.dbos_tools``), oldest first
WORKFLOW_ORIGINS: Final = (
    "SELECT workflow_uuid, status, parent_workflow_id, forked_from "
    "FROM workflow_status ORDER BY created_at, workflow_uuid"
)

#: a workflow's checkpoints as ``record.checkpoints.Checkpoint`` holds them
CHECKPOINTS: Final = (
    "SELECT function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms, "
    "error IS NOT NULL, child_workflow_id FROM operation_outputs "
    "WHERE workflow_uuid = ? ORDER BY function_id"
)
FUNCTION_IDS: Final = "SELECT function_id FROM operation_outputs WHERE workflow_uuid = ?"
#: a workflow's own calls (function id, name) in order
CALLS: Final = (
    "SELECT function_id, function_name FROM operation_outputs WHERE workflow_uuid = ? "
    "ORDER BY function_id"
)
#: the ``operation_outputs`` columns of ``history.steps.StepRow``, in its order
STEP_COLUMNS: Final = (
    "workflow_uuid, function_id, function_name, started_at_epoch_ms, completed_at_epoch_ms, "
    "error IS NOT NULL, child_workflow_id"
)
STEP_ROWS: Final = (
    f"SELECT {STEP_COLUMNS} FROM operation_outputs ORDER BY workflow_uuid, function_id"
)
#: every saved output and error, read only when asked for (they can be large)
SAVED_OUTPUTS: Final = (
    "SELECT workflow_uuid, function_id, output, error, serialization FROM operation_outputs"
)

EVENTS: Final = (
    "SELECT workflow_uuid, key, value, serialization FROM workflow_events "
    "ORDER BY workflow_uuid, key"
)
EVENT_HISTORY: Final = (
    "SELECT workflow_uuid, function_id, key, value, serialization "
    "FROM workflow_events_history ORDER BY workflow_uuid, function_id"
)
STREAMS: Final = (
    'SELECT workflow_uuid, key, "offset", function_id, value, serialization '
    'FROM streams ORDER BY workflow_uuid, key, "offset"'
)
MESSAGES: Final = (
    "SELECT destination_uuid, topic, message, serialization, created_at_epoch_ms, "
    "consumed FROM notifications ORDER BY created_at_epoch_ms"
)
#: an unconsumed message on a topic waits for the workflow
MESSAGE_PENDING: Final = (
    "SELECT 1 FROM notifications WHERE destination_uuid = ? AND topic = ? AND consumed = ? LIMIT 1"
)
#: DBOS's id of a message sent with an idempotency key is ``KEY::WORKFLOW``
MESSAGE_DELIVERED: Final = "SELECT 1 FROM notifications WHERE message_uuid = ? LIMIT 1"
#: the workflow's ``DBOS.recv`` at a function id returned (its message consumed and checkpointed)
RECV_RECORDED: Final = (
    "SELECT 1 FROM operation_outputs WHERE workflow_uuid = ? AND function_id = ? "
    "AND function_name = 'DBOS.recv'"
)

#: the tables holding a row per workflow, and the column naming it (``PostgresRunReader``)
TABLES_BY_WORKFLOW: Final = {
    "operation_outputs": "workflow_uuid",
    "workflow_events": "workflow_uuid",
    "workflow_events_history": "workflow_uuid",
    "streams": "workflow_uuid",
    "notifications": "destination_uuid",
}

# -- the shared PostgreSQL schema ``dbos`` --------------------------------------------------------

#: whether DBOS has made its tables in the database yet (``to_regclass`` is NULL before)
PG_SCHEMA_READY: Final = "SELECT to_regclass('dbos.operation_outputs')"
#: one workflow's status, polled through SQLAlchemy (``:id``)
PG_STATUS_BY_ID: Final = "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = :id"
#: the queue a workflow is on (a fork waits on the kit's hold queue until its edits are in)
PG_QUEUE_OF: Final = "SELECT queue_name FROM dbos.workflow_status WHERE workflow_uuid = %s"
#: the workflows of one DBOS application (a run's, on the shared schema)
PG_APP_WORKFLOWS: Final = (
    "SELECT workflow_uuid FROM dbos.workflow_status WHERE application_name = %s"
)
#: a table's rows of one application's workflows (the replay check's export); ``{table}`` is
#: one of ``TABLES_BY_WORKFLOW`` keyed by ``workflow_uuid``, or ``workflow_status``
PG_EXPORT: Final = f"SELECT * FROM dbos.{{table}} WHERE workflow_uuid IN ({PG_APP_WORKFLOWS})"
#: the PENDING workflows of an application on the executor of lease row ``l`` (a subquery of
#: the worker list; ``{app}`` is a literal of ``[a-z0-9_-]``)
PG_PENDING_ON_EXECUTOR: Final = (
    "(SELECT count(*) FROM dbos.workflow_status w WHERE w.status = 'PENDING' AND "
    "w.application_name = '{app}' AND w.executor_id = l.executor_id)"
)
#: executors with PENDING workflows of an application and no live lease (``{leases}``: the
#: kit's lease table); parameters: the application, this executor
PG_DEAD_EXECUTORS: Final = (
    "SELECT DISTINCT executor_id FROM dbos.workflow_status "
    "WHERE status = 'PENDING' AND application_name = %s AND executor_id <> %s "
    "AND executor_id NOT IN (SELECT executor_id FROM {leases} WHERE expires_at > now())"
)

#: every statement above by name, for the canary (SQLite form: prepared on a DBOS-made file)
SQLITE: Final = {
    "STATUS": STATUS,
    "STATUS_ONLY": STATUS_ONLY,
    "STATUS_AND_EXECUTOR": STATUS_AND_EXECUTOR,
    "WORKFLOW_EXISTS": WORKFLOW_EXISTS,
    "WORKFLOWS": WORKFLOWS,
    "WORKFLOW_ORIGINS": WORKFLOW_ORIGINS,
    "CHECKPOINTS": CHECKPOINTS,
    "FUNCTION_IDS": FUNCTION_IDS,
    "CALLS": CALLS,
    "STEP_ROWS": STEP_ROWS,
    "SAVED_OUTPUTS": SAVED_OUTPUTS,
    "EVENTS": EVENTS,
    "EVENT_HISTORY": EVENT_HISTORY,
    "STREAMS": STREAMS,
    "MESSAGES": MESSAGES,
    "MESSAGE_PENDING": MESSAGE_PENDING,
    "MESSAGE_DELIVERED": MESSAGE_DELIVERED,
    "RECV_RECORDED": RECV_RECORDED,
}
#: ... and the PostgreSQL ones (prepared on a DBOS-made ``dbos`` schema)
POSTGRES: Final = {
    "PG_SCHEMA_READY": PG_SCHEMA_READY,
    "PG_STATUS_BY_ID": PG_STATUS_BY_ID,
    "PG_QUEUE_OF": PG_QUEUE_OF,
    "PG_APP_WORKFLOWS": PG_APP_WORKFLOWS,
    "PG_EXPORT": PG_EXPORT,
    "PG_PENDING_ON_EXECUTOR": PG_PENDING_ON_EXECUTOR,
    "PG_DEAD_EXECUTORS": PG_DEAD_EXECUTORS,
}
