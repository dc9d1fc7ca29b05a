"""The child: one attempt of one run, in its own process, on DBOS (the run's SQLite file or
the workspace's PostgreSQL database).

Design note: the child configures and launches DBOS itself (authored code never does), pins
``application_version`` to the release or draft hash so that a recovery finds its workflow,
and exits with ``os._exit`` once its outcome is on disk, skipping DBOS's slow ``destroy``.
A recovery does not wait for DBOS's internal queue poll (about a second): the child polls
that queue fast only until its own workflow has been picked up, then restores the default,
so steps do not pay for the fast poll. On PostgreSQL the child is its run's own DBOS
application (see ``runner.backend``), holds the run's child lock, and takes the workflow over
from a dead worker's executor id. Run as ``python -m relay_notebook.runner.child SPEC`` (bwrap,
or unconfined), or called as ``main(SPEC)`` in the relay's process of a sandbox (forked by a
warm parent, or spawned through ``runner.sandbox_exec``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import importlib.util
import inspect
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from relay_notebook.errors import codes
from relay_notebook.errors.codes import Code
from relay_notebook.errors.storage import is_disk_full
from relay_notebook.record.backend import database_error
from relay_notebook.record.ledger import EventWriter
from relay_notebook.record.ledger_events import Event
from relay_notebook.runner.child_logs import route_logs
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.dbos_engines import (
    engine_ahead_rehearsed,
    postgres_engine,
    rehearsed_on,
    sessions_ahead,
    sqlite_engine_for,
)
from relay_notebook.runner.dbos_private import (
    internal_queue_poll,
    recover_pending_workflows,
    set_internal_queue_poll,
)
from relay_notebook.runner.leave import DISK_FULL_EXIT_CODE, leave, lost
from relay_notebook.runner.legacy_entry import is_legacy, legacy_entry
from relay_notebook.runner.locks import lock_session_given
from relay_notebook.runner.namespaces import name_process
from relay_notebook.runner.spec import AttemptSpec
from relay_notebook.workspace.file_io import write_json_atomic

if TYPE_CHECKING:
    from relay_notebook.runner.queues import DeclaredQueues

RESULT_LIMIT = 128 * 1024
_TERMINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}
_FAST_POLL_SEC = 0.01


def _prepare_database(path: Path) -> bool:
    """Start a new run's SQLite file from the migrated template (``runner.dbos_template``),
    put it in WAL mode before DBOS opens it (WAL persists in the file), and hold it open.

    The mode is checked, not the file's existence: a kill right after the file was created
    would otherwise leave a rollback-journal database for every later attempt. Returns
    whether the file came from the template.
    """
    from relay_notebook.runner.dbos_template import copy_template

    copied = copy_template(path)
    try:
        _hold_wal(path)
    except sqlite3.DatabaseError:
        if not copied:
            raise
        path.unlink()  # the template was not a database after all: start from an empty file
        _hold_wal(path)
        return False
    return copied


#: the attempt's own connection to its database, open until the process ends
_held: list[sqlite3.Connection] = []


def _hold_wal(path: Path) -> None:
    """Open the database in WAL mode and keep the connection until the attempt ends: its
    ``-wal`` and ``-shm`` are made by this process (so they are its own) and, since the last
    connection to close would remove them, never removed while the attempt lives. A reader of
    the kit's, run as root, never makes them then (see ``record.store``)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        conn.close()
        raise
    _held.append(conn)


def _sqlite_temp_files_in_tmpdir() -> None:
    """Make SQLite put its temporary files in this attempt's ``TMPDIR`` (its private tmp).

    SQLite reads ``TMPDIR`` once, when the sqlite3 module is imported: a child forked from the
    warm parent inherits the parent's choice (``/var/tmp``), where Landlock forbids writes, so
    a statement that spills (DBOS consuming a 125 KB message) failed with "unable to open
    database file". The pragma sets SQLite's process-wide directory; no other thread runs yet.
    """
    tmp = os.environ.get("TMPDIR")
    if tmp and os.path.isdir(tmp):
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("PRAGMA temp_store_directory = '{}'".format(tmp.replace("'", "''")))
        finally:
            conn.close()


def _workflow_status(spec: AttemptSpec, database_url: str | None) -> tuple[str, str] | None:
    """The run's DBOS status and executor before this attempt (``None``: a fresh run)."""
    from relay_notebook.record.backend import Backend
    from relay_notebook.record.dbos_tables import STATUS_AND_EXECUTOR as query
    from relay_notebook.record.store import lend_session, open_store

    backend = Backend(database_url)
    store = open_store(backend, spec.database, spec.run_id, live=False)
    # On PostgreSQL, the read runs on the child lock's session rather than a session of its own.
    with lend_session(backend, _CHILD_LOCK), store as conn:
        try:
            row = conn.execute(query, (spec.run_id,)).fetchone() if conn else None
        except sqlite3.OperationalError:
            row = None  # no schema yet (or another child is creating DBOS's tables)
    return (str(row[0]), str(row[1])) if row else None


def _load_relay(code_dir: Path, entry: str) -> ModuleType:
    sys.path.insert(0, str(code_dir))
    spec = importlib.util.spec_from_file_location("relay", code_dir / entry)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["relay"] = module
    spec.loader.exec_module(module)
    return module


def _error(entry: Code, message: str, tb: str | None = None) -> dict[str, Any]:
    return entry.record(message, traceback=tb) if tb else entry.record(message)


async def _await_recovery(workflow_id: str) -> Any:
    from dbos import DBOS

    default_poll = internal_queue_poll()
    try:
        while True:
            status = await DBOS.get_workflow_status_async(workflow_id)
            if status is not None and status.status != "ENQUEUED":
                set_internal_queue_poll(default_poll)
            if status is not None and status.status in _TERMINAL:
                break
            await asyncio.sleep(0.005 if status is None or status.status == "ENQUEUED" else 0.02)
    finally:
        set_internal_queue_poll(default_poll)
    handle: Any = await DBOS.retrieve_workflow_async(workflow_id)
    return await handle.get_result()


async def _run_attempt(
    spec: AttemptSpec,
    events: EventWriter,
    entry: Any,
    database_url: str | None,
    from_template: bool = False,
    queues: DeclaredQueues | None = None,
) -> dict[str, Any]:
    from dbos import DBOS, SetWorkflowID
    from dbos import error as dbos_error

    run_id = spec.run_id
    before = _workflow_status(spec, database_url)
    prior = before[0] if before else None
    if prior is not None:
        # Recovery: make DBOS's internal queue pick the workflow up at once (restored after).
        set_internal_queue_poll(_FAST_POLL_SEC)
    t0 = time.time() * 1000
    events.emit(
        "attempt_start",
        pid=os.getpid(), prior_status=prior, t0=round(t0, 1), from_template=from_template,
    )  # fmt: skip
    DBOS.launch()
    # What the attempt made to start (imports, the relay's module, DBOS's launch) lives until it
    # ends: kept out of collections, a full one of which took ~50 ms of the loop in a
    # 1,500-step relay (the warm parent freezes its own imports so; its forks freeze theirs)
    gc.freeze()
    if before is not None and before[0] == "PENDING" and before[1] != spec.executor_id:
        # Another executor (a worker that died) left the workflow PENDING; DBOS's launch only
        # recovers our own executor's. Scoped by the run's application name, this re-enqueues
        # exactly this run's workflow, and only while it is still PENDING for that executor.
        recover_pending_workflows([before[1]])
    try:
        if queues is not None and queues.calls:
            await asyncio.to_thread(queues.register)  # the relay's module-level queues
        if prior is None:
            with SetWorkflowID(run_id):
                if inspect.iscoroutinefunction(entry):
                    result = await entry(spec.input)
                else:  # a sync workflow, called in a thread as DBOS calls one (its context too)
                    result = await asyncio.to_thread(entry, spec.input)
        else:
            result = await _await_recovery(run_id)
    except dbos_error.DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded as exc:
        return {
            "status": "failed",
            "error": _error(
                codes.MAX_RECOVERY_ATTEMPTS_EXCEEDED,
                f"DBOS stopped recovering run {run_id}: it exceeded the workflow's "
                f"max_recovery_attempts ({exc}). Raise max_recovery_attempts in "
                f"@DBOS.workflow(...) if the crashes are expected, then start a new run.",
            ),
        }
    except dbos_error.DBOSUnexpectedStepError as exc:
        return {
            "status": "failed",
            "error": _error(
                codes.NONDETERMINISTIC_REPLAY,
                f"Run {run_id} did not replay the same steps as before: {exc}. Workflow code "
                f"must call the same steps in the same order on every attempt; move time, "
                f"randomness and I/O into steps.",
            ),
        }
    except Exception as exc:
        recorded = [
            e
            for e in _attempt_events(events)
            if e["kind"] == "workflow_error" and e.get("workflow_id") == run_id
        ]
        from relay_notebook.runner.instrument import user_traceback

        tb = recorded[-1]["traceback"] if recorded else user_traceback(exc, spec.code_dir)
        if database_error(exc) is not None and is_disk_full(exc):
            # not the run's failure: its checkpoints are kept, and it goes on once there is room
            return {
                "status": "interrupted",
                "error": _error(codes.DISK_FULL, _full_line(spec), tb),
            }
        if database_error(exc) is not None:
            return {
                "status": "failed",
                "error": _error(codes.DATABASE_ERROR, _db_line(spec, exc), tb),
            }
        message = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, OSError) and _denied_by_confinement(spec, exc):
            message += (
                f". A relay sees only its sandbox and writes only inside its run folder's "
                f"execution area "
                f"({spec.run_dir / 'execution'}); use agentworks.run_dir or a "
                f"relative path."
            )
        return {"status": "failed", "error": _error(codes.RELAY_RAISED, message, tb)}
    finally:
        await _close_mcp_sessions()
    return _finish_result(spec, result)


async def _close_mcp_sessions() -> None:
    """Close the MCP sessions the relay opened: none unless it loaded ``agentworks.mcp``, which
    an attempt does not import only to find no session (about 10 ms, each attempt)."""
    module = sys.modules.get("agentworks.mcp")
    if module is not None:
        await module.close_pools()


def _full_line(spec: AttemptSpec) -> str:
    """A full disk stopped DBOS's writes: the run is interrupted, not failed."""
    return (
        f"The disk holding {spec.run_dir} is full: DBOS could not write run {spec.run_id}'s "
        f"checkpoint, so the attempt stopped. The run is interrupted and its checkpoints are "
        f"kept. Free space there, then recover it with: relay recover {spec.run_id}"
    )


def _db_line(spec: AttemptSpec, exc: Exception) -> str:
    """A database error of DBOS's as one line: what failed and SQLite's (or PostgreSQL's)
    reason, never the statement SQLAlchemy's text carries."""
    from relay_notebook.record.backend import error_text

    reason = " ".join(error_text(exc).split())
    return (
        f"Run {spec.run_id} stopped: DBOS could not read or write the run's database "
        f"({type(database_error(exc)).__name__}: {reason}). Free space or restore the "
        f"database from a copy, then start a new run."
    )


def _denied_by_confinement(spec: AttemptSpec, exc: OSError) -> bool:
    """Whether ``exc`` is a write the confinement refused (a read-only mount; Landlock: EACCES;
    the sandbox: a path its root does not hold)."""
    if exc.errno == errno.EROFS:
        return True
    sandboxed = (spec.confinement or {}).get("mechanism") in ("landlock", "sandbox")
    if sandboxed and exc.errno == errno.ENOENT and isinstance(exc.filename, str):
        return not Path(exc.filename).resolve().is_relative_to(spec.run_dir.resolve())
    return sandboxed and exc.errno == errno.EACCES


def _attempt_events(events: EventWriter) -> list[Event]:
    from relay_notebook.record.ledger import read_events

    return [e for e in read_events(events.path) if e.get("attempt") == events.attempt]


def _finish_result(spec: AttemptSpec, result: Any) -> dict[str, Any]:
    try:
        text = json.dumps(result, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        return {
            "status": "failed",
            "error": _error(
                codes.RESULT_NOT_JSON,
                f"run() returned a value that is not JSON ({exc}). Return dicts, lists, "
                f"strings, numbers, booleans or None.",
            ),
        }
    size = len(text.encode())
    if size > RESULT_LIMIT:
        return {
            "status": "failed",
            "error": _error(
                codes.RESULT_TOO_LARGE,
                f"run() returned {size:,} bytes of JSON; the limit is {RESULT_LIMIT:,} "
                f"(128 KiB). Write large data to run_dir and return a reference to it.",
            ),
        }
    write_json_atomic(spec.result_path, result)
    return {"status": "succeeded", "result_bytes": size}


def main(spec_path: str) -> None:
    """Run the attempt ``spec_path`` describes; leave with ``DISK_FULL_EXIT_CODE`` if the disk
    fills before its outcome is written (the supervisor records the run interrupted)."""
    try:
        _attempt(spec_path)
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        with contextlib.suppress(Exception):
            print(f"relay: the disk is full: {type(exc).__name__}: {exc}", file=sys.stderr)
            sys.stderr.flush()
        os._exit(DISK_FULL_EXIT_CODE)


def _attempt(spec_path: str) -> None:
    name_process("relay-child")  # its threads (DBOS's) are made after: they are named so too
    # jsonschema imports rfc3987_syntax when installed, which compiles a grammar for 1.5 s on
    # every attempt; relays never validate IRI formats, so the child does without it.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    _sqlite_temp_files_in_tmpdir()
    spec = AttemptSpec.read(spec_path)
    if spec.stop_at is not None:  # tests only: the point its supervisor's command stops at
        from relay_notebook.runner.fault_points import arm

        arm(None, spec.stop_at)
    if spec.report_fd is not None:
        _report_confinement(dict(spec.confinement or {}), spec.report_fd)
    events = EventWriter(
        spec.events_path,
        run_id=spec.run_id,
        attempt=spec.attempt,
        pipe_fd=spec.pipe_fd,
        hold=True,  # two lines a step: the lock kept between them (see ``record.ledger``)
    )
    outcome_path = spec.outcome_path
    code_dir = spec.code_dir
    from dbos import DBOS, DBOSConfig

    from relay_notebook.runner.child_runtime import install_runtime, read_private, read_secrets
    from relay_notebook.runner.instrument import Instrumentation, user_traceback

    if spec.lifeline_fd is not None:
        _watch_lifeline(spec.lifeline_fd)
    private = read_private()
    database_url = private.get("database_url")
    # the sandbox's way out is set up while we start: a PostgreSQL run needs it at once, the
    # others only once the relay's code runs (its import has no effects: see SPEC §2)
    net_fd = spec.net_ready_fd
    if net_fd is not None and database_url is not None:
        _await_network(net_fd)
        net_fd = None
    runtime = install_runtime(spec, events, read_secrets(private), outcome_path)
    if database_url is not None:
        # first, before the relay's imports: from here on this process is the run's executor
        _hold_child_lock(spec, database_url, events, outcome_path, runtime)
    crash = spec.crash
    watch = None
    if spec.context.durable:
        from relay_notebook.runner.waits import WaitWatch

        watch = WaitWatch(
            lambda outcome: _finish(events, outcome_path, runtime, _carry_crash(outcome, crash)),
            grace_s=spec.context.wait_grace_s,
        )
        watch.install()
    Instrumentation(events, crash, code_dir, runtime.redactor, spec.entry, watch).install(runtime)
    from relay_notebook.runner.queues import DeclaredQueues

    queues = DeclaredQueues()
    queues.install()
    try:
        module = _load_relay(code_dir, spec.entry)
        entry = getattr(module, "run", None)
        if entry is None:
            raise AttributeError("the relay defines no run(INPUT) function")
        legacy = is_legacy(entry)
    except Exception as exc:
        outcome = {
            "status": "failed",
            "error": _error(
                codes.RELAY_IMPORT_FAILED,
                f"The relay could not be imported: {type(exc).__name__}: {exc}",
                user_traceback(exc, code_dir),
            ),
        }
    else:
        if legacy:
            entry = legacy_entry(entry, durable=spec.context.durable)
        if not spec.context.durable:
            if net_fd is not None:
                _await_network(net_fd)
            outcome = asyncio.run(_run_without_dbos(spec, entry))
            _finish(events, outcome_path, runtime, outcome)
        from_template = False
        if database_url is None:
            from relay_notebook.runner.fault_points import fault_point

            fault_point("attempt:database")
            from_template = _prepare_database(spec.database)
            fault_point("attempt:prepared")
            name, url = "relay", f"sqlite:///{spec.database.resolve()}"
            version = spec.app_version
        else:
            from relay_notebook.runner.backend import app_version_for_run

            name, url = spec.app_name, database_url
            version = app_version_for_run(spec.app_version, spec.run_id)
        config: DBOSConfig = {
            "name": name,
            "system_database_url": url,
            "application_version": version,
            "executor_id": spec.executor_id,
            "log_level": "WARNING",
        }
        if database_url is not None:
            engine = postgres_engine(database_url)
            config["system_database_engine"] = engine
            if rehearsed_on(database_url, engine):  # migrated by the rehearsal: verified only
                config["run_migrations"] = False
        else:  # forked from a warm parent: its engine, DBOS's statements compiled already
            rehearsed = sqlite_engine_for(spec.database)
            if rehearsed is not None:
                config["system_database_engine"] = rehearsed
        DBOS(config=config)
        if database_url is not None:
            # a shared database: dequeue nothing but our own recovery and the relay's queues
            # (each registered by this run's own application, which alone dequeues from it)
            DBOS.listen_queues(queues.names)
        route_logs(events)
        if net_fd is not None:
            _await_network(net_fd)
        outcome = asyncio.run(
            _run_attempt(spec, events, entry, database_url, from_template, queues)
        )
    _finish(events, outcome_path, runtime, outcome)


def _carry_crash(outcome: dict[str, Any], crash: CrashSpec | None) -> dict[str, Any]:
    """A waiting outcome keeps the ``--crash`` point this attempt did not reach (it would have
    left the process there): the attempt that resumes the run fires it (``runner.runs``)."""
    if crash is not None and isinstance(outcome.get("waiting"), dict):
        outcome["waiting"]["crash"] = crash.to_dict()
    return outcome


def _await_network(fd: int) -> None:
    """Wait for the sandbox's network helper (``runner.sandbox``); say on stderr if the relay
    will find no way out."""
    from relay_notebook.runner.sandbox_net import wait_for_network

    word = wait_for_network(fd)
    if word not in ("ok", "none"):
        print(f"relay: this attempt cannot reach the network: {word}", file=sys.stderr)


def _report_confinement(check: dict[str, Any], fd: int) -> None:
    """Check our confinement and tell the supervisor, before any relay code can run."""
    from relay_notebook.runner.confine import verify_confinement

    report = verify_confinement(check)
    ahead = sessions_ahead()
    if ahead:  # PostgreSQL sessions its leader opened outside the sandbox's network
        report["database_sessions_ahead"] = ahead
        if engine_ahead_rehearsed():  # DBOS's statements compiled by the warm parent
            report["database_engine"] = "rehearsed"
    if lock_session_given():  # the run lock's session: one its warm parent keeps
        report["run_lock_session"] = "given"
    with contextlib.suppress(OSError):
        os.write(fd, (json.dumps(report) + "\n").encode())
    os.close(fd)


_CHILD_LOCK: Any = None


def _hold_child_lock(
    spec: AttemptSpec, database_url: str, events: EventWriter, outcome_path: Path, runtime: Any
) -> None:
    """Take the run's child lock in PostgreSQL for the life of this process (see runner.locks)."""
    global _CHILD_LOCK
    from relay_notebook.runner.backend import Backend
    from relay_notebook.runner.locks import hold_child_lock

    _CHILD_LOCK = hold_child_lock(Backend(database_url), spec.run_id, on_lost=lost)
    if _CHILD_LOCK is None:
        _finish(
            events,
            outcome_path,
            runtime,
            {
                "status": "rejected",
                "error": _error(
                    codes.RUN_LOCKED,
                    f"Run {spec.run_id} is being executed by another process; this attempt "
                    f"did not start.",
                ),
            },
        )


def _watch_lifeline(fd: int) -> None:
    """Leave at once when the supervisor is gone (its end of the pipe closes).

    Nothing is written on the way out: the main thread may be mid-write to the ledger, and
    the next attempt's supervisor records this one as lost.
    """
    import threading

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 1):
                pass
        lost()

    threading.Thread(target=watch, name="relay-lifeline", daemon=True).start()


def _finish(
    events: EventWriter, outcome_path: Path, runtime: Any, outcome: dict[str, Any]
) -> NoReturn:
    """Record the attempt's outcome and leave the process (see ``runner.leave``)."""
    leave(events, outcome_path, outcome, runtime.redactor.scrub)


async def _run_without_dbos(spec: AttemptSpec, entry: Any) -> dict[str, Any]:
    """``relay_durability: none``: the program runs once, with no checkpoints."""
    from relay_notebook.runner.guards import refuse_secret_result
    from relay_notebook.runner.instrument import user_traceback

    try:
        result = await entry(spec.input)
        refuse_secret_result(result)  # no DBOS serializer guards this run's result
    except Exception as exc:
        tb = user_traceback(exc, spec.code_dir)
        return {
            "status": "failed",
            "error": _error(codes.RELAY_RAISED, f"{type(exc).__name__}: {exc}", tb),
        }
    finally:
        await _close_mcp_sessions()
    return _finish_result(spec, result)


if __name__ == "__main__":
    main(sys.argv[1])
