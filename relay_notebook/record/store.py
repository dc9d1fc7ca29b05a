"""The one read-only opener of a run's DBOS store: its SQLite file or its PostgreSQL rows.

Every reader (history, the supervisor's checkpoint reads, the child before it launches DBOS)
opens a run's store here. On PostgreSQL a reader sees only the run's DBOS application, in a READ
ONLY transaction. A process that already holds a session to the database (the supervisor's run
lock) lends it to the readers of its thread with ``lend_session``: a new PostgreSQL session costs
the server about 9 ms of CPU, and a queued run's supervisor would otherwise open one more just to
settle the attempt. The rest of this note is about SQLite files.

Design note: in WAL mode even a read-only SQLite connection writes: opening creates ``-wal``
and ``-shm`` files when they are absent, and a reader records its read mark in ``-shm``. A
run's history must read the same before and after, and leave nothing the next attempt would
find. So a database without a WAL (or with an empty one) is opened ``immutable``: SQLite then
takes no locks and touches no side file. While an attempt is live and its ``-wal`` and ``-shm``
exist, the reader opens the files in place, because sharing the writer's ``-shm`` is what keeps
a reader consistent with it. A reader never creates them in place: SQLite run as root creates a
side file as root and gives it to the database's owner a moment later, and a sandboxed attempt
that opens it in that moment gets a read-only database ("attempt to write a readonly
database" at DBOS's launch, about one attempt in a few hundred with a live view open). An
attempt makes its side files itself before DBOS starts and keeps them until it ends
(``runner.child``); a process that writes a run's file in place as root gives it side files of
the owner's first (``give_side_files``). Otherwise (a finished or crashed attempt leaves its
WAL behind, since the child ends with ``os._exit``) the database and its WAL are hard-linked
into a private temporary folder, where SQLite builds its own index; they are copied when the run
folder is on another file system.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import secrets
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from relay_notebook.errors import RunRecordDamagedError
from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import Backend, app_name_for_run, backend_for_run, connect

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder
    from relay_notebook.record.run_record import RunRecord

__all__ = [
    "PostgresRunReader",
    "SchemaNotReadyError",
    "give_side_files",
    "lend_session",
    "open_database",
    "open_postgres_run",
    "open_run_database",
    "open_store",
    "replaced_database",
]

_BUSY_TIMEOUT_S = 5.0


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"mode": "ro", **params}.items())
    return f"file:{quote(str(path))}?{query}"


def _wal_size(database: Path) -> int:
    try:
        return (database.parent / f"{database.name}-wal").stat().st_size
    except FileNotFoundError:
        return 0


def _side_files(database: Path) -> tuple[Path, Path]:
    return (database.with_name(f"{database.name}-wal"), database.with_name(f"{database.name}-shm"))


def _has_side_files(database: Path) -> bool:
    return all(side.exists() for side in _side_files(database))


def replaced_database(database: Path) -> str | None:
    """Why a run's SQLite ``database`` is not to be opened, if it is a link (or anything but a
    regular file); ``None`` if it is a file or absent. The kit runs as root and would read (or,
    delivering a message, write) whatever a link points at, another workspace's run included;
    only the relay's own code, which may write its run's folder, can have put it there."""
    try:
        st = os.lstat(database)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    try:
        what = f"a link to {os.readlink(database)}"
    except OSError:
        what = "not a regular file"
    return (
        f"The run's database {database} is {what}, not the file its attempts wrote: the "
        f"relay's code replaced it, so it is not read (nor written). Start a new run, or "
        f"restore the file from a backup."
    )


def give_side_files(database: Path) -> None:
    """Before a process run as root opens a run's SQLite ``database`` in place to write: its
    missing ``-wal`` and ``-shm`` made empty and owned by the file's owner, each appearing whole
    under its name (see the design note). Nothing to do for another user, a file of root's or
    anything but a regular file. A precaution only: what the relay left in its folder (a name
    taken, a link) makes it give up, and SQLite then makes the file as before."""
    if os.geteuid() != 0:
        return
    try:
        st = os.lstat(database)
    except OSError:
        return
    if st.st_uid == 0 or not stat.S_ISREG(st.st_mode):
        return
    for side in _side_files(database):
        if os.path.lexists(side):
            continue
        part = side.with_name(f"{side.name}.{secrets.token_hex(8)}.part")
        with contextlib.suppress(OSError):
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.fchown(fd, st.st_uid, st.st_gid)
                os.fchmod(fd, st.st_mode & 0o666)
                with contextlib.suppress(FileExistsError):  # made meanwhile (by the attempt)
                    os.link(part, side)
            finally:
                os.close(fd)
                part.unlink()


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
    if not os.path.lexists(database):
        yield None
        return
    refused = replaced_database(database)
    if refused is not None:
        raise RunRecordDamagedError(refused)
    if live and _has_side_files(database):
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
def open_store(backend: Backend, database: Path, run_id: str, *, live: bool) -> Iterator[Any]:
    """A read-only connection to ``run_id``'s DBOS store: ``database`` (SQLite) unless
    ``backend`` is PostgreSQL (``None`` while there is nothing to read yet)."""
    if backend.is_postgres:
        with open_postgres_run(backend, run_id) as reader:
            yield reader
        return
    with open_database(database, live=live) as conn:
        yield conn


@contextlib.contextmanager
def open_run_database(
    folder: RunFolder, record: RunRecord, *, live: bool, backend: Backend | None = None
) -> Iterator[Any]:
    """A read-only connection to ``folder``'s run, wherever its DBOS state lives.

    A PostgreSQL run yields a reader scoped to the run's rows in a READ ONLY transaction;
    ``backend`` is the reader's database setting (it supplies the password).
    """
    backend = backend_for_run(record, backend)
    with open_store(backend, folder.database, folder.run_id, live=live) as conn:
        yield conn


# -- PostgreSQL ---------------------------------------------------------------------------------


class SchemaNotReadyError(sqlite3.OperationalError):
    """DBOS's tables are not (all) there yet: read as "nothing recorded yet", like SQLite's."""


_TABLE = re.compile(
    r"\b(FROM|JOIN)\s+(workflow_status|operation_outputs|workflow_events_history|workflow_events|"
    r"streams|notifications)\b"
)


class _Cursor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._cursor.fetchall())

    def fetchone(self) -> tuple[Any, ...] | None:
        row = self._cursor.fetchone()
        return tuple(row) if row is not None else None

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._cursor)


class PostgresRunReader:
    """One run's DBOS rows in PostgreSQL, queried with the SQL written for its SQLite file.

    ``FROM workflow_status`` / ``FROM operation_outputs`` (and the events, streams and messages
    tables) are rewritten to read only the rows of the run's DBOS application, ``?``
    placeholders become psycopg's, and the session is read-only.
    """

    def __init__(self, conn: Any, run_id: str) -> None:
        self._conn = conn
        app = app_name_for_run(run_id)  # [a-z0-9_-] only: safe as a literal
        workflows = dbos_tables.PG_APP_WORKFLOWS.replace("%s", f"'{app}'")
        mine = workflows.replace("SELECT workflow_uuid", "SELECT *", 1)
        self._views = {"workflow_status": f"({mine}) AS workflow_status"} | {
            table: f"(SELECT t.* FROM dbos.{table} t WHERE t.{column} IN ({workflows})) AS {table}"
            for table, column in dbos_tables.TABLES_BY_WORKFLOW.items()
        }

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        import psycopg

        text = _TABLE.sub(lambda m: f"{m[1]} {self._views[m[2]]}", sql).replace("?", "%s")
        try:
            return _Cursor(self._conn.execute(text, tuple(params)))
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
            # DBOS migrates a fresh database table by table while its first child launches
            raise SchemaNotReadyError(str(exc)) from None

    def close(self) -> None:
        self._conn.close()


#: a session this thread's readers may use instead of opening one: (its database URL, it)
_lent: contextvars.ContextVar[tuple[str, Any] | None] = contextvars.ContextVar(
    "relay_lent_session", default=None
)


@contextlib.contextmanager
def lend_session(backend: Backend | None, conn: Any) -> Iterator[None]:
    """Within the block, this thread's readers of ``backend``'s runs use ``conn``.

    ``conn`` is an open autocommit session to that database which nothing else uses meanwhile;
    each reader runs in a READ ONLY transaction on it, so the session's own state (a held
    advisory lock) is untouched. Nothing is lent for SQLite or without a session.
    """
    if backend is None or not backend.is_postgres or conn is None:
        yield
        return
    token = _lent.set((backend.libpq_url, conn))
    try:
        yield
    finally:
        _lent.reset(token)


def _borrowed(backend: Backend) -> Any:
    lent = _lent.get()
    if lent is None or lent[0] != backend.libpq_url or lent[1].closed or lent[1].broken:
        return None
    return lent[1]


@contextlib.contextmanager
def open_postgres_run(backend: Backend, run_id: str) -> Iterator[PostgresRunReader | None]:
    """A read-only reader of ``run_id``'s rows (``None`` before DBOS created its schema)."""
    borrowed = _borrowed(backend)
    if borrowed is not None:
        with borrowed.transaction():  # rolled back (and so ended) on any error
            borrowed.execute("SET TRANSACTION READ ONLY")
            yield _reader(borrowed, run_id)
        return
    conn = connect(backend, autocommit=False)
    try:
        conn.read_only = True  # every query runs in a READ ONLY transaction
        yield _reader(conn, run_id)
    finally:
        conn.close()


def _reader(conn: Any, run_id: str) -> PostgresRunReader | None:
    exists = conn.execute(dbos_tables.PG_SCHEMA_READY).fetchone()[0]
    return None if exists is None else PostgresRunReader(conn, run_id)
