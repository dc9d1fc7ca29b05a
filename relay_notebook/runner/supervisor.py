"""The supervisor: starts one child process per attempt and turns its end into an outcome.

Design note: the supervisor runs in the kernel (or the ``relay`` CLI) and never imports DBOS or
the relay. Before each attempt it takes the run's file lock, checks the attempt budget, the
deadline, the release checksum, the bindings and that no checkpoint was lost, then starts the
child (confined: see ``runner.confine``) with the locked file descriptor, a pipe for live
events and a one-shot pipe for the child's confinement report. The lock is shared with the
child, so a second executor is refused while either is alive, and the kernel releases it when
both are gone, even after SIGKILL. A reader thread forwards events as they arrive and, at end
of file, settles the attempt: it reads the child's outcome file, or, if there is none, records
the attempt as ``interrupted`` with its exit code or signal. What the supervisor trusts
(run.json, the spec, the lock) lies outside everything the child may write. Nothing here
blocks the caller's thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from relay_notebook.errors import DiskFullError
from relay_notebook.errors.storage import is_disk_full
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import EventWriter, now_ms
from relay_notebook.record.ledger_events import Event, EventFields, EventKind
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import lend_session
from relay_notebook.runner.backend import ENV_VAR, app_name_for_run
from relay_notebook.runner.confine import (
    TURNED_OFF,
    Confinement,
    WriteRules,
    attempt_write_rules,
    confine_command,
    landlock_confinement,
)
from relay_notebook.runner.copied_calls import mark_copied
from relay_notebook.runner.disk_full import record_start_disk_full, release_space, reserve_space
from relay_notebook.runner.fault_points import fault_point, stop_point
from relay_notebook.runner.handle import AttemptEnds, AttemptProcess, EventCallback, RunHandle
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.runner.log_scrubber import AttemptLogs
from relay_notebook.runner.outcome import RunOutcome
from relay_notebook.runner.sandbox import PASTA_MODES
from relay_notebook.runner.sandbox_plan import attempt_plan, hand_over, sandbox_probe
from relay_notebook.runner.spec import AttemptSpec
from relay_notebook.runner.warm import (
    ForkedProcess,
    WarmParent,
    frameworks_to_preload,
    restart_warm_parent,
    warm_parent,
    why_no_warm_parent,
)
from relay_notebook.workspace.file_io import require_free_space

if TYPE_CHECKING:
    from relay_notebook.runner.attempt_request import AttemptRequest

__all__ = ["EventCallback", "RunHandle", "launch_attempt"]

CHILD_MODULE = "relay_notebook.runner.child"
SANDBOX_MODULE = "relay_notebook.runner.sandbox_exec"


def _warm_next(_: RunOutcome) -> None:
    restart_warm_parent()


@dataclass(frozen=True)
class _ChildStart:
    """What a child gets however it starts (spawned or forked): its environment, its logs, the
    descriptors it inherits and what travels on its stdin (secrets, the database password)."""

    env: dict[str, str]
    logs: AttemptLogs
    fds: tuple[int, ...]
    private: dict[str, Any]


def _spawn(argv: list[str], cwd: Path, start: _ChildStart) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=start.logs.stdout,
        stderr=start.logs.stderr,
        pass_fds=start.fds,
        start_new_session=True,
        env=start.env,
    )
    # secrets (and the database password) travel through a pipe: never a file
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(start.private).encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # the child died at once; the reader thread reports it
    return process


def _spawned(
    rules: WriteRules, attempt_dir: Path, confine: bool, plan_for: Callable[[], dict[str, Any]]
) -> tuple[list[str], Confinement, dict[str, Any] | None]:
    """How a spawned child starts: in the sandbox (``runner.sandbox_exec``) where this machine
    can make one, else under bubblewrap, else unconfined (see ``runner.confine``); and the
    sandbox's plan, if it is one."""
    spec = str(attempt_dir / "spec.json")
    probe = sandbox_probe() if confine else None
    if probe is not None and probe.get("namespaces"):
        plan = {**plan_for(), "abi": int(probe.get("landlock", 0))}
        path = attempt_dir / "sandbox.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        check = {**rules.check(), "mechanism": "sandbox", "abi": plan["abi"]}
        # -P: not the working folder first on sys.path. It is the run's execution/, which the
        # relay writes, and this process imports the kit as root before the sandbox exists
        argv = [sys.executable, "-P", "-m", SANDBOX_MODULE, str(path), spec]
        return argv, Confinement("sandbox", check=check), plan
    if confine:
        hand_over(rules, os.geteuid())  # a sandboxed attempt before may have owned them
    argv, confinement = confine_command(
        [sys.executable, "-m", CHILD_MODULE, spec], rules, enabled=confine
    )
    return argv, confinement, None


def _net_ready_fd(plan: dict[str, Any] | None) -> int | None:
    """The descriptor a sandboxed child waits on for its way out (none without pasta)."""
    if plan is None or plan["network"]["mode"] not in PASTA_MODES:
        return None
    return int(plan["net_fd"])


def _fileno(stream: Any) -> int:
    return stream if isinstance(stream, int) else int(stream.fileno())


def _fork(
    parent: WarmParent,
    spec_path: Path,
    rules: WriteRules,
    start: _ChildStart,
    *,
    confined: bool,
    plan: dict[str, Any] | None,
    preload: list[str],
) -> ForkedProcess:
    """The attempt forked by the warm parent, with the same descriptors a spawned one gets;
    ``preload``: the agent frameworks the parent imports first (``frameworks_to_preload``)."""
    request: dict[str, Any] = {
        "spec": str(spec_path), "cwd": str(rules.cwd), "env": start.env,
        "targets": list(start.fds), "confine": None, "preload": preload,
    }  # fmt: skip
    if confined:  # (env carries its TMPDIR: see launch_attempt)
        request["confine"] = {
            "writable": [str(p) for p in rules.writable],
            "abi": int(parent.info["landlock"]),
            "plan": plan,
        }
        # its leader opens the run's PostgreSQL sessions before the sandbox's network (see
        # runner.dbos_engines); the request is never written anywhere
        if start.private.get("database_url"):
            request["database_url"] = start.private["database_url"]
    stdin_r, stdin_w = os.pipe()
    logs = start.logs
    try:
        process = parent.fork(
            request, [stdin_r, _fileno(logs.stdout), _fileno(logs.stderr), *start.fds]
        )
    finally:
        os.close(stdin_r)
    with contextlib.suppress(BrokenPipeError), os.fdopen(stdin_w, "wb") as stdin:
        stdin.write(json.dumps(start.private).encode())
    return process


def launch_attempt(
    request: AttemptRequest, preflight: Callable[[], RunRecord] | None = None
) -> RunHandle:
    """Lock the run, run ``preflight`` checks under the lock, then start the child.

    ``preflight`` reads the run again under the lock and returns it; without one (a new run's
    first attempt) the run is read under the lock as it is. Either way the attempt is numbered
    and recorded in the record read under the lock, so two attempts cannot both be attempt N:
    a new run is visible to ``relay recover`` as soon as its folder exists.

    ``request.lifeline`` ties the child to this process: it exits when the supervisor is gone
    (a worker that dies must not leave attempts running that nobody settles).
    ``request.confine=False`` starts the child unconfined (the workspace's setting; the attempt
    records it). ``request.warm_start`` forks the child from this process's warm parent when
    one is ready (see ``runner.warm``), confined with Landlock; otherwise it is spawned, under
    bubblewrap.
    """
    folder, backend, confine = request.folder, request.backend, request.confine
    lock = take_run_lock(folder, backend)
    life_r = life_w = report_r = report_w = None
    attempt_dir: Path | None = None
    record: RunRecord | None = None
    attempt = 0
    try:
        with lend_session(backend, lock.session):  # its reads share the lock's session
            record = preflight() if preflight is not None else RunRecord.load(folder)
        attempt = record.attempts_used + 1
        # refused before an attempt is used, rather than stopped half way
        require_free_space(folder.path, f"attempt {attempt} of run {folder.run_id}")
        fault_point("attempt:checked")
        attempt_id = uuid.uuid4().hex[:12]
        attempt_dir = folder.ipc / f"attempt-{attempt_id}"
        attempt_dir.mkdir(parents=True)
        # room to record its end if the disk fills meanwhile (a new run's reserve, moved)
        reserve_space(attempt_dir, take_from=folder.ipc)
        rules = attempt_write_rules(folder, attempt_dir, request.hidden)
        parent = warm_parent() if request.warm_start else None
        # why an attempt that could have been forked was spawned (its record says so)
        spawned_because = why_no_warm_parent() if request.warm_start and parent is None else None
        if parent is not None and confine and not parent.can_confine():
            parent = None  # no Landlock or namespaces here: bubblewrap, spawned, as before
            spawned_because = "its warm parent cannot confine here (no Landlock or namespaces)"
        # live events go through a pipe only when someone listens (it costs per step)
        pipe_r, pipe_w = os.pipe() if request.on_event is not None else (None, None)
        if request.lifeline:
            life_r, life_w = os.pipe()
        if confine:
            report_r, report_w = os.pipe()
        inherited = [fd for fd in (*lock.pass_fds, pipe_w, life_r, report_w) if fd is not None]
        net_fd = max([2, *inherited]) + 1  # where the sandbox's network word comes (the spec)
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        env["PYTHONUNBUFFERED"] = "1"
        if confine:  # a confined child's own tmp (a sandbox's /tmp is a tmpfs of its own)
            env["TMPDIR"] = str(rules.tmp_dir)

        def plan_for() -> dict[str, Any]:
            return attempt_plan(
                request, rules, staging=attempt_dir / "root", environ=env, net_fd=net_fd
            )

        plan: dict[str, Any] | None = None
        if parent is not None:
            plan = plan_for() if confine else None
            argv: list[str] = []
            confinement = (
                landlock_confinement(rules, int(parent.info["landlock"]))
                if confine
                else Confinement(None, TURNED_OFF)
            )
        else:
            argv, confinement, plan = _spawned(rules, attempt_dir, confine, plan_for)
        if confinement.check is None and report_r is not None and report_w is not None:
            os.close(report_r)
            os.close(report_w)
            report_r = report_w = None
        spec = AttemptSpec(
            run_id=folder.run_id,
            relay=folder.relay,
            attempt=attempt,
            attempt_id=attempt_id,
            code_dir=request.code_dir,
            app_version=request.app_version,
            input=request.run_input,
            crash=request.crash,
            database=folder.database,
            events_path=folder.events,
            result_path=attempt_dir / "child" / "result.json",
            outcome_path=attempt_dir / "child" / "outcome.json",
            run_dir=folder.path,
            database_kind=backend.kind,
            app_name=app_name_for_run(folder.run_id),
            executor_id=request.executor_id,
            pipe_fd=pipe_w,
            lifeline_fd=life_r,
            report_fd=report_w,
            net_ready_fd=_net_ready_fd(plan),
            confinement=confinement.check,
            context=request.context,
            stop_at=stop_point(),
        )
        spec.write(attempt_dir / "spec.json")
        entry = record.begin_attempt(
            attempt,
            id=attempt_id,
            started_at=now_ms(),
            crash=request.crash.to_dict() if request.crash else None,
            host=socket.gethostname(),
            executor_id=request.executor_id,
            start={"how": "spawned" if parent is None else "forked", "why": spawned_because},
            **confinement.record(),
        )
        record.save(folder)
        fault_point("attempt:recorded")
        child_fds = tuple(fd for fd in (pipe_w, life_r, report_w) if fd is not None)
        secrets = dict(request.secrets)
        logs = AttemptLogs(attempt_dir, secrets)  # scrubbed of vault values: see log_scrubber
        start = _ChildStart(
            env, logs, lock.pass_fds + child_fds, {"vault": secrets, "database_url": backend.url}
        )
        try:
            process: AttemptProcess | None = None
            if parent is not None:
                try:
                    process = _fork(
                        parent, attempt_dir / "spec.json", rules, start,
                        confined=confinement.mechanism is not None, plan=plan,
                        preload=frameworks_to_preload(request.code_dir),
                    )  # fmt: skip
                except OSError as exc:  # it died since it was checked: spawn
                    spawned_because = f"its warm parent did not fork it ({exc})"
                if process is None:
                    parent = None
                    argv, confinement, plan = _spawned(rules, attempt_dir, confine, plan_for)
                    spec = spec.with_confinement(confinement.check, _net_ready_fd(plan))
                    spec.write(attempt_dir / "spec.json")
                    entry.update(
                        start={"how": "spawned", "why": spawned_because}, **confinement.record()
                    )
                    record.save(folder)
            if process is None:
                process = _spawn(argv, rules.cwd, start)
        finally:
            logs.started()
            for fd in child_fds:
                os.close(fd)
    except BaseException as exc:
        stopped = None  # a full disk: the run is recorded interrupted, under the lock
        if record is not None and (isinstance(exc, DiskFullError) or is_disk_full(exc)):
            with contextlib.suppress(Exception):
                stopped = record_start_disk_full(folder, record, attempt, attempt_dir)
        if attempt_dir is not None:
            release_space(attempt_dir)
        release_space(folder.ipc)
        lock.release()
        for end in (life_w, report_r):
            if end is not None:
                os.close(end)
        if stopped is not None:
            raise stopped from exc
        raise
    entry.update(pid=process.pid)
    try:
        record.save(folder)
    except OSError as exc:  # a full disk: the child runs, and its end is recorded as it ends
        if not is_disk_full(exc):
            raise
    on_event = mark_copied(folder.run_id, record.fork, request.on_event)
    handle = RunHandle(folder, attempt, process=process, on_event=on_event)
    if request.warm_start and parent is None:  # spawned: warm the next attempt, after this one
        handle.add_done_callback(_warm_next)
    ends = AttemptEnds(
        attempt_dir, logs, record, backend, secrets, lifeline=life_w, report_fd=report_r,
        mechanism=confinement.mechanism,
    )  # fmt: skip
    threading.Thread(
        target=handle._read, args=(pipe_r, lock, ends), name=f"relay-{folder.run_id}", daemon=True
    ).start()
    deadline_ms = record.deadline_at(now_ms())  # moved on by the time the run waited
    threading.Thread(
        target=handle._watch_deadline, args=(deadline_ms,), name="relay-deadline", daemon=True
    ).start()
    return handle


def record_event(
    folder: RunFolder, attempt: int, kind: EventKind, **fields: Unpack[EventFields]
) -> Event:
    """Append one supervisor event to the run's ledger (safe while the child appends too)."""
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=attempt)
    try:
        return writer.emit(kind, **fields)
    finally:
        writer.close()
