"""Warm start, supervisor side: this process's warm parent, and the attempts it forks.

Design note: one warm parent per process that supervises runs (a kernel, a server, a worker; see
``runner.warm_parent``; spawned by ``runner.warm_launch``, adopted here). It is started in the
background after an attempt was spawned, never before one, so the first run after start costs
what it always did; from then on, attempts are forked. A parent that died, or whose kit files or
interpreter changed on disk since it was started (their size and modification time, taken before
it imported them), is not used: the attempt is spawned and a new parent started after it. A
process that runs one attempt (``relay run``, ``relay recover``, ``relay fork``) cannot warm a
later one, so it starts its parent first, before its own imports, and its attempt waits for that
parent to be ready instead of spawning (``start_awaited_warm_parent``): the parent's imports
overlap the CLI's start-up and checks, on another core, and a spawned child would pay them again
anyway.

The forked child is the warm parent's child, not ours, so ``ForkedProcess`` gets its pid
and then its exit status (code or signal, as ``Popen.returncode``) from the warm parent on a
socket of its own; the supervisor still signals the child's process group and watches its
lifeline and pipes as before. If the warm parent dies mid-attempt, the child's end is taken
from its pidfd and recorded as a kill.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay_notebook.runner.warm_launch import (
    ENV_WARM_START,
    FRAMEWORK_MODULES,
    Launched,
    kit_files,
    launch,
    stamps_differ,
)

__all__ = [
    "ENV_WARM_START",
    "ForkedProcess",
    "WarmParent",
    "WarmStatus",
    "frameworks_to_preload",
    "kit_files",
    "let_go_warm_parent",
    "start_awaited_warm_parent",
    "warm_parent",
    "warm_status",
    "why_no_warm_parent",
]

#: a line of Python importing one of ``FRAMEWORK_MODULES`` (a cheap look, not an analysis: a
#: false match only preloads a module the relay did not need)
_IMPORTS = re.compile(
    rb"^[ \t]*(?:from|import)[ \t]+(" + b"|".join(n.encode() for n in FRAMEWORK_MODULES) + rb")\b",
    re.MULTILINE,
)
#: a relay file larger than this is not looked at (its attempt imports what it needs itself)
_LOOK_LIMIT = 1 << 20

#: how long an attempt waits for an awaited parent that is still importing (it returns at once
#: if the parent dies); a spawned child would take as long to import the same modules
AWAIT_READY_S = 60.0
#: how long a parent that closed its control socket unready is given to exit and be reaped
_EXIT_WAIT_S = 5.0


class _Spawned:
    """The warm parent's process (``os.posix_spawn``), with ``Popen``'s waiting interface."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        if self.returncode is None and self._lock.acquire(blocking=False):
            try:
                self._reap(os.WNOHANG)
            finally:
                self._lock.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"warm parent {self.pid}", timeout or 0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped by someone else (a subreaper's loop): gone
            self.returncode = 0
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)


class ForkedProcess:
    """An attempt forked by the warm parent, with ``subprocess.Popen``'s waiting interface."""

    def __init__(self, status: socket.socket, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        #: CPU seconds of the attempt's processes (known once it ended, from the warm parent)
        self.cpu: float | None = None
        self._status = status
        self._lock = threading.Lock()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            self._pidfd = None  # it is already gone: its status is on the socket

    def poll(self) -> int | None:
        return self._wait(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"attempt process {self.pid}", timeout or 0)
        return code

    def _wait(self, timeout: float | None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        got = (
            self._lock.acquire(blocking=False)
            if timeout == 0
            else self._lock.acquire(timeout=-1 if timeout is None else timeout)
        )
        if not got:
            return self.returncode
        try:
            if self.returncode is not None:
                return self.returncode
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            ready, _, _ = select.select([self._status], [], [], left)
            if not ready:
                return None
            data = self._status.recv(4096)
            if data:
                end = json.loads(data)
                self.returncode = int(end["returncode"])
                self.cpu = float(end["cpu"])
            else:
                self.returncode = self._lost()
            self._status.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
            return self.returncode
        finally:
            self._lock.release()

    def _lost(self) -> int:
        """The warm parent died first: wait for the child itself, and call its end a kill."""
        if self._pidfd is not None:
            select.select([self._pidfd], [], [])
        return -signal.SIGKILL


@dataclass(frozen=True)
class WarmStatus:
    """What ``relay doctor`` says about warm start in this process."""

    state: str  # "ready", "starting", "off", "stale", "dead", "not started"
    pid: int | None
    landlock: int
    namespaces: bool
    reason: str | None
    ready_s: float | None = None  # how long it took to be able to fork
    returncode: int | None = None  # its exit status, if it is dead


class WarmParent:
    """This process's fork server: started, probed, and asked for one child per attempt."""

    def __init__(self, *, awaited: bool = False, launched: Launched | None = None) -> None:
        """Start a warm parent, or adopt the one ``launched`` (``warm_launch``) started."""
        launched = launched or launch(one_attempt=awaited)
        self._files = launched.files
        self._stamps = launched.stamps
        self._control = socket.socket(fileno=launched.control.detach())
        self.process = _Spawned(launched.pid)
        self._send_lock = threading.Lock()
        self.info: dict[str, Any] = {}
        #: the next attempt waits for this parent rather than spawning while it imports
        self.awaited = awaited
        #: attempts forked so far
        self.forked = 0
        self._ready = threading.Event()
        self._answered = threading.Event()  # ready, or gone before it could say so
        self._started = launched.started
        #: seconds from its start until it could fork
        self.ready_s: float | None = None
        threading.Thread(target=self._await_ready, name="relay-warm-parent", daemon=True).start()

    def _await_ready(self) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):
                data = self._control.recv(4096)
                if data:
                    self.info = json.loads(data)
                    self.ready_s = time.monotonic() - self._started
                    self._ready.set()
            if not self._ready.is_set():
                # it closed its control socket unready: it is exiting; let its exit status be
                # known before anyone hears it is gone (the socket closes before it is reaped)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(_EXIT_WAIT_S)
        finally:
            self._answered.set()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the parent can fork (``True``), or died, or ``timeout`` passed."""
        self._answered.wait(timeout)
        return self._ready.is_set()

    @property
    def pid(self) -> int:
        return self.process.pid

    def state(self) -> str:
        gone_unready = self._answered.is_set() and not self._ready.is_set()
        if gone_unready or self.process.poll() is not None:
            return "dead"  # exited, or closed its control socket unready: it cannot fork
        if not self._ready.is_set():
            return "starting"
        if stamps_differ(self._files, self._stamps):
            return "stale"
        return "ready"

    def can_confine(self) -> bool:
        return int(self.info.get("landlock", 0)) >= 1 and bool(self.info.get("namespaces"))

    def fork(self, request: dict[str, Any], fds: list[int]) -> ForkedProcess:
        """Fork one attempt; ``fds`` are stdin, stdout, stderr, then ``request["targets"]``."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._send_lock:
                socket.send_fds(
                    self._control, [json.dumps(request).encode()], [theirs.fileno(), *fds]
                )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ready, _, _ = select.select([ours], [], [], 30)
        data = ours.recv(4096) if ready else b""
        if not data:
            ours.close()
            raise OSError("the warm parent did not fork the attempt")
        self.forked += 1
        return ForkedProcess(ours, int(json.loads(data)["pid"]))

    def close(self) -> None:
        """Let the parent go: it leaves once the attempts it forked have ended."""
        with contextlib.suppress(OSError):
            self._control.close()

    def kill(self) -> None:
        """End a parent that forked nothing at once (its process group: it leads one)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.close()


_parent: WarmParent | None = None
_parent_pid = 0  # the process that started it (a forked supervisor must start its own)
_lock = threading.Lock()


def _own_parent() -> WarmParent | None:
    """The warm parent this process started (a forked supervisor's is not its own)."""
    with _lock:
        return _parent if _parent_pid == os.getpid() else None


def warm_parent() -> WarmParent | None:
    """This process's warm parent if it is ready and current, else ``None``.

    An awaited parent that is still importing is waited for (``start_awaited_warm_parent``).
    """
    parent = _own_parent()
    if parent is None:
        return None
    if parent.awaited and parent.state() == "starting":
        parent.wait_ready(AWAIT_READY_S)
    if parent.state() != "ready":
        return None
    return parent


#: why ``warm_parent`` gave ``None``, by the parent's state (an attempt's record says it)
_NOT_FORKED = {
    "starting": "its warm parent was still importing",
    "stale": "its warm parent was stale: the kit's code changed after it started",
    "dead": "its warm parent had exited",
}


def why_no_warm_parent() -> str:
    """Why ``warm_parent`` gave ``None`` just now, in words for an attempt's record."""
    parent = _own_parent()
    if parent is None:
        return "this process had no warm parent yet (its first attempt starts one)"
    state = parent.state()
    return _NOT_FORKED.get(state, f"its warm parent was {state}")


def restart_warm_parent() -> WarmParent:
    """Start a new warm parent in the background (the old one, if any, is let go).

    A one-attempt process's parent (``start_awaited_warm_parent``) is kept, even dead: that
    process forks no later attempt for a new one to serve.
    """
    global _parent, _parent_pid
    with _lock:
        if _parent is not None and _parent_pid == os.getpid():
            if _parent.awaited or _parent.state() in ("ready", "starting"):
                return _parent
            _parent.close()
        _parent, _parent_pid = WarmParent(), os.getpid()
        return _parent


def start_awaited_warm_parent(launched: Launched | None = None) -> WarmParent | None:
    """Start the warm parent of a process that runs one attempt, which will wait for it.

    For ``relay run`` and the like: started as early as it can be (``launched``: by
    ``warm_launch`` before the CLI's imports), so the parent imports while the process starts
    up; ``let_go_warm_parent`` once the attempt is over. ``None`` if this process has a live
    warm parent already (it is used as it is, and ``launched`` is ended).
    """
    global _parent, _parent_pid
    with _lock:
        if _parent is not None and _parent_pid == os.getpid():
            if _parent.state() in ("ready", "starting"):
                if launched is not None:
                    WarmParent(launched=launched).kill()
                return None
            _parent.close()
        _parent, _parent_pid = WarmParent(awaited=True, launched=launched), os.getpid()
        return _parent


def let_go_warm_parent(parent: WarmParent) -> None:
    """``parent`` will fork no more attempts: ended at once if it forked none (it may still be
    importing), else let go (it leaves once they have ended)."""
    global _parent
    with _lock:
        if _parent is parent:
            _parent = None
    if parent.forked:
        parent.close()
    else:
        parent.kill()


def warm_status(enabled: bool) -> WarmStatus:
    """The state of this process's warm parent, for ``relay doctor``."""
    from relay_notebook.runner.landlock import abi_version

    if not enabled:
        reason = "turned off by the warm_start setting (RELAY_WARM_START=0)"
        return WarmStatus("off", None, abi_version(), False, reason)
    parent = _own_parent()
    if parent is None:
        return WarmStatus("not started", None, abi_version(), False, None)
    if parent.awaited and parent.state() == "starting":
        parent.wait_ready(AWAIT_READY_S)  # as a run would: report what it would get
    state = parent.state()
    return WarmStatus(
        state,
        parent.pid,
        int(parent.info.get("landlock", abi_version())),
        bool(parent.info.get("namespaces")),
        parent.info.get("namespaces_error"),
        parent.ready_s,
        parent.process.poll(),
    )


def frameworks_to_preload(code_dir: Path) -> list[str]:
    """The modules of ``FRAMEWORK_MODULES`` the relay in ``code_dir`` imports, for its warm
    parent to import before forking its attempt (``runner.warm_parent``)."""
    wanted: list[str] = []
    with contextlib.suppress(OSError):
        for path in sorted(code_dir.glob("*.py")):
            if path.stat().st_size > _LOOK_LIMIT:
                continue
            for match in _IMPORTS.finditer(path.read_bytes()):
                for name in FRAMEWORK_MODULES[match.group(1).decode()]:
                    if name not in wanted:
                        wanted.append(name)
    return wanted
