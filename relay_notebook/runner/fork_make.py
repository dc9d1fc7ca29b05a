"""Making a fork, atomically: recorded ``creating``, made, then published; and completing one
whose maker was killed in between.

Design note: a fork is two things that cannot be written at once, its run.json and its DBOS
rows, so the run.json says ``creating`` (keeping what the fork copies and edits) until the rows
are complete, and nothing runs a ``creating`` fork. On the per-run SQLite default the rows are
made in a staging file beside the fork's database (a copy of the parent's, read without writing
it; DBOS's fork onto the hold queue; the parent's row removed; the edits; the resume) that is
renamed into place once complete: the database exists complete or not at all. On PostgreSQL
the fork's rows stay on the hold queue, which no process serves, until the edits are written,
and the resume is the last write. Every step can be done again from the parent, so ``relay
recover`` of a ``creating`` fork completes it under the parent's run lock (which its maker held
throughout), or refuses in one coded line (``fork-incomplete``) when the parent is gone. A
fork from inside a child workflow is two DBOS forks, the child's first (``fork:child-forked``:
on PostgreSQL a completion keeps the held child it finds), then the run's pointing at it; both
are edited in one transaction and resumed in one (``resume_workflows``), so a fork is never
released without its child. The named points of ``runner.fault_points`` let the tests and the
fuzz kill the maker between any two of these writes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Final

from relay_notebook.errors import RelayError, RunLockedError
from relay_notebook.record import dbos_tables
from relay_notebook.record.dbos_tools import read_dbos_tools
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import (
    Backend,
    app_name_for_run,
    app_version_for_run,
    backend_for_run,
    connect,
    workspace_backend,
)
from relay_notebook.runner.dbos_private import (
    ForkRowEdits,
    delete_workflow_rows,
    edit_fork_rows,
)
from relay_notebook.runner.fault_points import fault_point
from relay_notebook.runner.fork import (
    CREATING,
    HOLD_QUEUE,
    ChildFork,
    ForkError,
    ForkIncompleteError,
    ForkPlan,
    ForkRequest,
    check_compatible,
    copy_database,
    hold_parent,
    plan_fork,
    root_calls_of,
)
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.runner.new_run import record_new_run
from relay_notebook.workspace import Workspace

__all__ = ["complete_fork", "make_fork", "prepare_fork"]

#: run.json's key, while ``creating``, for what completing the fork needs (its copied calls, the
#: edited outputs, the status it then takes)
_CREATION: Final = "fork_creation"


def _edit_rows(conn: Any, plan: ForkPlan, fork: RunFolder, run_input: Any, pg: bool) -> None:
    """The edits, the fork's origin as DBOS attributes, and (on PostgreSQL) its application;
    the same for its forked child, which also gets the fork as its parent."""
    app_name = app_name_for_run(fork.run_id) if pg else None
    origin = {"relay_fork": plan.record(fork.run_id)}
    run_edits = ForkRowEdits(
        outputs=plan.outputs, attributes=origin, run_input=run_input,
        input_edited=plan.input_edited, app_name=app_name,
    )  # fmt: skip
    edit_fork_rows(conn, fork.run_id, run_edits, pg=pg)
    if plan.child is not None:
        child_edits = ForkRowEdits(
            outputs=plan.child.outputs, attributes=origin, app_name=app_name,
            parent_workflow_id=fork.run_id,
        )  # fmt: skip
        edit_fork_rows(conn, plan.child.forked_id(fork.run_id), child_edits, pg=pg)


def _client_call(url: str, call: Any) -> None:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=url)
    try:
        call(client)
    finally:
        client.destroy()


def _fork_workflow(
    url: str, plan: ForkPlan, fork: RunFolder, version: str, *, child_made: bool = False
) -> None:
    """DBOS's own fork, onto the queue nobody serves: the child first (unless ``child_made``
    by a maker killed after it), then the run's workflow pointing at it."""
    from dbos import SetWorkflowID

    child = plan.child

    def call(client: Any) -> None:
        replacement = None
        if child is not None:
            forked = child.forked_id(fork.run_id)
            if not child_made:
                with SetWorkflowID(forked):
                    client.fork_workflow(
                        child.workflow_id, child.function_id, application_version=version,
                        queue_name=HOLD_QUEUE,
                    )  # fmt: skip
                fault_point("fork:child-forked")
            replacement = {child.workflow_id: forked}
        with SetWorkflowID(fork.run_id):
            client.fork_workflow(
                plan.parent, plan.function_id, application_version=version,
                queue_name=HOLD_QUEUE, replacement_children=replacement,
            )  # fmt: skip

    _client_call(url, call)


def _resume(url: str, plan: ForkPlan, fork: RunFolder) -> None:
    """Off the hold queue, onto DBOS's internal one, the fork's workflow and its forked child
    in one transaction: from here they can run."""
    ids = [fork.run_id]
    if plan.child is not None:
        ids.append(plan.child.forked_id(fork.run_id))
    _client_call(url, lambda client: client.resume_workflows(ids))


def _staging(fork: RunFolder) -> Path:
    """Where a fork's SQLite database is made, beside its final place."""
    return fork.database.with_name(fork.database.name + ".creating")


def _remove_sqlite(path: Path) -> None:
    for extra in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + extra).unlink(missing_ok=True)


def _place(staging: Path, target: Path) -> None:
    """Fold the staging file's WAL into it, make it durable, and rename it into place: the
    fork's database exists at ``target`` complete or not at all."""
    with contextlib.closing(sqlite3.connect(staging)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # the last connection closed folds and removes the WAL; a WAL still there holds nothing
    wal = staging.with_name(staging.name + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise OSError(f"the fork's staging database kept its WAL ({wal})")
    for extra in ("-wal", "-shm"):
        staging.with_name(staging.name + extra).unlink(missing_ok=True)
    fd = os.open(staging, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(staging, target)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pg_state(backend: Backend, fork_id: str) -> str | None:
    """The fork's workflow (or its forked child) on PostgreSQL: ``None`` (not made), ``held``
    (on the hold queue: its edits may be missing) or ``released`` (resumed after its edits:
    complete)."""
    with connect(backend) as conn:
        row = conn.execute(dbos_tables.PG_QUEUE_OF, (fork_id,)).fetchone()
    if row is None:
        return None
    return "held" if row[0] == HOLD_QUEUE else "released"


def prepare_fork(
    plan: ForkPlan,
    fork: RunFolder,
    made: RunRecord,
    *,
    backend: Backend,
    parent: RunFolder | None = None,
) -> None:
    """Make the fork's workflow (its version and input as its record ``made`` says), apply the
    edits, record its origin as DBOS attributes, and put it on DBOS's internal queue: in a
    staging copy of ``parent``'s SQLite database renamed into place once complete, or in the
    shared PostgreSQL database, where it stays on the hold queue until complete. Either can be
    done again after a kill at any point (``complete_fork``)."""
    app_version, run_input = made.app_version, made.input
    if backend.is_postgres:
        url, version = backend.dbos_url, app_version_for_run(app_version, fork.run_id)
        state = _pg_state(backend, fork.run_id)
        if state == "released":
            return
        if state is None:
            child_made = plan.child is not None and (
                _pg_state(backend, plan.child.forked_id(fork.run_id)) is not None
            )
            _fork_workflow(url, plan, fork, version, child_made=child_made)
            fault_point("fork:forked")
        with connect(backend) as conn, conn.transaction():
            _edit_rows(conn, plan, fork, run_input, pg=True)
        fault_point("fork:edited")
        _resume(url, plan, fork)
        fault_point("fork:resumed")
        return
    if parent is None:
        raise ValueError("a SQLite fork is made from its parent's database")
    staging = _staging(fork)
    _remove_sqlite(staging)  # what a killed maker left is made again from the parent
    copy_database(parent.database, staging)
    fault_point("fork:copied")
    url = f"sqlite:///{staging.resolve()}"
    _fork_workflow(url, plan, fork, app_version)
    fault_point("fork:forked")
    ours = {fork.run_id} | ({plan.child.forked_id(fork.run_id)} if plan.child else set())
    with contextlib.closing(sqlite3.connect(staging)) as conn, conn:
        # the parent's row goes: the fork's child must never recover the parent (its
        # children and their rows stay, copied calls may read their results), nor the child
        # the fork replaced; so do workflows the kit did not make (a `dbos workflow fork` of
        # the parent): not the fork's to run
        for outside in read_dbos_tools(conn, plan.parent).outside:
            if outside.workflow_id not in ours:
                delete_workflow_rows(conn, outside.workflow_id)
        delete_workflow_rows(conn, plan.parent)
        if plan.child is not None:
            delete_workflow_rows(conn, plan.child.workflow_id)
        _edit_rows(conn, plan, fork, run_input, pg=False)
    fault_point("fork:edited")
    _resume(url, plan, fork)
    fault_point("fork:resumed")
    _place(staging, fork.database)
    fault_point("fork:placed")


def make_fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    backend: Backend | None,
    queued: bool,
) -> tuple[RunFolder, RunRecord]:
    """The fork's folder and its record, as written.

    Planned and checked on the parent (under its run lock) before anything is written, so a
    refused fork leaves nothing; then recorded ``creating`` (with what completing it needs),
    made (``prepare_fork``), and only then recorded ``pending`` (or ``queued``). A kill in
    between leaves a ``creating`` fork that ``relay recover`` completes or refuses
    (``complete_fork``), never one that runs as a fresh run.
    """
    from relay_notebook.record.bindings import draft_code, release_code

    parent = find_run(workspace, run_id)
    record = RunRecord.load(parent)
    backend = backend_for_run(record, workspace_backend(workspace, backend))
    relay = record.relay
    current = workspace.load_draft(relay)
    release = request.release
    if release is None and not request.draft:
        if record.release:
            release = f"v{record.release['version']}"
        elif draft_code(current).source_hash != record.app_version:
            raise ForkError(
                f"Cannot fork run {run_id} onto its own code: the draft of {relay} changed "
                f"since the run started. Fork onto the current draft with --draft (its "
                f"calls are checked against the copied ones), or onto a release with "
                f"--release REF."
            )
    lock = hold_parent(parent, backend)
    try:
        plan = plan_fork(
            workspace, parent, backend if backend.is_postgres else parent.database,
            request.from_call, sets=request.sets, input_edited=request.input_given,
        )  # fmt: skip
        code = draft_code(current) if release is None else release_code(workspace, relay, release)
        same_code = code.source_hash == record.app_version
        if not same_code:
            source = (Path(code.folder) / "relay.py").read_text(encoding="utf-8")
            check_compatible(plan, source, relay)
        whose = "the parent's" if same_code else (f"release {release}" if release else "the draft")
        fault_point("fork:planned")

        def creating(made: RunRecord) -> None:
            made.status, made.fork = CREATING, {**plan.record(made.run_id), "code": whose}
            made.raw[_CREATION] = {
                "status": "queued" if queued else "pending",
                "copied": [[fid, name] for fid, name in plan.copied],
                "outputs": [[fid, value] for fid, value in plan.outputs.items()],
            }
            if plan.child is not None:
                made.raw[_CREATION]["child"] = {
                    "copied": [[fid, name] for fid, name in plan.child.copied],
                    "outputs": [[fid, value] for fid, value in plan.child.outputs.items()],
                }

        fork, made = record_new_run(
            workspace, current,
            run_input=request.run_input if request.input_given else record.input,
            release=release, backend=backend, queued=queued, shape=creating,
        )  # fmt: skip
        fault_point("fork:recorded")
        try:
            prepare_fork(plan, fork, made, backend=backend, parent=parent)
        except BaseException:
            _undo(fork, backend, plan)
            raise
        made = _publish(fork, made)
    finally:
        lock.release()
    return fork, made


def _publish(fork: RunFolder, made: RunRecord) -> RunRecord:
    """The fork is complete: its run.json says so (``pending``, or ``queued`` for the pool)."""
    creation = made.raw.pop(_CREATION, None)
    final = creation.get("status") if isinstance(creation, dict) else None
    made.status = final if final in ("pending", "queued") else "pending"
    made.save(fork)
    fault_point("fork:published")
    return made


def _undo(fork: RunFolder, backend: Backend, plan: ForkPlan) -> None:
    """A fork whose making failed (not a kill: an error) goes, rows and folder; if that fails
    too it stays ``creating``, for ``relay recover`` to complete or refuse."""
    try:
        if backend.is_postgres:
            # the forked child too: it has no parent until the edits are written
            child = plan.child.forked_id(fork.run_id) if plan.child else None
            ids = [w for w in (fork.run_id, child) if w and _pg_state(backend, w)]
            if ids:
                _client_call(backend.dbos_url, lambda client: client.delete_workflows(ids))
        shutil.rmtree(fork.path)
    except Exception:  # the error that stopped the fork is the one to report
        return


def _incomplete(fork: RunRecord, why: str) -> ForkIncompleteError:
    origin = fork.fork or {}
    parent, call = origin.get("parent", "PARENT"), origin.get("from", "STEP")
    return ForkIncompleteError(
        f"Cannot recover run {fork.run_id}: it is a fork of {parent} whose making was cut "
        f"short, and it cannot be completed ({why}); it never ran. Delete it with: relay "
        f"delete {fork.run_id}, then fork again with: relay fork {parent} --from {call}"
    )


def _stored_child(origin: dict[str, Any], creation: dict[str, Any]) -> ChildFork | None:
    """The forked child a ``creating`` fork's run.json keeps (``None``: it forks none)."""
    child: Any = origin.get("child")
    if child is None:
        return None
    made: Any = creation["child"]  # missing: the plan is unusable (KeyError)
    return ChildFork(
        starter=int(child["starter"]),
        starter_call=str(child["starter_call"]),
        workflow_id=str(child["parent_workflow_id"]),
        function_id=int(child["function_id"]),
        copied=[(int(fid), str(name)) for fid, name in made["copied"]],
        outputs={int(fid): value for fid, value in made["outputs"]},
    )


def _stored_plan(record: RunRecord) -> ForkPlan | None:
    """The plan a ``creating`` fork's run.json keeps (``None``: it keeps none usable)."""
    origin, creation = record.fork, record.raw.get(_CREATION)
    if not isinstance(origin, dict) or not isinstance(creation, dict):
        return None
    try:
        edits = origin["edits"]
        return ForkPlan(
            parent=str(origin["parent"]),
            call=str(origin["from"]),
            function_id=int(origin["function_id"]),
            copied=[(int(fid), str(name)) for fid, name in creation["copied"]],
            outputs={int(fid): value for fid, value in creation["outputs"]},
            edited=[str(e) for e in edits["outputs"]],
            input_edited=bool(edits["input"]),
            child=_stored_child(dict(origin), creation),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _still_copies(source: Path | Backend, plan: ForkPlan) -> bool:
    """Whether the parent still has the calls the fork was to copy (its child's too)."""
    calls = [(f, n) for f, n in root_calls_of(source, plan.parent) if f < plan.function_id]
    if calls != plan.copied:
        return False
    child = plan.child
    if child is None:
        return True
    copied = [(f, n) for f, n in root_calls_of(source, child.workflow_id) if f < child.function_id]
    return copied == child.copied


def complete_fork(
    workspace: Workspace, fork: RunFolder, record: RunRecord, backend: Backend | None = None
) -> RunRecord:
    """Complete the making of ``fork`` (run.json says ``creating``: ``relay fork`` was killed
    before it finished) from its parent, under the parent's run lock, and return its record,
    now ``pending``; or refuse with ``ForkIncompleteError`` saying how to delete it."""
    plan = _stored_plan(record)
    if plan is None:
        raise _incomplete(record, "its run.json does not keep what it was to copy and edit")
    try:
        parent = find_run(workspace, plan.parent)
    except RelayError:
        raise _incomplete(record, f"its parent {plan.parent} is gone") from None
    run_backend = backend_for_run(record, workspace_backend(workspace, backend))
    try:
        lock = take_run_lock(parent, run_backend)
    except RunLockedError:
        raise RunLockedError(
            f"Cannot recover run {fork.run_id} now: it is a fork still being made, or its "
            f"parent {parent.run_id} is running. Wait for them to end (relay runs "
            f"{fork.relay}), then recover it again."
        ) from None
    try:
        record = RunRecord.load(fork)  # again, under the lock: another recover may have done it
        if record.status != CREATING:
            return record
        if run_backend.is_postgres or not fork.database.exists():
            source: Path | Backend = run_backend if run_backend.is_postgres else parent.database
            if not _still_copies(source, plan):
                raise _incomplete(record, f"its parent {plan.parent} no longer has the calls "
                                  f"it was to copy")  # fmt: skip
            try:
                prepare_fork(plan, fork, record, backend=run_backend, parent=parent)
            except RelayError:
                raise
            except Exception as exc:  # a database error: one coded line
                raise _incomplete(record, f"{type(exc).__name__}: {exc}") from exc
        return _publish(fork, record)
    finally:
        lock.release()
