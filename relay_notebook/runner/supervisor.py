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
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relay_notebook.record.folders import RunFolder, write_json_atomic
from relay_notebook.record.ledger import EventWriter, now_ms
from relay_notebook.runner.backend import ENV_VAR, Backend, app_name_for_run
from relay_notebook.runner.confine import (
    TURNED_OFF,
    Confinement,
    WriteRules,
    attempt_write_rules,
    confine_command,
    landlock_confinement,
)
from relay_notebook.runner.crash import CRASH_EXIT_CODE, CrashSpec
from relay_notebook.runner.locks import RunLock, take_run_lock
from relay_notebook.runner.log_scrubber import AttemptLogs
from relay_notebook.runner.outcome import RunOutcome, settle_attempt
from relay_notebook.runner.warm import ForkedProcess, WarmParent, restart_warm_parent, warm_parent

__all__ = ["EventCallback", "RunHandle", "launch_attempt"]

CHILD_MODULE = "relay_notebook.runner.child"
EventCallback = Callable[[dict[str, Any]], None]
AttemptProcess = subprocess.Popen[bytes] | ForkedProcess


class RunHandle:
    """One attempt in progress. ``wait`` blocks; ``outcome`` is ``None`` until it ends."""

    def __init__(
        self,
        folder: RunFolder,
        attempt: int,
        *,
        process: AttemptProcess | None,
        on_event: EventCallback | None,
        finished: RunOutcome | None = None,
    ) -> None:
        self.folder = folder
        self.attempt = attempt
        self.process = process
        self._on_event = on_event
        self._done = threading.Event()
        self._outcome = finished
        self._deadline_hit = False
        self._callbacks: list[Callable[[RunOutcome], None]] = []
        self._callbacks_lock = threading.Lock()
        #: this attempt's child has ended (the handle may go on with the run's next attempt)
        self._ended = threading.Event()
        #: asked when the attempt ends ``waiting``: the next attempt, if its wait was answered
        #: while it left (the handle then follows that attempt to the run's end)
        self.continue_with: Callable[[], RunHandle | None] | None = None
        if finished is not None:
            self._done.set()
            self._ended.set()

    def add_done_callback(self, fn: Callable[[RunOutcome], None]) -> None:
        """Call ``fn(outcome)`` when the attempt ends (at once if it already has)."""
        with self._callbacks_lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        assert self._outcome is not None
        fn(self._outcome)

    @property
    def run_id(self) -> str:
        return self.folder.run_id

    @property
    def outcome(self) -> RunOutcome | None:
        return self._outcome if self._done.is_set() else None

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> RunOutcome:
        """Block until the attempt has ended; ``TimeoutError`` if ``timeout`` passes first."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} attempt {self.attempt} is still going")
        assert self._outcome is not None
        return self._outcome

    def _signal(self, sig: signal.Signals) -> None:
        # the child leads its own session; the group includes bwrap's inner process
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL the child at once (crash testing); the attempt ends ``interrupted``."""
        self._signal(signal.SIGKILL)

    def cancel(self, grace: float = 3.0) -> RunOutcome:
        """Stop the attempt: SIGINT, then SIGTERM, then SIGKILL, ``grace`` seconds apart."""
        if self.process is not None:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                if self.process.poll() is not None:
                    break
                self._signal(sig)
                try:
                    self.process.wait(grace)
                except subprocess.TimeoutExpired:
                    continue
        return self.wait()

    # -- the reader thread --------------------------------------------------------------------

    def _read(self, pipe_r: int | None, lock: RunLock, ctx: dict[str, Any]) -> None:
        try:
            report = (
                _read_report(ctx["report_fd"], ctx["mechanism"])
                if ctx.get("report_fd") is not None
                else None
            )
            if pipe_r is not None:
                self._forward(pipe_r)
            assert self.process is not None
            returncode = self.process.wait()
            _wait_for_group(self.process.pid)
            ctx["logs"].wait()  # the stderr tail is read from the complete, scrubbed log
            self._outcome = settle_attempt(
                self.folder,
                attempt=self.attempt,
                attempt_dir=Path(ctx["attempt_dir"]),
                returncode=returncode,
                crashed_on_purpose=returncode == CRASH_EXIT_CODE,
                deadline_hit=self._deadline_hit,
                on_event=self._on_event,
                confinement=report,
                backend=ctx["backend"],
            )
        finally:
            lock.release()
            if ctx.get("lifeline") is not None:
                os.close(ctx["lifeline"])
            self._ended.set()
            if not self._go_on():
                self._complete(self._outcome)

    def _go_on(self) -> bool:
        """After a ``waiting`` end: follow the next attempt if the wait was answered meanwhile."""
        if self._outcome is None or self._outcome.status != "waiting":
            return False
        if self.continue_with is None:
            return False
        try:
            nxt = self.continue_with()
        except Exception:
            return False
        if nxt is None:
            return False
        self.attempt, self.process = nxt.attempt, nxt.process
        nxt.add_done_callback(self._complete)
        return True

    def _complete(self, outcome: RunOutcome | None) -> None:
        with self._callbacks_lock:
            self._outcome = outcome
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            if outcome is not None:
                with contextlib.suppress(Exception):  # a view's bug must not hide the end
                    fn(outcome)

    def _forward(self, pipe_r: int) -> None:
        """Hand each live event from the child to ``on_event`` until the child closes the pipe."""
        with os.fdopen(pipe_r, "rb") as stream:
            for line in stream:
                if self._on_event is None:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                with contextlib.suppress(Exception):  # a view's bug must not stop the run
                    self._on_event(event)

    def _watch_deadline(self, deadline_ms: float) -> None:
        remaining = (deadline_ms - now_ms()) / 1000
        if self._ended.wait(max(remaining, 0)):
            return
        self._deadline_hit = True
        self.cancel(grace=2.0)


def _read_report(fd: int, mechanism: str) -> dict[str, Any]:
    """The child's confinement check, sent before the relay was imported (see runner.confine)."""
    # one line: bwrap keeps a copy of the pipe open, and only the child's first line counts
    with os.fdopen(fd, "rb") as stream:
        data = stream.readline(64 * 1024)
    try:
        report = json.loads(data)
    except ValueError:
        report = None
    if not isinstance(report, dict) or not isinstance(report.get("confined"), bool):
        why = "the child ended before reporting its confinement check"
        return {"confined": False, "mechanism": mechanism, "reason": why}
    return report


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies have let go of files)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the command: state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _wait_for_group(pgid: int, timeout: float = 10.0) -> None:
    """Wait until no process of the child's group is left running.

    Under bubblewrap the process we waited for is bwrap; the relay's interpreter dies just
    after it and holds the run lock until the kernel has torn it down. Settling (and any
    recovery) must not start before that, or the next attempt would find the run locked.
    A zombie has already closed its files, so it counts as gone.
    """
    deadline = time.monotonic() + timeout
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _warm_next(_: RunOutcome) -> None:
    restart_warm_parent()


def _spawn(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    logs: AttemptLogs,
    fds: tuple[int, ...],
    private: dict[str, Any],
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=logs.stdout,
        stderr=logs.stderr,
        pass_fds=fds,
        start_new_session=True,
        env=env,
    )
    # secrets (and the database password) travel through a pipe: never a file
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(private).encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # the child died at once; the reader thread reports it
    return process


def _fileno(stream: Any) -> int:
    return stream if isinstance(stream, int) else int(stream.fileno())


def _fork(
    parent: WarmParent,
    *,
    spec_path: Path,
    rules: WriteRules,
    env: dict[str, str],
    confined: bool,
    logs: AttemptLogs,
    fds: tuple[int, ...],
    private: dict[str, Any],
) -> ForkedProcess:
    """The attempt forked by the warm parent, with the same descriptors a spawned one gets."""
    request: dict[str, Any] = {
        "spec": str(spec_path), "cwd": str(rules.cwd), "env": env, "targets": list(fds),
        "confine": None,
    }  # fmt: skip
    if confined:
        request["env"] = {**env, "TMPDIR": str(rules.tmp_dir)}
        request["confine"] = {
            "writable": [str(p) for p in rules.writable],
            "hidden": [str(p) for p in rules.hidden],
            "abi": int(parent.info["landlock"]),
        }
    stdin_r, stdin_w = os.pipe()
    try:
        process = parent.fork(request, [stdin_r, _fileno(logs.stdout), _fileno(logs.stderr), *fds])
    finally:
        os.close(stdin_r)
    with contextlib.suppress(BrokenPipeError), os.fdopen(stdin_w, "wb") as stdin:
        stdin.write(json.dumps(private).encode())
    return process


def launch_attempt(
    folder: RunFolder,
    *,
    attempt: int | None,
    code_dir: Path,
    app_version: str,
    run_input: Any,
    crash: CrashSpec | None,
    deadline_ms: float,
    on_event: EventCallback | None,
    preflight: Callable[[], None] | None = None,
    hidden: tuple[Path, ...] = (),
    secrets: dict[str, str] | None = None,
    context: dict[str, Any] | None = None,
    backend: Backend | None = None,
    executor_id: str = "relay-local",
    lifeline: bool = False,
    confine: bool = True,
    warm_start: bool = True,
) -> RunHandle:
    """Lock the run, run ``preflight`` checks under the lock, then start the child.

    ``attempt=None`` numbers the attempt from run.json once the lock is held.

    ``lifeline`` ties the child to this process: it exits when the supervisor is gone (a
    worker that dies must not leave attempts running that nobody settles). ``confine=False``
    starts the child unconfined (the workspace's setting; the attempt records it).
    ``warm_start`` forks the child from this process's warm parent when one is ready (see
    ``runner.warm``), confined with Landlock; otherwise it is spawned, under bubblewrap.
    """
    backend = backend or Backend(None)
    lock = take_run_lock(folder, backend)
    life_r = life_w = report_r = report_w = None
    try:
        if preflight is not None:
            preflight()
        if attempt is None:  # numbered under the lock: two recoveries cannot both be attempt N
            attempt = len(folder.read_meta().get("attempts", [])) + 1
        attempt_id = uuid.uuid4().hex[:12]
        attempt_dir = folder.ipc / f"attempt-{attempt_id}"
        attempt_dir.mkdir(parents=True)
        rules = attempt_write_rules(folder, attempt_dir, hidden)
        parent = warm_parent() if warm_start else None
        if parent is not None and confine and not parent.can_confine():
            parent = None  # no Landlock or namespaces here: bubblewrap, spawned, as before
        if parent is not None:
            argv: list[str] = []
            confinement = (
                landlock_confinement(rules, int(parent.info["landlock"]))
                if confine
                else Confinement(None, TURNED_OFF)
            )
        else:
            argv, confinement = confine_command(
                [sys.executable, "-m", CHILD_MODULE, str(attempt_dir / "spec.json")],
                rules,
                enabled=confine,
            )
        # live events go through a pipe only when someone listens (it costs per step)
        pipe_r, pipe_w = os.pipe() if on_event is not None else (None, None)
        if lifeline:
            life_r, life_w = os.pipe()
        if confinement.check is not None:
            report_r, report_w = os.pipe()
        spec = {
            "run_id": folder.run_id,
            "relay": folder.relay,
            "attempt": attempt,
            "attempt_id": attempt_id,
            "code_dir": str(code_dir),
            "entry": "relay.py",
            "app_version": app_version,
            "input": run_input,
            "crash": crash.to_dict() if crash else None,
            "database": str(folder.database),
            "events_path": str(folder.events),
            "result_path": str(attempt_dir / "child" / "result.json"),
            "run_dir": str(folder.path),
            "outcome_path": str(attempt_dir / "child" / "outcome.json"),
            "pipe_fd": pipe_w,
            "lifeline_fd": life_r,
            "confinement": confinement.check,
            "report_fd": report_w,
            "database_kind": backend.kind,
            "app_name": app_name_for_run(folder.run_id),
            "executor_id": executor_id,
            **(context or {}),
        }
        write_json_atomic(attempt_dir / "spec.json", spec)
        meta = folder.read_meta()
        meta["status"] = "running"
        meta["waiting"] = None
        meta.setdefault("attempts", []).append(
            {
                "attempt": attempt,
                "id": attempt_id,
                "started_at": now_ms(),
                "crash": spec["crash"],
                "host": socket.gethostname(),
                "executor_id": executor_id,
                **confinement.record(),
            }
        )
        folder.write_meta(meta)
        child_fds = tuple(fd for fd in (pipe_w, life_r, report_w) if fd is not None)
        logs = AttemptLogs(attempt_dir, secrets)  # scrubbed of vault values: see log_scrubber
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        env["PYTHONUNBUFFERED"] = "1"
        private = {"vault": secrets or {}, "database_url": backend.url}
        try:
            process: AttemptProcess | None = None
            if parent is not None:
                with contextlib.suppress(OSError):  # it died since it was checked: spawn
                    process = _fork(
                        parent, spec_path=attempt_dir / "spec.json", rules=rules, env=env,
                        confined=confinement.mechanism is not None, logs=logs,
                        fds=lock.pass_fds + child_fds, private=private,
                    )  # fmt: skip
                if process is None:
                    parent = None
                    argv, confinement = confine_command(
                        [sys.executable, "-m", CHILD_MODULE, str(attempt_dir / "spec.json")],
                        rules,
                        enabled=confine,
                    )
                    spec["confinement"] = confinement.check
                    write_json_atomic(attempt_dir / "spec.json", spec)
                    meta["attempts"][-1].update(confinement.record())
                    folder.write_meta(meta)
            if process is None:
                process = _spawn(argv, rules.cwd, env, logs, lock.pass_fds + child_fds, private)
        finally:
            logs.started()
            for fd in child_fds:
                os.close(fd)
    except BaseException:
        lock.release()
        for end in (life_w, report_r):
            if end is not None:
                os.close(end)
        raise
    meta["attempts"][-1]["pid"] = process.pid
    folder.write_meta(meta)
    handle = RunHandle(folder, attempt, process=process, on_event=on_event)
    if warm_start and parent is None:  # spawned: warm the next attempt, after this one
        handle.add_done_callback(_warm_next)
    ctx: dict[str, Any] = {
        "attempt_dir": str(attempt_dir), "lifeline": life_w, "report_fd": report_r,
    }  # fmt: skip
    ctx["logs"] = logs
    ctx["mechanism"] = confinement.mechanism
    ctx["backend"] = backend  # settling reads the run's checkpoints with its password
    threading.Thread(
        target=handle._read, args=(pipe_r, lock, ctx), name=f"relay-{folder.run_id}", daemon=True
    ).start()
    threading.Thread(
        target=handle._watch_deadline, args=(deadline_ms,), name="relay-deadline", daemon=True
    ).start()
    return handle


def record_event(folder: RunFolder, attempt: int, kind: str, **fields: Any) -> dict[str, Any]:
    """Append one supervisor event to the run's ledger (safe while the child appends too)."""
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=attempt)
    try:
        return writer.emit(kind, **fields)
    finally:
        writer.close()
