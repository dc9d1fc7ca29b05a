"""DBOS's private surface: every name the kit uses that DBOS 3.4 does not export, in one module.

Design note: a relay needs only DBOS's public API; the runner needs a little more, and each use
is here and nowhere else: the internal queue's poll (a recovery starts at once instead of after
DBOS's one-second poll), a worker's queue loop run on an event it can wake (and the count of
its running workflows it wakes by), the recovery of another executor's pending workflows, a
queue object for a relay's module-level ``DBOS.register_queue`` before launch, a client's
migrations and pooled engine, the serializers (guarded against secrets; a fork's edited values
written in DBOS's own format), the topic ``None`` as DBOS stores it, and the rows a fork
rewrites in DBOS's tables (DBOS has no API for editing a workflow's input or a step's output).
Everything else uses the public API (``dbos.error``, ``dbos.DBOSClient``...).
``tests/integration/test_dbos_canary.py`` checks each name used here against the installed
DBOS, so an upgrade that changes one fails there, naming it, not somewhere in a run. The kit
pins ``dbos>=3.4,<3.5``. The supervisor side (a fork, the worker pool's client) imports this
module and must not load DBOS: every DBOS import is inside the function that needs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "PRELOAD_MODULES",
    "PRELOAD_POSTGRES",
    "SCHEMA_FILES",
    "ForkRowEdits",
    "child_calls",
    "child_starts",
    "client_engine",
    "declared_queue",
    "delete_workflow_rows",
    "edit_fork_rows",
    "internal_queue_poll",
    "message_pending",
    "queue_running",
    "recover_pending_workflows",
    "root_calls",
    "run_client_migrations",
    "serve_queue",
    "set_internal_queue_poll",
    "sqlite_engine",
    "step_context",
    "wrap_serializers",
]

#: DBOS's modules a warm parent imports before it forks attempts (``runner.warm_parent``)
PRELOAD_MODULES: Final = ("dbos._dbos", "dbos._sys_db_sqlite", "dbos._client")
#: what only a PostgreSQL attempt imports: preloaded by a parent that forks many attempts
PRELOAD_POSTGRES: Final = ("dbos._sys_db_postgres",)
#: DBOS's source files whose code decides what a fresh SQLite system database holds
#: (``runner.dbos_template`` hashes them to name its template)
SCHEMA_FILES: Final = ("_migration.py", "_sys_db_sqlite.py", "_sys_db.py")

#: a wrapper of one of DBOS's serializing functions (``runner.guards``)
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


# -- the internal queue and recovery (the child, the replay child, the worker) ----------------


def _internal_queue() -> Any:
    from dbos._dbos import _get_or_create_dbos_registry

    return _get_or_create_dbos_registry().get_internal_queue()


def internal_queue_poll() -> float:
    """How often, in seconds, DBOS's internal queue (where recovered workflows wait) is polled."""
    return float(_internal_queue()._polling_interval_sec)


def set_internal_queue_poll(seconds: float) -> None:
    """Poll DBOS's internal queue every ``seconds`` (a recovery is dequeued at once)."""
    _internal_queue()._polling_interval_sec = seconds


def recover_pending_workflows(executor_ids: list[str]) -> list[Any]:
    """Re-enqueue the ``PENDING`` workflows of ``executor_ids`` for this application (DBOS's
    launch recovers only its own executor's); returns their handles. Idempotent."""
    from dbos import DBOS

    handles: list[Any] = DBOS._recover_pending_workflows(executor_ids)
    return handles


def serve_queue(queue: Any, stop: Any) -> None:
    """Run DBOS's own worker loop for ``queue`` in this thread until ``stop`` is set: DBOS's
    polls, claims and dispatch, waiting between polls on ``stop`` (``queue_wake.PollWhen``,
    which may end a wait early). Its DBOS must listen to no queue of that name itself."""
    from dbos._dbos import _get_dbos_instance
    from dbos._queue import queue_worker_thread

    queue_worker_thread(stop, _get_dbos_instance(), queue)


def queue_running(name: str) -> int:
    """How many workflows of queue ``name`` this process runs, counted as DBOS's queue loop
    counts them (a workflow leaves the count once its outcome is recorded)."""
    from dbos._dbos import _get_dbos_instance

    return int(_get_dbos_instance()._active_workflows_set.count_for_queue(name))


def declared_queue(name: str) -> Any:
    """A ``Queue`` named ``name``, made as ``DBOS.enqueue_workflow`` makes one: what a relay's
    module-level ``DBOS.register_queue`` gets back while DBOS is not launched yet (the child
    registers it right after launch, ``runner.queues``). Its methods reach DBOS when called."""
    from dbos._queue import _INTERNAL_QUEUE_CONSTRUCTION, Queue

    return Queue(name, database_backed_queue=True, token=_INTERNAL_QUEUE_CONSTRUCTION)


# -- the step running now (the child's instrumentation, on the path of every step) ------------

#: what ``step_context``'s reader gives outside a workflow
_NO_STEP: Final = (None, None, None)


def step_context() -> Callable[[], tuple[str | None, int | None, Any]]:
    """A reader of the step running now: ``(DBOS.workflow_id, DBOS.step_id, DBOS.step_status)``
    as those three give them, from one read of DBOS's context (each of them reads it again,
    and the child reads all three for every step)."""
    from dbos._context import get_local_dbos_context

    def read() -> tuple[str | None, int | None, Any]:
        ctx = get_local_dbos_context()
        if ctx is None or not ctx.workflow_id:
            return _NO_STEP
        if ctx.curr_step_function_id < 0:  # ``ctx.is_step()``
            return ctx.workflow_id, None, None
        return ctx.workflow_id, ctx.function_id, ctx.step_status

    return read


# -- a client's database (the worker pool) ----------------------------------------------------


def run_client_migrations(client: Any) -> None:
    """DBOS's tables at their latest version in ``client``'s database (a client never
    migrates by itself; DBOS serialises migrations on an advisory lock)."""
    client._sys_db.run_migrations()


def sqlite_migrations() -> list[str]:
    """DBOS's SQLite migrations in order (each a script of statements): what a fresh system
    database is made of (``runner.dbos_template`` checks a template against them)."""
    from dbos._migration import sqlite_migrations as migrations

    return list(migrations)


def client_engine(client: Any) -> Any:
    """``client``'s pooled SQLAlchemy engine on DBOS's system database."""
    return client._sys_db.engine


def sqlite_engine(url: str, engine_kwargs: Mapping[str, Any]) -> Any:
    """A SQLite system database engine made by DBOS's own factory, as ``DBOS.launch`` makes
    one for ``url`` (its IMMEDIATE transactions, busy timeout and foreign keys), with
    ``engine_kwargs`` (SQLAlchemy's, e.g. a ``creator``) given as DBOS's config gives them."""
    from dbos._sys_db_sqlite import SQLiteSystemDatabase

    return SQLiteSystemDatabase._create_engine(None, url, dict(engine_kwargs))  # type: ignore[arg-type]


# -- values as DBOS stores them ---------------------------------------------------------------


def wrap_serializers(pickle: Wrap, portable: Wrap, error_data: Wrap) -> None:
    """Replace what DBOS serializes with: its default (pickle) serializer's and its portable
    JSON serializer's ``serialize``, and its exception-to-error-data converter, each by the
    wrapper given of the original (``runner.guards``: no vault value reaches DBOS)."""
    from dbos import _serialization

    pickling = _serialization.DefaultSerializer
    json_serializer = _serialization.DBOSPortableJSONSerializer
    setattr(pickling, "serialize", pickle(pickling.serialize))  # noqa: B010
    setattr(json_serializer, "serialize", portable(json_serializer.serialize))  # noqa: B010
    converted = error_data(_serialization.exception_to_workflow_error_data)
    setattr(_serialization, "exception_to_workflow_error_data", converted)  # noqa: B010


def _serialize_value(value: Any, serialization: str | None) -> str:
    from dbos._serialization import DefaultSerializer, serialize_value_as

    text, _ = serialize_value_as(value, serialization, DefaultSerializer())
    assert text is not None
    return text


def _deserialize_value(text: str | None, serialization: str | None) -> Any:
    from dbos._serialization import DefaultSerializer, deserialize_value

    return deserialize_value(text, serialization, DefaultSerializer())


def _serialize_input(run_input: Any) -> str:
    from dbos._serialization import DefaultSerializer, serialize_args

    # a fork keeps the format DBOS writes for a run's workflow
    text, _ = serialize_args((run_input,), {}, None, DefaultSerializer())
    return text


def message_pending(workflow_id: str, topic: str | None) -> bool:
    """Whether a message on ``topic`` waits, unconsumed, for the workflow (DBOS's
    ``notifications``), read through the launched DBOS's own engine."""
    import sqlalchemy as sa
    from dbos._dbos import _get_dbos_instance
    from dbos._sys_db import _dbos_null_topic

    sys_db = _get_dbos_instance()._sys_db
    table = sys_db.tables.notifications
    with sys_db.engine.begin() as conn:
        row = conn.execute(
            sa.select(sa.literal(1))
            .where(
                table.c.destination_uuid == workflow_id,
                table.c.topic == (topic if topic is not None else _dbos_null_topic),
                table.c.consumed == sa.false(),
            )
            .limit(1)
        ).fetchone()
    return row is not None


# -- a fork's rows in DBOS's tables (``runner.fork``) ------------------------------------------

_CALLS_SQL: Final = (
    "SELECT function_id, function_name FROM {t}operation_outputs WHERE workflow_uuid = {p} "
    "ORDER BY function_id"
)


def root_calls(conn: Any, workflow_id: str, *, pg: bool) -> list[tuple[int, str]]:
    """The workflow's own calls (function id, step name) in order, from ``operation_outputs``."""
    t, p = ("dbos.", "%s") if pg else ("", "?")
    rows = conn.execute(_CALLS_SQL.format(t=t, p=p), (workflow_id,)).fetchall()
    return [(int(fid), str(name)) for fid, name in rows]


_STARTERS_SQL: Final = (
    "SELECT function_id, function_name, child_workflow_id FROM {t}operation_outputs "
    "WHERE workflow_uuid = {p} AND child_workflow_id IS NOT NULL "
    "AND function_name <> 'DBOS.getResult' ORDER BY function_id"
)


def child_starts(conn: Any, workflow_id: str, *, pg: bool) -> list[tuple[int, str, str]]:
    """The calls that started the workflow's children, in order: (function id, name, the
    child's workflow id); DBOS's ``getResult`` rows, which name a child too, left out."""
    t, p = ("dbos.", "%s") if pg else ("", "?")
    rows = conn.execute(_STARTERS_SQL.format(t=t, p=p), (workflow_id,)).fetchall()
    return [(int(fid), str(name), str(child)) for fid, name, child in rows]


def child_calls(
    conn: Any, workflow_id: str, *, pg: bool, depth: int = 3
) -> list[tuple[str, list[str]]]:
    """Each child workflow the workflow started, in order, as (the starting call's name with
    its occurrence, e.g. ``process#2``; the step names its subtree recorded, in order), its
    grandchildren's calls counted in their child's (down to ``depth`` levels)."""
    out: list[tuple[str, list[str]]] = []
    seen: dict[str, int] = {}
    for _, name, child in child_starts(conn, workflow_id, pg=pg):
        seen[str(name)] = seen.get(str(name), 0) + 1
        calls = [c for _, c in root_calls(conn, str(child), pg=pg)]
        if depth > 1:
            for _, deeper in child_calls(conn, str(child), pg=pg, depth=depth - 1):
                calls += deeper
        out.append((f"{name}#{seen[str(name)]}", calls))
    return out


def delete_workflow_rows(conn: Any, workflow_id: str) -> None:
    """Remove a workflow's own rows from a SQLite copy (its children's rows stay)."""
    for table in ("operation_outputs", "workflow_status", "workflow_input"):
        conn.execute(f"DELETE FROM {table} WHERE workflow_uuid = ?", (workflow_id,))


@dataclass(frozen=True)
class ForkRowEdits:
    """What a held fork's rows are rewritten to (``edit_fork_rows``): its input (``run_input``
    if ``input_edited``), the outputs of the copied calls in ``outputs`` (by function id),
    its DBOS ``attributes``, on PostgreSQL its application (``app_name``), and for a forked
    child workflow its parent (``parent_workflow_id``: DBOS's fork makes a root workflow)."""

    outputs: Mapping[int, Any]
    attributes: Mapping[str, Any]
    run_input: Any = None
    input_edited: bool = False
    app_name: str | None = None
    parent_workflow_id: str | None = None


def edit_fork_rows(conn: Any, workflow_id: str, edits: ForkRowEdits, *, pg: bool) -> None:
    """Rewrite a held fork's rows as ``edits`` says, each copied call's output in its row's
    own serialization."""
    from agentworks.frameworks import step_role
    from relay_notebook.runner.framework_answers import edited_answer

    t, p, cast = ("dbos.", "%s", "::jsonb") if pg else ("", "?", "")

    def one(sql: str, *args: Any) -> Any:
        return conn.execute(sql.format(t=t, p=p), args).fetchone()

    if edits.input_edited:
        conn.execute(
            f"UPDATE {t}workflow_input SET inputs = {p} WHERE workflow_uuid = {p}",
            (_serialize_input(edits.run_input), workflow_id),
        )
    for fid, value in edits.outputs.items():
        (ser, name, saved) = one(
            "SELECT serialization, function_name, output FROM {t}operation_outputs "
            "WHERE workflow_uuid = {p} AND function_id = {p}", workflow_id, fid,
        )  # fmt: skip
        if step_role(name) is not None:  # a framework's model request: the answer, rebuilt
            value = edited_answer(name, _deserialize_value(saved, ser), value)
        conn.execute(
            f"UPDATE {t}operation_outputs SET output = {p}, error = NULL WHERE workflow_uuid = {p} "
            f"AND function_id = {p}",
            (_serialize_value(value, ser), workflow_id, fid),
        )
    conn.execute(
        f"UPDATE {t}workflow_status SET attributes = {p}{cast} WHERE workflow_uuid = {p}",
        (json.dumps(dict(edits.attributes)), workflow_id),
    )
    if pg and edits.app_name is not None:
        conn.execute(
            "UPDATE dbos.workflow_status SET application_name = %s WHERE workflow_uuid = %s",
            (edits.app_name, workflow_id),
        )
    if edits.parent_workflow_id is not None:
        conn.execute(
            f"UPDATE {t}workflow_status SET parent_workflow_id = {p} WHERE workflow_uuid = {p}",
            (edits.parent_workflow_id, workflow_id),
        )
