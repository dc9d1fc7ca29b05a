"""Forking a run: a new run whose calls before a chosen one are copied checkpoints of its parent.

Design note: DBOS's own ``fork_workflow`` does the copying (the workflow's inputs, every step
output before ``start_step``, events and streams) with the fork's run id as its workflow id
and an explicit ``application_version`` (a NULL version would only be dequeued by the latest
version). On the per-run SQLite default the fork's database starts as a consistent copy of
the parent's (SQLite's backup API, WAL included) and the parent's own row is removed from the
copy, so the fork's child can never recover the parent. On PostgreSQL the fork lives in the
same database, moved to its own DBOS application (each run is one; DBOS copies the parent's
name), and the parent's rows stay where they are. The fork is made onto a queue nobody
serves (``relay-hold``), edited (the input, copied step outputs: DBOS has no API for that, so
its ``workflow_input`` and ``operation_outputs`` rows are rewritten with its own serializer),
and only then resumed onto the internal queue, where the fork's first attempt picks it up
exactly as a recovery would: copied calls replay from their checkpoints, the chosen call and
everything after it run fresh. The parent is held under its run lock while it is copied.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentworks.redact import Redactor
from relay_notebook.errors import InvalidInputError, RelayError, RunLockedError, codes
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import open_database
from relay_notebook.runner.backend import (
    Backend,
    app_name_for_run,
    app_version_for_run,
    backend_for_run,
    connect,
    workspace_backend,
)
from relay_notebook.runner.dbos_private import delete_workflow_rows, edit_fork_rows, root_calls
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.runner.run_input import check_run_input
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

if TYPE_CHECKING:
    from relay_notebook.runner.crash import CrashSpec
    from relay_notebook.runner.handle import EventCallback, RunHandle

__all__ = [
    "HOLD_QUEUE",
    "ForkError",
    "ForkPlan",
    "ForkRequest",
    "copy_database",
    "create_fork",
    "plan_fork",
    "prepare_fork",
    "start_fork",
]

#: the queue a fork waits on while it is edited; no process of the kit listens to it
HOLD_QUEUE: Final = "relay-hold"


class ForkError(RelayError):
    """A fork cannot be made as asked (the call is not in the parent, a database it needs)."""

    entry = codes.FORK_REFUSED


@dataclass
class ForkPlan:
    """What a fork copies and changes: resolved from the parent before anything is written."""

    parent: str
    call: str  # STEP#N as the user named it
    function_id: int  # the first function id that runs fresh
    copied: list[tuple[int, str]]  # (function id, step name) of the copied calls
    outputs: dict[int, Any] = field(default_factory=dict)  # edited outputs by function id
    edited: list[str] = field(default_factory=list)  # STEP#N of the edited outputs
    input_edited: bool = False

    def record(self) -> dict[str, Any]:
        """The fork's origin as run.json keeps it."""
        return {
            "parent": self.parent,
            "from": self.call,
            "function_id": self.function_id,
            "copied": [fid for fid, _ in self.copied],
            "edits": {"input": self.input_edited, "outputs": list(self.edited)},
            "edited_ids": sorted(self.outputs),
        }


def parse_call(text: str, what: str) -> tuple[str, int]:
    """``STEP`` or ``STEP#N`` (N from 1, ASCII digits) as ``(name, N)``."""
    name, _, nth = text.strip().partition("#")
    if not name or (nth and not (nth.isascii() and nth.isdigit() and 0 < int(nth) < 10**9)):
        raise InvalidInputError(
            f"{what} {text!r} is not a step call; write STEP or STEP#N (the N-th call of STEP, "
            f"from 1), e.g. price#2."
        )
    return name, int(nth) if nth else 1


def _root_calls(db: Path | Backend, run_id: str) -> list[tuple[int, str]]:
    """The parent's root-workflow calls in order (its SQLite copy, or its PostgreSQL)."""
    if isinstance(db, Backend):
        with connect(db) as conn:
            return root_calls(conn, run_id, pg=True)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return root_calls(conn, run_id, pg=False)


def _nth(calls: list[tuple[int, str]], name: str, n: int) -> int | None:
    seen = 0
    for fid, called in calls:
        if called == name:
            seen += 1
            if seen == n:
                return fid
    return None


def _describe(calls: list[tuple[int, str]]) -> str:
    counts: dict[str, int] = {}
    names = []
    for _, name in calls:
        if name.startswith("DBOS."):
            continue
        counts[name] = counts.get(name, 0) + 1
        names.append(f"{name}#{counts[name]}")
    return ", ".join(names[:20]) + (" …" if len(names) > 20 else "") if names else "none"


def plan_fork(
    workspace: Workspace,
    parent: RunFolder,
    db: Path | Backend,
    call: str,
    *,
    sets: Mapping[str, Any],
    input_edited: bool,
) -> ForkPlan:
    """Resolve ``call`` and the ``sets`` (``STEP#N`` → new output) against ``db`` (a copy of
    the parent's database); refuse what cannot be forked, naming the calls there are."""
    calls = _root_calls(db, parent.run_id)
    name, n = parse_call(call, "--from")
    start = _nth(calls, name, n)
    if start is None:
        if calls and name == calls[-1][1] and n == 1 + sum(1 for _, c in calls if c == name):
            start = calls[-1][0] + 1  # the next call of the last step: fork after everything
        else:
            raise ForkError(
                f"Cannot fork run {parent.run_id} from {call}: the run recorded no such call "
                f"(its calls: {_describe(calls)}). Name one of them, e.g. --from "
                f"{calls[0][1] if calls else 'STEP'}#1."
            )
    copied = [(fid, c) for fid, c in calls if fid < start]
    plan = ForkPlan(parent.run_id, call, start, copied, input_edited=input_edited)
    secrets = Redactor(Vault(workspace.home).values())
    for target, value in sets.items():
        step, k = parse_call(target, "--set")
        fid = _nth(copied, step, k)
        if fid is None:
            raise ForkError(
                f"Cannot set the output of {target}: only calls before {call} are copied into "
                f"the fork (copied: {_describe(copied)}); the others run fresh."
            )
        leaked = secrets.find(value)
        if leaked:
            raise InvalidInputError(
                f"The output given for {target} carries the value of vault secret {leaked}, "
                f"which DBOS would save; read the secret inside the step instead."
            )
        plan.outputs[fid] = value
        plan.edited.append(f"{step}#{k}")
    return plan


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a run's SQLite database (its WAL included), as SQLite's backup,
    read through the record's one opener (which leaves the run's own files untouched)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open_database(source, live=False) as src:
        if src is None:
            raise FileNotFoundError(source)
        with contextlib.closing(sqlite3.connect(target)) as dst:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=WAL")
            dst.commit()


def hold_parent(parent: RunFolder, backend: Backend) -> Any:
    """The parent's run lock, held while it is copied (a live parent is refused)."""
    try:
        return take_run_lock(parent, backend)
    except RunLockedError as exc:
        raise ForkError(
            f"Cannot fork run {parent.run_id} while an attempt of it runs; wait for it to end "
            f"(relay runs {parent.relay}), then fork."
        ) from exc


def _edit_rows(conn: Any, plan: ForkPlan, fork: RunFolder, run_input: Any, pg: bool) -> None:
    """The edits, the fork's origin as DBOS attributes, and (on PostgreSQL) its application."""
    edit_fork_rows(
        conn, fork.run_id, pg=pg, outputs=plan.outputs,
        attributes={"relay_fork": plan.record()}, run_input=run_input,
        input_edited=plan.input_edited, app_name=app_name_for_run(fork.run_id) if pg else None,
    )  # fmt: skip


def prepare_fork(
    plan: ForkPlan,
    fork: RunFolder,
    *,
    app_version: str,
    run_input: Any,
    backend: Backend,
) -> None:
    """Make the fork's workflow (in its SQLite copy of the parent's database, or in the shared
    PostgreSQL one), apply the edits, record its origin as DBOS attributes, and put it on
    DBOS's internal queue."""
    from dbos import DBOSClient, SetWorkflowID

    pg = backend.is_postgres
    url = backend.dbos_url if pg else f"sqlite:///{fork.database.resolve()}"
    version = app_version_for_run(app_version, fork.run_id) if pg else app_version
    client = DBOSClient(system_database_url=url)
    try:
        with SetWorkflowID(fork.run_id):
            client.fork_workflow(
                plan.parent, plan.function_id, application_version=version,
                queue_name=HOLD_QUEUE,
            )  # fmt: skip
    finally:
        client.destroy()
    if pg:
        with connect(backend) as conn, conn.transaction():
            _edit_rows(conn, plan, fork, run_input, pg=True)
    else:
        with sqlite3.connect(fork.database) as conn:
            # the parent's row goes: the fork's child must never recover the parent (its
            # children and their rows stay, copied calls may read their results)
            delete_workflow_rows(conn, plan.parent)
            _edit_rows(conn, plan, fork, run_input, pg=False)
    client = DBOSClient(system_database_url=url)
    try:
        client.resume_workflow(fork.run_id)  # off the hold queue, onto DBOS's internal one
    finally:
        client.destroy()


def check_compatible(plan: ForkPlan, source: str, relay: str) -> None:
    """Refuse a fork onto code that no longer calls a copied step: its checkpoint would meet
    another call on replay (a first version of the replay check: names, from the AST)."""
    from relay_notebook.source.flow import build_flow_graph
    from relay_notebook.source.graph import call_key

    known = {key for node in build_flow_graph(source).nodes if (key := call_key(node))}
    for fid, name in plan.copied:
        if not name.startswith("DBOS.") and name not in known:
            raise ForkError(
                f"Cannot fork run {plan.parent} onto this code of {relay}: the copied call "
                f"{name} (function {fid}) is not called by it any more, so its checkpoint "
                f"would not replay. Fork from {name} or earlier, or keep the step."
            )


@dataclass(frozen=True)
class ForkRequest:
    """``relay fork RUN --from STEP#N`` as asked from any surface (the CLI, a magic, REST): a
    new run whose calls before ``from_call`` are copied checkpoints of RUN's, with ``sets``
    (``STEP#N`` → new output) edited, ``run_input`` as its input if ``input_given``, on RUN's
    code, a ``release`` or the current ``draft``. Its values are checked once, here (the input
    by ``create_run``, as any run's)."""

    from_call: str
    run_input: Any = None
    input_given: bool = False
    sets: Mapping[str, Any] = field(default_factory=dict)
    release: str | None = None
    draft: bool = False

    def __post_init__(self) -> None:
        if self.release is not None and not self.release.strip():
            raise InvalidInputError(
                "--release '' names no release; give vN, a hash prefix or latest"
            )
        for target, value in self.sets.items():
            try:
                check_run_input(value)
            except InvalidInputError as exc:
                raise InvalidInputError(f"The output given for {target}: {exc.message}") from None


def start_fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    crash: CrashSpec | None = None,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
) -> RunHandle:
    """``relay fork RUN --from STEP#N``: the fork ``request`` asks for; its first attempt
    starts at once (returns its ``RunHandle``)."""
    from relay_notebook.runner.runs import launch_first_attempt

    fork, record = _make_fork(workspace, run_id, request, backend=backend, queued=False)
    return launch_first_attempt(
        workspace, fork, record, crash=crash, on_event=on_event, backend=backend
    )


def create_fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    backend: Backend | None = None,
    queued: bool = False,
) -> RunFolder:
    """The fork of ``start_fork``, made and held in its database, with no attempt started:
    ``queued`` marks it for the workers' queue (``relay fork --queue``)."""
    fork, _ = _make_fork(workspace, run_id, request, backend=backend, queued=queued)
    return fork


def _make_fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    backend: Backend | None,
    queued: bool,
) -> tuple[RunFolder, RunRecord]:
    """The fork's folder and its record, as written."""
    from relay_notebook.runner.runs import record_new_run

    parent = find_run(workspace, run_id)
    record = RunRecord.load(parent)
    backend = backend_for_run(record, workspace_backend(workspace, backend))
    relay = record.relay
    current = workspace.load_draft(relay)
    release = request.release
    if release is None and not request.draft:
        if record.release:
            release = f"v{record.release['version']}"
        else:
            from relay_notebook.runner.runs import draft_hash

            if draft_hash(current) != record.app_version:
                raise ForkError(
                    f"Cannot fork run {run_id} onto its own code: the draft of {relay} changed "
                    f"since the run started. Fork onto the current draft with --draft (its "
                    f"calls are checked against the copied ones), or onto a release with "
                    f"--release REF."
                )
    lock = hold_parent(parent, backend)
    try:
        fork, made = record_new_run(
            workspace, current,
            run_input=request.run_input if request.input_given else record.input,
            release=release, backend=backend, queued=queued,
        )  # fmt: skip
        try:
            if not backend.is_postgres:
                copy_database(parent.database, fork.database)
            plan = plan_fork(
                workspace, parent, backend if backend.is_postgres else fork.database,
                request.from_call, sets=request.sets, input_edited=request.input_given,
            )  # fmt: skip
            same_code = made.app_version == record.app_version
            if not same_code:
                source = (Path(made.code_dir) / "relay.py").read_text(encoding="utf-8")
                check_compatible(plan, source, relay)
            origin = plan.record()
            origin["code"] = (
                "the parent's" if same_code else (f"release {release}" if release else "the draft")
            )
            made.fork = origin
            made.save(fork)
            prepare_fork(
                plan, fork, app_version=made.app_version, run_input=made.input, backend=backend,
            )  # fmt: skip
        except BaseException as exc:
            entry = exc.entry if isinstance(exc, RelayError) else codes.FORK_REFUSED
            made.status, made.error = "rejected", entry.record(str(exc))
            made.save(fork)
            raise
    finally:
        lock.release()
    return fork, made
