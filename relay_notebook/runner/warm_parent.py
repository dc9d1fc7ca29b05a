"""The warm parent: a process that has imported what a child needs and forks one per attempt.

Design note: spawning a child costs a Python start and the imports of DBOS and SQLAlchemy, on every
attempt. The warm parent pays them once: started by the supervisor (``runner.warm``), it imports
the child's modules, never a relay, holds no thread, database connection or relay file when it
forks, and then forks on request. It launches DBOS only to rehearse on it (``runner.dbos_engines``:
on a scratch SQLite file before it is ready; on a PostgreSQL database a worker sent as it started,
before it is ready, or once idle after its first attempt on one), and a rehearsal that leaves a
thread of DBOS's running means it forks no more. A request comes on its control socket with the
descriptors the child needs (``socket.send_fds``: the attempt's status socket, stdin, stdout,
stderr, the run lock, the events pipe, the lifeline, the confinement report); the child puts them
at the numbers the spec names, closes everything else (the control socket first: relay code can
never ask for a fork) and runs the same ``child.main`` as a spawned child. The forked child is the
warm parent's own, so the warm parent reports its pid (once the child leads its own process group,
``setsid``, so a kill sent at once reaches it) and then its exit status on the attempt's socket;
the supervisor signals that group, exactly as before.

Confined (``request["confine"]``), the attempt enters the sandbox its plan describes
(``runner.sandbox``): the group leader, which later exits with the relay's exact status; the
namespace's init, which reaps; and the relay's process, which drops every capability, sets
no-new-privs and restricts its writes with Landlock (``runner.landlock``) before
``child.main`` reads the spec.
Run as ``python -m relay_notebook.runner.warm_parent FD [--one-attempt]``.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import json
import os
import random
import select
import signal
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from relay_notebook.runner.dbos_engines import (
    connect_ahead,
    rehearse,
    rehearse_postgres,
    tried_postgres,
)
from relay_notebook.runner.dbos_private import PRELOAD_MODULES, PRELOAD_POSTGRES
from relay_notebook.runner.locks import give_lock_session
from relay_notebook.runner.sandbox import FAILED, PASTA_MODES, enter_sandbox, name_process
from relay_notebook.runner.sandbox import close_from as _close_from
from relay_notebook.runner.sandbox_net import OUTSIDE, Spare, make_spare
from relay_notebook.runner.warm_launch import FRAMEWORK_MODULES
from relay_notebook.runner.warm_sessions import Lease, WarmSessions

__all__ = ["main"]

_PRELOAD = (
    "dbos",
    *PRELOAD_MODULES,
    "sqlalchemy",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql.psycopg",
    "sqlite3",
    "yaml",
    # not agentworks.mcp, .agent, .tools, .vault: a loaded submodule would shadow the call of
    # the same name that ``from agentworks import mcp`` must find (agentworks loads it lazily)
    "agentworks",
    "agentworks.platform",
    "relay_notebook.runner.child",
    "relay_notebook.runner.child_runtime",
    "relay_notebook.runner.instrument",
    "relay_notebook.runner.guards",
    "relay_notebook.runner.confine",
    "relay_notebook.runner.backend",
    "relay_notebook.runner.locks",
    "relay_notebook.runner.landlock",
    "relay_notebook.runner.sandbox",
    "relay_notebook.runner.sandbox_net",
    "relay_notebook.runner.namespaces",
    "relay_notebook.runner.dbos_template",
    "relay_notebook.runner.queues",
    "relay_notebook.record.store",
    "relay_notebook.record.dbos_tables",
)
#: what only some attempts need (a release run's calls verify its files, bringing pydantic; a
#: PostgreSQL run's DBOS):
#: preloaded by a parent that forks many attempts, left to the child by a one-attempt parent,
#: whose imports are on the ``relay run``'s critical path
_PRELOAD_MANY = ("relay_notebook.workspace.releases", *PRELOAD_POSTGRES)
_FRAMEWORKS = frozenset(n for names in FRAMEWORK_MODULES.values() for n in names)
_FAILED = FAILED  # the forked child could not set itself up (its stderr says why)
_REQUEST_LIMIT = 1 << 20
#: networks kept for their relay's next attempt at most (each is pasta, its helper and the
#: namespace's keeper, idle): a worker's concurrency of one relay's runs, or a few relays'
KEPT_NETWORKS = 4
#: spare networks at most: the outside's, and a few other networks plans named (a PostgreSQL
#: run's server, a relay's declared endpoints)
SPARE_NETWORKS = 3


def _preload(*, one_attempt: bool = False) -> None:
    # as child.main does: jsonschema's optional IRI grammar costs 1.5 s and no relay needs it
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import importlib

    for name in _PRELOAD if one_attempt else _PRELOAD + _PRELOAD_MANY:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(ImportError, OSError):
        from relay_notebook.runner.dbos_template import expected_schema, trust_template

        # the template's path hashed and the template checked once here, for every child
        # (a one-attempt parent too: its child would otherwise check it on the run's path)
        if not trust_template() and not one_attempt:
            expected_schema()  # none yet: what one must hold, for the many children to check
    if not one_attempt:  # SQLAlchemy's URL patterns, compiled once for a worker's children
        with contextlib.suppress(ImportError):
            from sqlalchemy.engine import make_url

            make_url("postgresql+psycopg://relay@localhost/relay")


def _preload_frameworks(names: Iterable[str]) -> None:
    """Import the agent frameworks an attempt's relay imports (``runner.warm``'s
    ``frameworks_to_preload``), once: that attempt and every later one forks with them loaded.
    Only ``FRAMEWORK_MODULES`` are taken, whatever the request names; one that fails to import
    is left to the attempt, which reports it as the relay's error."""
    import importlib

    fresh = [n for n in names if n in _FRAMEWORKS and n not in sys.modules]
    if not fresh:
        return
    gc.disable()
    for name in fresh:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    gc.freeze()  # as after the first imports: kept out of the children's collections
    gc.enable()


def _make_template_aside() -> None:
    """Check the DBOS template, and make it if it is missing or wrong, in a process of its own
    that nobody waits for (a grandchild in its own session, holding none of our descriptors):
    ``runner.dbos_template``."""
    try:
        from relay_notebook.runner.dbos_template import make_template, template_path

        target = template_path()
    except (ImportError, OSError):
        return
    if target is None:
        return
    helper = os.fork()
    if helper == 0:
        try:
            if os.fork() == 0:
                os.setsid()
                _close_from(3, keep=set())
                with contextlib.suppress(BaseException):
                    make_template()
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def probe() -> dict[str, Any]:
    """What confinement forked children get here: the Landlock ABI, and whether namespaces work."""
    return _probe_result(_start_probe())


def _start_probe() -> tuple[int, int, int]:
    """Fork the namespace probe (best before the imports: a small process forks quicker)."""
    from relay_notebook.runner.landlock import abi_version

    abi = abi_version()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            from relay_notebook.runner.sandbox import probe_namespaces

            probe_namespaces()
            os.write(w, b"ok")
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(w, str(exc).encode()[:500])
        os._exit(0)
    os.close(w)
    return abi, pid, r


def _probe_result(probe: tuple[int, int, int]) -> dict[str, Any]:
    abi, pid, r = probe
    with os.fdopen(r, "rb") as stream:
        said = stream.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return {
        "landlock": abi,
        "namespaces": said == "ok",
        "namespaces_error": None if said == "ok" else said,
    }


def main(control_fd: int, *, one_attempt: bool = False) -> None:
    """Serve fork requests on ``control_fd``; ``one_attempt``: for a ``relay run`` process, which
    waits for us, so we are ready as soon as we can be (see ``_PRELOAD_MANY``)."""
    name_process("relay-warm")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor ends us by closing the socket
    _close_from(3, keep={control_fd})  # what a posix_spawn let through (see runner.warm_launch)
    control = socket.socket(fileno=control_fd)
    probing = _start_probe()
    gc.disable()  # collections while importing find next to nothing to free
    _preload(one_attempt=one_attempt)
    if not one_attempt:
        with contextlib.suppress(Exception):  # without it, each child lets DBOS make its engine
            rehearse()  # DBOS's SQLite statements compiled once (runner.dbos_engines)
        gc.collect()  # tens of ms: not worth it for one fork, whose child exits soon
    gc.freeze()  # what was imported stays out of the children's collections (fewer copied pages)
    gc.enable()
    asked = _asked_to_rehearse(control)  # a worker's database, sent as we started
    if asked is not None and not _rehearse_postgres(asked):
        os._exit(1)  # a thread of DBOS's outlived the rehearsal: never fork (attempts spawn)
    control.send(json.dumps({"ready": True, "pid": os.getpid(), **_probe_result(probing)}).encode())
    _make_template_aside()
    networks = _Networks()  # spare networks made ahead, and those kept for a relay's next
    sessions = WarmSessions()  # PostgreSQL sessions kept for a relay's next attempt
    poller = select.poll()
    poller.register(control, select.POLLIN)
    waiting: dict[
        int, tuple[int, socket.socket, Spare | None, tuple[str, str] | None, Lease | None]
    ] = {}
    listening = True
    #: a PostgreSQL database an attempt ran on, to rehearse DBOS on once nothing else is asked
    rehearsal: str | None = None
    while listening or waiting:
        events = poller.poll(0 if rehearsal is not None else None)
        if rehearsal is not None and not events:
            # (not once the supervisor has gone: no attempt would take it)
            if listening and not _rehearse_postgres(rehearsal):  # a thread outlived it
                poller.unregister(control)  # no more forks: this process has a thread now
                listening = False
                networks.close()
            rehearsal = None
            continue
        for fd, _ in events:
            if listening and fd == control.fileno():
                try:
                    msg, fds, _, _ = socket.recv_fds(control, _REQUEST_LIMIT, 64)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    poller.unregister(control)
                    listening = False  # the supervisor is gone: finish what runs, then leave
                    networks.close()
                    sessions.close()
                    continue
                request = json.loads(msg)
                if "rehearse" in request:  # sent as we started, read only now (see above)
                    if not one_attempt and not tried_postgres(request["rehearse"]):
                        rehearsal = request["rehearse"]
                    continue
                _preload_frameworks(request.get("preload") or ())
                given, owner = networks.give(request)
                lease = sessions.give(request, _opens_ahead(request))
                led_r, led_w = os.pipe()  # closed by the child once it leads its own group
                pid = os.fork()
                if pid == 0:
                    os.close(led_r)
                    _attempt(request, fds, led_w, given, lease)
                os.close(led_w)
                if given is not None:
                    given.let_go()  # the attempt holds it now; we keep the hold, for its next
                # Report the pid only once its process group exists: a supervisor that kills the
                # group at once must not find it missing and so kill nothing.
                os.read(led_r, 1)
                os.close(led_r)
                status = socket.socket(fileno=fds[0])
                for extra in fds[1:]:
                    os.close(extra)
                pidfd = os.pidfd_open(pid)
                with contextlib.suppress(OSError):
                    status.send(json.dumps({"pid": pid}).encode())
                waiting[pidfd] = (pid, status, given, owner, lease)
                poller.register(pidfd, select.POLLIN)
                database_url = request.get("database_url")
                if not one_attempt and database_url and not tried_postgres(database_url):
                    rehearsal = database_url
            elif fd in waiting:
                pid, status, given, owner, lease = waiting.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, code, usage = os.wait4(pid, 0)
                end = {
                    "returncode": os.waitstatus_to_exitcode(code),
                    "cpu": usage.ru_utime + usage.ru_stime,  # with the processes it waited for
                }
                # its leader has ended, and so every process of its sandbox (runner.sandbox_net):
                # its sessions reset before the supervisor hears of the end, so that nothing a
                # relay left in one (an advisory lock) outlives the attempt as it sees it
                sessions.ended(lease, keep=listening)
                with contextlib.suppress(OSError):
                    status.send(json.dumps(end).encode())
                status.close()
                networks.ended(given, owner, listening=listening)
    control.close()


def _asked_to_rehearse(control: socket.socket) -> str | None:
    """The database a worker's ``rehearse_on`` sent before we were ready, if it is there yet
    (nothing else comes before the ready message; a later one is read in the loop)."""
    control.setblocking(False)
    try:
        msg = control.recv(_REQUEST_LIMIT)
    except (BlockingIOError, InterruptedError):
        return None
    finally:
        control.setblocking(True)
    try:
        return str(json.loads(msg)["rehearse"])
    except (ValueError, KeyError, TypeError):
        return None


def _rehearse_postgres(database_url: str) -> bool:
    """DBOS rehearsed on an attempt's PostgreSQL database (``dbos_engines.rehearse_postgres``),
    libpq reading this process's own settings (an attempt's leader adopts the attempt's before
    it connects: a rehearsal that cannot connect with ours keeps nothing); False if a thread of
    it is left running (this process must then fork no more)."""
    with contextlib.suppress(Exception):
        rehearse_postgres(database_url)
    gc.collect()
    gc.freeze()  # the engine and its compiled statements: out of the children's collections
    return threading.active_count() == 1


# -- in the forked child ----------------------------------------------------------------------


class _Networks:
    """The warm parent's networks (see ``runner.sandbox_net``): **spares**, made ahead, one for
    each network the plans ask for (the outside by default; a PostgreSQL run's plan names its
    server), each for the next attempt whose plan names that network; and networks **kept**
    once their attempt has ended, each for the same relay's next attempt with that network. An
    attempt that finds neither attaches its own pasta, and the next one finds a spare."""

    def __init__(self) -> None:
        self._spares: dict[str, Spare] = {}
        self._kept: list[tuple[tuple[str, str], Spare]] = []
        self._wanted: dict[str, dict[str, Any]] = {}
        self._make(_key(OUTSIDE), OUTSIDE)

    def give(self, request: dict[str, Any]) -> tuple[Spare | None, tuple[str, str] | None]:
        """A network for the attempt ``request`` asks for, ready, and whose it is (its relay
        and network), if one serves its plan; else ``(None, None)``."""
        confine = request.get("confine")
        plan: dict[str, Any] = confine["plan"] if confine else {}
        network, relay = plan.get("network"), plan.get("relay")
        if network is None or network["mode"] not in PASTA_MODES:
            return None, None
        owner = (str(relay), _key(network))
        kept = self._take_kept(owner) if relay else None
        if kept is not None:
            return kept, owner
        spare = self._spares.pop(owner[1], None)
        if spare is not None and not spare.ready():
            self._spares[owner[1]] = spare  # still starting: this attempt attaches its own pasta
            return None, None
        self._wanted[owner[1]] = network  # made once an attempt ends (fewer at once)
        if spare is not None and spare.claim():
            return spare, owner if relay else None  # (a plan that names no relay: not kept)
        return None, None  # none, or it failed (claim let it go): the attempt attaches its own

    def ended(self, given: Spare | None, owner: tuple[str, str] | None, *, listening: bool) -> None:
        """An attempt has ended (its leader reaped): its network kept for the relay's next
        attempt (which takes it only if nothing of this one is left in it: ``Spare.reclaim``,
        checked then, once the attempt's connections have had time to close); the spares
        wanted since made."""
        if given is not None:
            if listening and owner is not None:
                self._kept.append((owner, given))
                while len(self._kept) > KEPT_NETWORKS:
                    self._kept.pop(0)[1].close()
            else:
                given.close()
        if listening:
            for key, network in self._wanted.items():
                if key not in self._spares:
                    self._make(key, network)
        self._wanted.clear()

    def close(self) -> None:
        for _, network in self._kept:
            network.close()
        for spare in self._spares.values():
            spare.close()
        self._kept.clear()
        self._spares.clear()

    def _make(self, key: str, network: dict[str, Any]) -> None:
        spare = make_spare(network)
        if spare is None:
            return
        self._spares[key] = spare
        while len(self._spares) > SPARE_NETWORKS:  # the longest made let go first
            self._spares.pop(next(iter(self._spares))).close()

    def _take_kept(self, owner: tuple[str, str]) -> Spare | None:
        """One of ``owner``'s kept networks, open again (``None``: none is kept, or none is
        still fit: those are let go)."""
        for i in reversed(range(len(self._kept))):
            if self._kept[i][0] != owner:
                continue
            network = self._kept.pop(i)[1]
            if network.reclaim():
                return network
            network.close()
        return None


def _key(network: dict[str, Any]) -> str:
    """One string per network a plan can name: its mode and its allowed endpoints."""
    return json.dumps([network["mode"], sorted(network["allow"])])


def _opens_ahead(request: dict[str, Any]) -> bool:
    """Whether the attempt ``request`` asks for has its leader open its PostgreSQL sessions
    ahead: a confined one whose sandbox's network reaches the server (see ``_attempt``)."""
    confine = request.get("confine")
    return (
        request.get("database_url") is not None
        and confine is not None
        and confine["plan"]["network"]["mode"] in PASTA_MODES
    )


def _attempt(
    request: dict[str, Any],
    fds: list[int],
    led: int,
    spare: Spare | None = None,
    lease: Lease | None = None,
) -> NoReturn:
    """The attempt's group leader: the relay's process itself, or its confined ancestor."""
    try:
        name_process("relay-leader")
        os.setsid()
        os.close(led)  # the warm parent may now report our pid
        os.dup2(fds[3], 2)  # our own errors, if any, go to the attempt's stderr log
        os.close(fds[0])  # the status socket is the warm parent's business
        fds = fds[1:]
        # the environment a spawned attempt's leader starts with: libpq's PG* variables for
        # the sessions opened ahead, pasta's for the sandbox's network
        env: dict[str, str] = request["env"]
        os.environ.clear()
        os.environ.update(env)
        confine = request.get("confine")
        ahead = _opens_ahead(request)
        database_url = request.pop("database_url", None)
        if confine is None:
            _run(request, fds)
        sockets: set[int] = set()
        # its sessions skip pasta (see runner.dbos_engines); only where the sandbox's network
        # reaches the server anyway (an isolated one does not: nothing is opened for it)
        if ahead and database_url is not None:
            moved = [*fds, 2, *request["targets"], int(confine["plan"]["net_fd"])]
            given = lease.connections if lease is not None else None  # the parent's, kept
            sockets = connect_ahead(database_url, above=max(moved), given=given)
            if lease is not None and lease.lock is not None:  # the child's run-lock session
                lock_fd = give_lock_session(database_url, lease.lock, above=max(moved))
                sockets |= {lock_fd} if lock_fd is not None else set()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # they reach the relay's process directly
        status_w, net_ready = enter_sandbox(confine["plan"], spare)
        os.close(status_w)  # in the relay's process from here on
        _run(request, fds, net_ready, sockets)
    except BaseException:
        traceback.print_exc()
        os._exit(_FAILED)


def _arrange(fds: list[int], targets: list[int], sockets: Iterable[int] = ()) -> None:
    """Put each received descriptor at its target number and close every other one but
    ``sockets`` (each above every target: see ``connect_ahead``)."""
    base = max([*fds, *targets, 2]) + 1
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, base) for fd in fds]
    _close_from(0, keep={*high, *sockets})
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=target <= 2)
        os.close(fd)


def _std_streams() -> None:
    """Fresh sys.stdin/stdout/stderr on 0/1/2, unbuffered as a spawned child's (-u)."""
    encoding, errors = sys.stdout.encoding, sys.stderr.errors
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=encoding)
    out = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=encoding, write_through=True)
    err = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding=encoding, errors=errors, write_through=True
    )
    sys.stdout, sys.stderr = out, err
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, out, err  # type: ignore[misc]


def _run(
    request: dict[str, Any],
    fds: list[int],
    net_ready: int | None = None,
    sockets: Iterable[int] = (),
) -> NoReturn:
    """The relay's process: descriptors, environment and signals as a spawned child's, then
    confinement, then the child program. ``net_ready``: the sandbox's network word (see
    ``runner.sandbox``), kept for the child at a number of its own; ``sockets``: the sessions
    ``connect_ahead`` opened, kept where they are."""
    try:
        targets = [0, 1, 2, *request["targets"]]
        if net_ready is not None:  # at the number the spec names (see launch_attempt)
            fds, targets = [*fds, net_ready], [*targets, int(request["confine"]["plan"]["net_fd"])]
        _arrange(fds, targets, sockets)
        _std_streams()
        os.chdir(request["cwd"])
        tempfile.tempdir = None  # TMPDIR is read again (the leader took on its environment)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        random.seed()  # os.register_at_fork does it too; a relay must never share a sequence
        confine = request.get("confine")
        if confine is not None:
            from relay_notebook.runner.landlock import drop_privileges, restrict_writes

            drop_privileges()
            writable = [Path(p) for p in (*confine["writable"], "/dev/shm", "/tmp")]
            restrict_writes(writable, int(confine["abi"]))
        from relay_notebook.runner import child

        sys.argv = [str(child.__file__), request["spec"]]
        child.main(request["spec"])
    except SystemExit as exc:
        _flush()
        os._exit(exc.code if isinstance(exc.code, int) else 1)
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as Python does for an uncaught Ctrl-C
    except BaseException:
        traceback.print_exc()
    _flush()
    os._exit(1)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


if __name__ == "__main__":
    main(int(sys.argv[1]), one_attempt="--one-attempt" in sys.argv[2:])
