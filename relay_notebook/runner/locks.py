"""Run locks: a run has a single executor, on one machine (a file lock) or many (PostgreSQL).

Design note: a lock must cover both the supervisor and its child, and vanish by itself when
they die, even by SIGKILL. On one machine the supervisor takes ``flock`` on the run's lock
file and hands the descriptor to the child: the kernel releases it when both are gone. A
PostgreSQL session cannot be shared between processes, so a PostgreSQL run uses two session
advisory locks per run: the supervisor holds its key for the whole attempt, and the child
takes the child key at start and holds it until it exits. A new supervisor must get its key
(no other supervisor) and then find the child key free (no orphaned child still running)
before it starts a child; only the holder of the supervisor key starts children, so the
check cannot race. The server drops a session's advisory locks when its connection ends; a
released supervisor lock drops them itself and its session is kept for the process's next
lock (a worker would otherwise start a server session, about 10 ms of its CPU, per attempt).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relay_notebook.errors import RunLockedError, RunNotFoundError
from relay_notebook.errors.storage import storage_error
from relay_notebook.runner.backend import Backend, connect
from relay_notebook.runner.dbos_engines import socket_identity, sockets_in_place

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder

__all__ = [
    "RunLock",
    "give_lock_session",
    "hold_child_lock",
    "lock_session_given",
    "open_lock_session",
    "take_run_lock",
]

_TRY = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
GRACE_S = 2.0
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


def _key(role: str, run_id: str) -> str:
    return f"relay-{role}:{run_id}"


class RunLock:
    """A held run lock; ``pass_fds`` go to the child; ``release`` when the attempt ended."""

    def __init__(self, *, fd: int | None = None, conn: Any = None, url: str = "") -> None:
        self.fd = fd
        self._conn = conn
        self._url = url  # the database the session is kept for once released

    @property
    def session(self) -> Any:
        """The PostgreSQL session holding the lock (``None`` for a file lock): it can be lent
        to the attempt's settling reads (``record.store.lend_session``)."""
        return self._conn

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.fd,) if self.fd is not None else ()

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self._conn is not None:
            _give_back(self._conn, self._url)  # its advisory locks dropped, kept for reuse
            self._conn = None


def _deleted(folder: RunFolder) -> RunNotFoundError:
    return RunNotFoundError(
        f"Run {folder.run_id} no longer exists: it was deleted (relay delete) as this command "
        f"came to it. List runs with: relay runs {folder.relay}"
    )


def _locked(folder: RunFolder, why: str) -> RunLockedError:
    return RunLockedError(
        f"Run {folder.run_id} is being executed by {why} right now; a run has a single "
        f"executor. Wait for it to finish (relay runs {folder.relay}) and recover it afterwards "
        f"if it was interrupted."
    )


def take_run_lock(folder: RunFolder, backend: Backend, *, recorded: bool = True) -> RunLock:
    """Lock ``folder``'s run for one attempt, or raise ``RunLockedError`` at once.

    ``recorded``: the run must still have its run.json once locked (a run deleted meanwhile is
    ``RunNotFoundError``, and leaves no lock file).
    """
    if not backend.is_postgres:
        try:
            fd = os.open(folder.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except FileNotFoundError:
            raise _deleted(folder) from None
        except OSError as exc:
            if storage_error(exc) is not None:
                raise  # a full disk or a read-only workspace is said as such
            raise folder.damaged(
                folder.lock, f"cannot be opened as the run's lock file ({exc.strerror or exc})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _locked(folder, "another process") from None
        if recorded and not folder.meta.is_file():  # deleted while we came: leave no trace
            with contextlib.suppress(OSError):
                folder.lock.unlink()
            os.close(fd)
            raise _deleted(folder)
        return RunLock(fd=fd)
    conn = _idle_session(backend) or _lock_connection(backend)
    try:
        if not _try(conn, _key("supervisor", folder.run_id)):
            raise _locked(folder, "another supervisor (a worker or a notebook)")
        child = _key("child", folder.run_id)
        if not _try(conn, child):
            raise _locked(folder, "an attempt's process that is still running")
        conn.execute(_UNLOCK, (child,))
    except BaseException:
        conn.close()
        raise
    return RunLock(conn=conn, url=backend.libpq_url)


def _try(conn: Any, key: str, grace_s: float = GRACE_S) -> bool:
    """Take ``key``, allowing a just-ended holder's session the moment the server needs to end.

    A killed process's connection closes at once, but its server session notices and drops
    its advisory locks a little later; without the grace a recovery right after a crash
    would find the run locked by the dead.
    """
    deadline = time.monotonic() + grace_s
    while not conn.execute(_TRY, (key,)).fetchone()[0]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _lock_connection(backend: Backend) -> Any:
    """A session that keeps its advisory locks exactly as long as its process lives.

    The server must neither end it for idling (``idle_session_timeout``, set by many
    managed services) nor keep it for hours after its machine died: keepalives both ways.
    """
    import psycopg

    conn = connect(backend, keepalive=True)
    try:  # in one round trip (an attempt's child makes this session as it starts)
        settings = ", ".join("set_config(%s, %s, false)" for _ in _SESSION)
        conn.execute(f"SELECT {settings}", [part for pair in _SESSION for part in pair])
    except psycopg.Error:
        for setting, value in _SESSION:
            with contextlib.suppress(psycopg.Error):  # an older server without that setting
                conn.execute("SELECT set_config(%s, %s, false)", (setting, value))
    return conn


def open_lock_session(backend: Backend, connect_timeout: int) -> Any:
    """A run-lock session as ``_lock_connection`` makes one, its settings given as it starts
    (so that ``RESET ALL`` keeps them): for a warm parent that keeps it for its attempts
    (``runner.warm_sessions``). A server without one of the settings refuses it
    (``DatabaseUnavailableError``): the attempts then open their own."""
    options = " ".join(f"-c {setting}={value}" for setting, value in _SESSION)
    return connect(backend, keepalive=True, connect_timeout=connect_timeout, options=options)


#: the run-lock session a warm parent gave this forked attempt (``give_lock_session``): the
#: database's libpq URL, the connection, its socket's (fd, device, inode)
_given: dict[str, Any] = {}
#: given but not found as left (see ``runner.dbos_engines``): never used, never collected
_parked: list[Any] = []


def give_lock_session(url: str, connection: Any, above: int) -> int | None:
    """In a forked attempt's leader: ``connection`` (``open_lock_session``'s, for ``url``) is
    the run-lock session ``hold_child_lock`` takes. Returns its socket's number, to be kept
    on the way to the child (``None``: at or below ``above``, so not usable)."""
    _given.clear()
    fd: int = connection.fileno()
    if fd <= above:
        _parked.append(connection)
        return None
    _given.update(url=url, connection=connection, socket=(fd, *socket_identity(fd)))
    return fd


def lock_session_given() -> bool:
    """Whether this process's leader was given a run-lock session still where it left it
    (for the attempt's confinement record)."""
    return bool(_given) and sockets_in_place([_given["socket"]])


def _take_given(backend: Backend) -> Any | None:
    if not _given:
        return None
    url, connection, socket = _given["url"], _given["connection"], _given["socket"]
    _given.clear()
    if url != backend.url or not sockets_in_place([socket]):
        _parked.append(connection)  # its number may be another file's now: never closed
        return None
    return connection


_SESSION = (
    ("idle_session_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("tcp_keepalives_idle", "10"),
    ("tcp_keepalives_interval", "5"),
    ("tcp_keepalives_count", "3"),
)

#: this process's lock sessions that hold no lock, by process and database, at most
#: ``_IDLE_MAX`` each: a worker takes a run lock for every attempt, and a new session costs
#: the server about 10 ms of CPU (a backend process started and set up) and us a handshake
_idle: dict[tuple[int, str], list[Any]] = {}
_idle_lock = threading.Lock()
_IDLE_MAX = 4


def _idle_session(backend: Backend) -> Any:
    """A kept lock session of this process to ``backend``'s database that still answers, or
    ``None``; one the server ended meanwhile is dropped."""
    import psycopg

    while True:
        with _idle_lock:
            kept = _idle.get((os.getpid(), backend.libpq_url))
            conn = kept.pop() if kept else None
        if conn is None:
            return None
        try:
            conn.execute("SELECT 1")
            return conn
        except psycopg.Error:
            conn.close()


def _give_back(conn: Any, url: str) -> None:
    """Drop every advisory lock ``conn`` holds and keep it for the next lock; a session that
    cannot say it holds none is ended (the server then drops its locks itself)."""
    import psycopg
    from psycopg.pq import TransactionStatus

    try:
        if conn.closed or conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.InterfaceError("not an idle session")
        conn.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        conn.close()
        return
    with _idle_lock:
        kept = _idle.setdefault((os.getpid(), url), [])
        if len(kept) < _IDLE_MAX:
            kept.append(conn)
            return
    conn.close()


def hold_child_lock(
    backend: Backend, run_id: str, on_lost: Callable[[], None], wait_s: float = 10.0
) -> Any:
    """In the child: take the run's child key, kept until the process exits; None if taken.

    A watchdog checks the session every second and calls ``on_lost`` (which ends the
    process) if the server ended it: without the lock the run could get a second executor.
    """
    conn = _take_given(backend) or _lock_connection(backend)
    deadline = time.monotonic() + wait_s
    while not conn.execute(_TRY, (_key("child", run_id),)).fetchone()[0]:
        if time.monotonic() > deadline:
            conn.close()
            return None
        time.sleep(0.05)

    def watch() -> None:
        import psycopg

        while True:
            time.sleep(1.0)
            try:
                conn.execute("SELECT 1")
            except Exception as exc:
                # not a statement refused inside a reader's transaction (the session is lent)
                if isinstance(exc, psycopg.OperationalError) or conn.broken or conn.closed:
                    on_lost()
                    return

    threading.Thread(target=watch, name="relay-run-lock", daemon=True).start()
    return conn
