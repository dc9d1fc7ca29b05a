"""Spawning a warm parent with next to nothing imported: the first thing ``relay run`` does.

Design note: a ``relay run`` process waits for its warm parent (see ``runner.warm``), so each
millisecond before that parent starts is on the run's clock, and ``subprocess`` with the
modules around it (``socket``, ``dataclasses``, ``pathlib``) takes tens of milliseconds to
import. This module imports ``os``, ``sys``, ``time`` and the C ``_socket`` only: it spawns
the parent with ``os.posix_spawn`` in a session of its own, its control socket at a fixed
number and its standard streams on ``/dev/null``, then stamps the kit's files while the new
interpreter starts (so a change since is seen), and ``runner.warm.WarmParent`` adopts it. The
parent closes any other descriptor it inherited before it does anything else.
"""

from __future__ import annotations

import _socket
import os
import sys
import time
from stat import S_ISDIR as stat_is_dir

__all__ = [
    "DATABASE_URL_ENV",
    "ENV_WARM_START",
    "FRAMEWORK_MODULES",
    "WARM_PARENT_MODULE",
    "Launched",
    "kit_files",
    "kit_files_under",
    "launch",
    "rehearse_on",
    "stamp",
    "stamps_differ",
]

ENV_WARM_START = "RELAY_WARM_START"  # "0" turns warm start off (read by ``settings``)
WARM_PARENT_MODULE = "relay_notebook.runner.warm_parent"
#: ``record.backend.ENV_VAR`` (importing it costs what this module avoids; a test keeps the two
#: equal): the database URL, password and all, never reaches the parent or what it forks
DATABASE_URL_ENV = "RELAY_DATABASE_URL"
#: a PostgreSQL database every warm parent this process starts rehearses DBOS on before it
#: says it is ready (``dbos_engines.rehearse_postgres``): a worker's, set by ``rehearse_on``
_rehearse_url: str | None = None


def rehearse_on(database_url: str | None) -> None:
    """Have every warm parent this process starts from now rehearse DBOS on ``database_url``
    before it says it is ready (a worker's database: its attempts all run there). The URL is
    sent on the parent's control socket, as a fork request's is, never in its environment."""
    global _rehearse_url
    _rehearse_url = database_url


_ROOTS = ("relay_notebook", "agentworks")
#: the agent frameworks a warm parent imports once an attempt of a relay that imports one is
#: asked of it, for that attempt and the ones after (about 2.5 s of CPU each, otherwise paid
#: by every attempt): each module is the kit's environment's own, imported outside any sandbox
#: like DBOS is, and starts no thread (a test checks), so forking after it stays safe. Never a
#: module that applies DBOS's decorators as it is imported (``dbos_openai_agents`` declares its
#: model-call step at import): those must meet the attempt's instrumentation
#: (``runner.instrument``), so the frameworks' DBOS integrations are left to the attempt.
FRAMEWORK_MODULES: dict[str, tuple[str, ...]] = {
    "pydantic_ai": ("pydantic_ai",),
    "agents": ("agents",),
    "dbos_openai_agents": ("agents",),
}
_CONTROL_FD = 3  # where the parent finds its end of the control socket
#: per path: a file's (modification time, size), a folder's (modification time, what it holds
#: that can be imported), ``None`` where it is gone
Stamps = tuple[tuple[int, int | frozenset[str]] | None, ...]


class Launched:
    """A warm parent just spawned: its pid, our end of its control socket, the kit's files
    and their stamps taken before it started, and when it started (``time.monotonic``)."""

    __slots__ = ("control", "files", "pid", "stamps", "started")

    def __init__(
        self, pid: int, control: _socket.socket, files: tuple[str, ...], stamps: Stamps
    ) -> None:
        self.pid = pid
        self.control = control
        self.files = files
        self.stamps = stamps
        self.started = time.monotonic()


def kit_files() -> tuple[str, ...]:
    """The files whose change makes a warm parent stale: the interpreter and the kit's code."""
    import importlib.util  # already loaded by Python's start: cheap

    found = [os.path.realpath(sys.executable)]
    for name in _ROOTS:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            found += kit_files_under(os.path.dirname(spec.origin))
    return tuple(found)


def kit_files_under(root: str) -> tuple[str, ...]:
    """A package's folders and modules, ``root`` first (``__pycache__`` and hidden ones left)."""
    found = [root]
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        found += [os.path.join(folder, d) for d in dirs]  # a module added is seen in its folder
        found += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return tuple(found)


def stamp(paths: tuple[str, ...]) -> Stamps:
    """Each path's stamp (see ``Stamps``; a folder's contents: ``folder_names``)."""
    return tuple(_stamp_of(p) for p in paths)


def stamps_differ(paths: tuple[str, ...], stamps: Stamps) -> bool:
    """Whether a path changed since ``stamps`` were taken. A folder changed only if its modules
    or packages did: its own time also moves when Python first writes its ``__pycache__``,
    which a parent's imports do in a fresh checkout (that read as a change, and ``relay run``
    spawned the attempt it should have forked). It is listed again only if its time moved."""
    for path, old in zip(paths, stamps, strict=True):
        folder = old is not None and isinstance(old[1], frozenset)
        if folder and old is not None and _mtime(path) == old[0]:
            continue
        new = _stamp_of(path)
        if new is None or old is None:
            if new != old:
                return True
        elif new[1] != old[1] if folder else new != old:
            return True
    return False


def _stamp_of(path: str) -> tuple[int, int | frozenset[str]] | None:
    try:
        st = os.stat(path)
        if stat_is_dir(st.st_mode):
            return (st.st_mtime_ns, folder_names(path))
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def folder_names(folder: str) -> frozenset[str]:
    """What a kit folder holds that can be imported: its ``.py`` files and its packages."""
    with os.scandir(folder) as entries:
        return frozenset(
            e.name
            for e in entries
            if e.name.endswith(".py")
            or (e.name != "__pycache__" and not e.name.startswith(".") and e.is_dir())
        )


def launch(*, one_attempt: bool = False) -> Launched:
    """Spawn a warm parent (``one_attempt``: for a process that will fork one attempt).

    The kit's files are stamped just after the spawn, while the new interpreter starts (the
    walk takes about 10 ms, which the parent's start would otherwise wait for): a file changed
    in that instant is missed as it would be by this process's own imports, which read the kit
    at the same time.
    """
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    target = _CONTROL_FD if theirs.fileno() != _CONTROL_FD else _CONTROL_FD + 1
    argv = [sys.executable, "-m", WARM_PARENT_MODULE, str(target)]
    if one_attempt:
        argv.append("--one-attempt")
    env = {k: v for k, v in os.environ.items() if k != DATABASE_URL_ENV}
    try:
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            actions = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
            actions.append((os.POSIX_SPAWN_DUP2, theirs.fileno(), target))
            pid = os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
        finally:
            os.close(devnull)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    started = time.monotonic()
    if _rehearse_url and not one_attempt:  # read by the parent once it has imported
        import json  # (a worker's: not on ``relay run``'s way)

        ours.send(json.dumps({"rehearse": _rehearse_url}).encode())
    files = kit_files()
    launched = Launched(pid, ours, files, stamp(files))
    launched.started = started
    return launched
