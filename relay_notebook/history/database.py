"""A run's DBOS database, opened for reading without changing a byte of the run folder.

A run on PostgreSQL is read through ``runner.backend``'s read-only reader; the rest of this
note is about SQLite files.

Design note: in WAL mode even a read-only SQLite connection writes: opening creates ``-wal``
and ``-shm`` files when they are absent, and a reader records its read mark in ``-shm``. A
run's history must read the same before and after, and leave nothing the next attempt would
find. So a database without a WAL (or with an empty one) is opened ``immutable``: SQLite then
takes no locks and touches no side file. While an attempt is live, the reader opens the files
in place, because sharing the writer's ``-shm`` is what keeps a reader consistent with it.
Otherwise (a finished or crashed attempt leaves its WAL behind, since the child ends with
``os._exit``) the database and its WAL are hard-linked into a private temporary folder, where
SQLite builds its own index; they are copied when the run folder is on another file system.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from relay_notebook.runner.backend import Backend, backend_for_run, open_postgres_run
from relay_notebook.runner.folders import RunFolder

__all__ = ["open_database", "open_run_database"]

_BUSY_TIMEOUT_S = 5.0


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"mode": "ro", **params}.items())
    return f"file:{quote(str(path))}?{query}"


def _wal_size(database: Path) -> int:
    try:
        return (database.parent / f"{database.name}-wal").stat().st_size
    except FileNotFoundError:
        return 0


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@contextlib.contextmanager
def open_database(database: Path, *, live: bool) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to ``database`` (``None`` before the run created it).

    ``live`` says an attempt may be writing right now; see the module's design note.
    """
    if not database.exists():
        yield None
        return
    if live:
        conn = sqlite3.connect(_uri(database), uri=True, timeout=_BUSY_TIMEOUT_S)
        try:
            yield conn
        finally:
            conn.close()
        return
    if _wal_size(database) == 0:
        conn = sqlite3.connect(_uri(database, immutable="1"), uri=True)
        try:
            yield conn
        finally:
            conn.close()
        return
    with tempfile.TemporaryDirectory(prefix="relay-history-") as private:
        view = Path(private) / "dbos.sqlite"
        _link_or_copy(database, view)
        wal = database.parent / f"{database.name}-wal"
        with contextlib.suppress(FileNotFoundError):  # checkpointed away since: the file has all
            _link_or_copy(wal, Path(private) / "dbos.sqlite-wal")
        conn = sqlite3.connect(_uri(view), uri=True, timeout=_BUSY_TIMEOUT_S)
        try:
            yield conn
        finally:
            conn.close()


@contextlib.contextmanager
def open_run_database(
    folder: RunFolder, meta: dict[str, Any], *, live: bool, backend: Backend | None = None
) -> Iterator[Any]:
    """A read-only connection to ``folder``'s run, wherever its DBOS state lives.

    A PostgreSQL run yields a reader scoped to the run's rows in a READ ONLY transaction;
    ``backend`` is the reader's database setting (it supplies the password).
    """
    backend = backend_for_run(meta, backend)
    if backend.is_postgres:
        with open_postgres_run(backend, folder.run_id) as reader:
            yield reader
        return
    with open_database(folder.database, live=live) as conn:
        yield conn
