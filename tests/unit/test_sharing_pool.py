"""The pool of a PostgreSQL attempt's engine shares its sessions before it opens more
(``runner/dbos_engines.py``'s ``SharingPool``): a real SQLAlchemy pool, on SQLite connections
that count how many were opened (each stands for a backend the PostgreSQL server would start)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.pool import QueuePool
from sqlalchemy.util.queue import Queue

from relay_notebook.runner import dbos_engines
from relay_notebook.runner.dbos_engines import ENGINE_KWARGS, FREE_SESSIONS, sharing_pool


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Any]:
    opened: list[sqlite3.Connection] = []

    def connect() -> sqlite3.Connection:
        opened.append(sqlite3.connect(tmp_path / "db.sqlite", check_same_thread=False))
        return opened[-1]

    size, overflow = ENGINE_KWARGS["pool_size"], ENGINE_KWARGS["max_overflow"]
    made = sharing_pool()(
        connect, pool_size=size, max_overflow=overflow, timeout=ENGINE_KWARGS["pool_timeout"]
    )
    made.opened = opened
    yield made
    made.dispose()


def test_it_is_dboss_pool_and_what_it_overrides_is_still_there(pool: Any) -> None:
    """Canary: a ``QueuePool`` of DBOS's size, whose private ``_do_get`` it overrides and whose
    queue ``_pool`` (``get(block, timeout)``) it waits on."""
    assert isinstance(pool, QueuePool) and pool.size() == ENGINE_KWARGS["pool_size"]
    assert callable(QueuePool._do_get)
    assert isinstance(pool._pool, Queue)
    engine = dbos_engines.postgres_engine("postgresql://relay@127.0.0.1:5432/runs")
    assert isinstance(engine.pool, sharing_pool())


def test_the_first_sessions_open_at_once(pool: Any) -> None:
    held = [pool.connect() for _ in range(FREE_SESSIONS)]
    assert len(pool.opened) == FREE_SESSIONS
    for conn in held:
        conn.close()


def test_beyond_them_a_checkout_takes_a_session_given_back_instead_of_opening_one(
    pool: Any,
) -> None:
    """As DBOS's launch threads each want a session for a moment: the third waits for one."""
    held = [pool.connect() for _ in range(FREE_SESSIONS)]
    given = held.pop()
    raw = given.dbapi_connection
    timer = threading.Timer(dbos_engines.GROW_AFTER_S / 5, given.close)
    timer.start()
    third = pool.connect()
    timer.join()
    assert len(pool.opened) == FREE_SESSIONS  # no new session: the one given back
    assert third.dbapi_connection is raw
    for conn in (*held, third):
        conn.close()
    assert pool.checkedout() == 0


def test_under_lasting_demand_it_grows_as_dboss_pool_would(pool: Any) -> None:
    """None given back: each checkout opens a session after its wait, up to DBOS's size."""
    held = [pool.connect() for _ in range(FREE_SESSIONS + 3)]
    assert len(pool.opened) == FREE_SESSIONS + 3
    assert len({id(c.dbapi_connection) for c in held}) == FREE_SESSIONS + 3
    for conn in held:
        conn.close()
    again = [pool.connect() for _ in range(FREE_SESSIONS + 3)]  # kept: none opened again
    assert len(pool.opened) == FREE_SESSIONS + 3
    for conn in again:
        conn.close()
