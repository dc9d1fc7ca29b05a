"""PostgreSQL sessions a warm parent keeps for its attempts: reset, and given again.

Design note: a queued one-step run on PostgreSQL opened four server sessions (the three DBOS's
pool takes ahead, ``runner.dbos_engines.connect_ahead``, and the child's run lock), and each
was a backend process the server started, which then read the catalog again for every DBOS
table it touched: about 8 ms of the server's CPU for a session that reads three tables,
against 0.4 ms for the same reads on a session that had read them before
(``benchmarks/profile_attempt.py``). So a warm parent keeps the sessions of its attempts and
gives them to the next attempt, as a connection pooler does between its clients:

- **What is kept.** The sessions the parent opened for an attempt (``give``): DBOS's pool's
  first three, and the child's run-lock session (``runner.locks.open_lock_session``: its
  settings given as it starts, so that a reset keeps them). The parent opens them itself, in
  the attempt's libpq environment (its ``PG*`` variables: the role, the password, the TLS
  settings), each socket above ``FLOOR`` (above every number an attempt's leader moves a
  descriptor to, so the leader can keep them: ``connect_ahead``).
  Forked, the leader and then the relay's process hold them; every other process of the
  attempt closes them (``warm_parent._arrange``, the sandbox's init and the leader's end), and
  so does every other attempt's, whose leader inherits the parent's sockets and closes all but
  its own before any code of a relay runs. The parent never touches a session it gave until
  that attempt's leader has been reaped, and so every process of its sandbox has ended; it
  resets them before it tells the supervisor the attempt ended, so that nothing a relay left
  in one (an advisory lock, a ``LISTEN``) outlives the attempt as the supervisor sees it.
- **Reset before it is given again** (``_reset``). Nothing may have arrived on the socket
  since (a late answer to a statement of the attempt's, a notification, the server's
  goodbye); then it must answer a ``SELECT`` of a nonce drawn now, within ``RESET_LIMIT_S``:
  one whose attempt was killed mid-statement answers that statement first (the nonce, drawn
  after the attempt ended, cannot be in it) or not in time, and is closed. The answer says
  whether the session is in a transaction (the attempt's, left open): ``ROLLBACK`` then. Last,
  ``DISCARD ALL`` (what the server resets for a pooler: settings back to those the session
  started with, roles, prepared statements, cursors, temporary tables, advisory locks,
  ``LISTEN`` channels, cached plans); a session not idle after it is closed. A relay can
  still do to a session what it could before (it holds the database's URL and role anyway):
  the reset only keeps what one attempt left out of the next one's.
- **Whose.** Sessions are given again only to an attempt of the same relay (its code folder's
  name), on the same database URL, with the same ``PG*`` environment: never another relay's,
  as the parent's kept networks (``runner.sandbox_net``). At most ``KEPT_SESSIONS`` idle
  ones in all, two attempts' worth (those of the relay whose attempt ended longest ago are
  closed first): each is a server session held while the parent waits, which a server's
  ``max_connections`` must allow for every worker; all are closed when the supervisor goes.
- **A server that cannot be reached.** Opening blocks the parent (which forks every attempt),
  so it uses ``CONNECT_TIMEOUT_S``, and after a failure the parent opens none for that
  database for ``RETRY_AFTER_S``: those attempts' leaders open their own as before, and the
  child's DBOS says why it cannot connect.

An idle session the server ends meanwhile (``idle_session_timeout``, a restart) is found so
when it is next given (its socket readable) and closed.

**The run lock still ends with the relay's process** (``runner.locks``: a child that outlives
its supervisor keeps a second executor out). While the parent lives, it holds the session's
socket too, and its reset (``DISCARD ALL``) drops the child's lock as soon as the attempt's
leader is reaped, before the supervisor hears of the end, as the server did when the child's
own session closed. If the parent dies first, the relay's process holds the last descriptor
of the session, which ends, and its lock with it, when that process ends. A session the
server ends while the attempt runs is noticed by the child's watchdog, as before.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import select
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from relay_notebook.runner.backend import Backend
from relay_notebook.runner.dbos_engines import SESSIONS_AHEAD, numbers_taken, open_sessions
from relay_notebook.runner.locks import open_lock_session

__all__ = [
    "CONNECT_TIMEOUT_S",
    "FLOOR",
    "KEPT_SESSIONS",
    "RESET_LIMIT_S",
    "RETRY_AFTER_S",
    "Lease",
    "WarmSessions",
]

#: the lowest number a kept session's socket has (see the note)
FLOOR = 512
#: idle sessions a warm parent keeps at most, of any relays: two attempts' worth
KEPT_SESSIONS = 2 * (SESSIONS_AHEAD + 1)
#: how long a given-back session has to answer its reset
RESET_LIMIT_S = 1.0
#: libpq's connect timeout for a session the parent opens (it blocks the parent meanwhile)
CONNECT_TIMEOUT_S = 3
#: after a failure to open, how long the parent leaves a database's sessions to the leaders
RETRY_AFTER_S = 30.0

Key = tuple[str, str, tuple[tuple[str, str], ...]]
#: the two kinds of session kept: DBOS's pool's, and the child's run lock's
DBOS, LOCK = "dbos", "lock"


@dataclass
class Lease:
    """The sessions given to one attempt, and whose they are: DBOS's pool's first ones, and
    the run lock's (``None``: the child opens its own)."""

    key: Key
    connections: list[Any]
    lock: Any = None

    def all(self) -> list[tuple[str, Any]]:
        return [(DBOS, c) for c in self.connections] + ([(LOCK, self.lock)] if self.lock else [])


class WarmSessions:
    """The sessions a warm parent keeps, idle, by relay, database and ``PG*`` environment, and
    kind."""

    def __init__(self) -> None:
        self._idle: OrderedDict[tuple[Key, str], list[Any]] = OrderedDict()
        self._failed: dict[tuple[str, str], float] = {}  # (URL, kind) -> when opening failed

    def give(self, request: dict[str, Any], sandboxed: bool) -> Lease | None:
        """The sessions for the attempt ``request`` asks for, if it is a PostgreSQL attempt
        whose leader opens sessions ahead (``sandboxed``: its sandbox's network reaches the
        server): kept ones first, the rest opened now; ``None`` if none could be had."""
        url, relay = request.get("database_url"), _relay(request)
        if not url or not sandboxed or relay is None:
            return None
        env = dict(request.get("env") or {})
        key: Key = (relay, url, tuple(sorted((k, v) for k, v in env.items() if k[:2] == "PG")))
        given = self._take(key, DBOS, SESSIONS_AHEAD)
        lock = self._take(key, LOCK, 1)
        lease = Lease(key, given, lock[0] if lock else None)
        return lease if lease.all() else None

    def _take(self, key: Key, kind: str, count: int) -> list[Any]:
        """``count`` sessions of ``kind``: kept ones that are still quiet, the rest opened."""
        idle = self._idle.get((key, kind), [])
        taken: list[Any] = []
        while idle and len(taken) < count:
            connection = idle.pop()
            if _quiet(connection):
                taken.append(connection)
            else:  # the server ended it meanwhile, or said something: not given
                _close(connection)
        if not idle:
            self._idle.pop((key, kind), None)
        url = key[1]
        failed = self._failed.get((url, kind))
        if len(taken) < count and (failed is None or time.monotonic() - failed >= RETRY_AFTER_S):
            try:
                with _libpq_environment(dict(key[2])):
                    opened = _open(kind, url, count - len(taken))
            except Exception:  # (no descriptor left below the floor): never the parent's end
                opened = []
            if not opened:
                self._failed[(url, kind)] = time.monotonic()
            taken += opened
        return taken

    def ended(self, lease: Lease | None, *, keep: bool) -> None:
        """The attempt given ``lease`` has ended (its leader reaped): each session reset and
        kept for the relay's next attempt (``keep``: the parent forks more), else closed."""
        if lease is None:
            return
        for kind, connection in lease.all():
            if not (keep and _reset(connection)):
                _close(connection)
                continue
            self._idle.setdefault((lease.key, kind), []).append(connection)
            self._idle.move_to_end((lease.key, kind))
        while self.idle() > KEPT_SESSIONS:  # the longest unused relay's first, oldest first
            oldest = next(iter(self._idle))
            _close(self._idle[oldest].pop(0))
            if not self._idle[oldest]:
                del self._idle[oldest]

    def close(self) -> None:
        """Every idle session closed (the supervisor has gone)."""
        for connections in self._idle.values():
            for connection in connections:
                _close(connection)
        self._idle.clear()

    def idle(self) -> int:
        """How many sessions are kept idle."""
        return sum(len(c) for c in self._idle.values())


def _open(kind: str, url: str, count: int) -> list[Any]:
    """``count`` new sessions of ``kind`` for ``url``, each socket above the floor (none if
    the server refuses one)."""
    if kind == DBOS:
        return open_sessions(url, _floor(), count, connect_timeout=CONNECT_TIMEOUT_S)
    with numbers_taken(_floor()):
        try:
            return [open_lock_session(Backend(url), CONNECT_TIMEOUT_S) for _ in range(count)]
        except Exception:  # (an older server without one of its settings): the child's own
            return []


def _floor() -> int:
    """``FLOOR``, or lower if this process may not open that many descriptors (an attempt's
    leader then keeps none it finds below its own numbers: ``connect_ahead``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return FLOOR if soft == resource.RLIM_INFINITY else min(FLOOR, soft - 64)


def _relay(request: dict[str, Any]) -> str | None:
    confine = request.get("confine") or {}
    relay = (confine.get("plan") or {}).get("relay")
    return str(relay) if relay else None


def _quiet(connection: Any) -> bool:
    """Whether nothing has arrived on ``connection``'s socket (nor has the server closed it)."""
    try:
        poller = select.poll()
        poller.register(connection.fileno(), select.POLLIN)
        return not poller.poll(0)
    except Exception:  # (a closed connection has no descriptor)
        return False


def _reset(connection: Any) -> bool:
    """A given-back session's reset (see the note): whether it answered a fresh nonce, then
    ``DISCARD ALL`` (after a ``ROLLBACK`` if the nonce's answer found it in a transaction),
    each in time, and is idle out of any transaction."""
    from psycopg import pq

    if connection.closed or not _quiet(connection):
        return False
    nonce = secrets.token_hex(16)
    deadline = time.monotonic() + RESET_LIMIT_S
    try:
        answer = _answer(connection, f"SELECT '{nonce}'", deadline)
        if [r.status for r in answer] != [pq.ExecStatus.TUPLES_OK] or answer[0].get_value(
            0, 0
        ) != nonce.encode():
            return False  # an answer to something else: the attempt's, late
        ok = [pq.ExecStatus.COMMAND_OK]
        in_transaction = connection.pgconn.transaction_status != pq.TransactionStatus.IDLE
        if in_transaction and [r.status for r in _answer(connection, "ROLLBACK", deadline)] != ok:
            return False
        if [r.status for r in _answer(connection, "DISCARD ALL", deadline)] != ok:
            return False
    except Exception:  # psycopg's (the session is gone), a timeout: never the parent's end
        return False
    return bool(connection.pgconn.transaction_status == pq.TransactionStatus.IDLE)


def _answer(connection: Any, statement: str, deadline: float) -> list[Any]:
    """Every result of ``statement`` sent on ``connection`` (the simple protocol), read by
    ``deadline`` (``TimeoutError`` if not)."""
    pgconn = connection.pgconn
    pgconn.send_query(statement.encode())
    while pgconn.flush():  # (a non-blocking connection may not have sent it all)
        if time.monotonic() > deadline:
            raise TimeoutError(statement)
        select.poll().poll(1)
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    results: list[Any] = []
    while True:
        while pgconn.is_busy():
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                raise TimeoutError(statement)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results
        results.append(result)


def _close(connection: Any) -> None:
    with contextlib.suppress(Exception):
        connection.close()


@contextlib.contextmanager
def _libpq_environment(variables: dict[str, str]) -> Any:
    """This process's ``PG*`` variables replaced by ``variables`` for a while (libpq reads them
    as it connects; the warm parent runs no other thread)."""
    saved = {k: v for k, v in os.environ.items() if k[:2] == "PG"}
    for name in saved:
        del os.environ[name]
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in variables:
            os.environ.pop(name, None)
        os.environ.update(saved)
