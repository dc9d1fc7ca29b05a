"""A migrated, empty DBOS SQLite database that a run's first attempt starts from.

Design note: on a fresh SQLite file ``DBOS.launch`` spends about 50 ms creating DBOS's tables
(its migrations), on every run's first attempt and on the critical path of ``relay run``. The
schema depends only on the DBOS release and the SQLite library, so it is made once: a helper
forked from a warm parent (kit code only, never a relay, never confined because it needs to
write outside any run) launches DBOS on a scratch file, copies it with ``VACUUM INTO`` and
removes the one row DBOS's launch adds for its own application version, then renames the copy
into place. A child whose run has no database yet copies the template in (a copy, not a link:
the run owns its file); without a usable template it starts from an empty file as before. The
template lives in the user's cache (``$XDG_CACHE_HOME/relay_notebook``), which confined children
cannot write (Landlock and bubblewrap allow writes only inside their run), and it is named by a
hash of the DBOS modules that define the schema and the SQLite version, so a DBOS upgrade gets a
new one and a stale one is never used.

The cache is the user's, so the template is checked before use (``template_problem``): its
pages sound, its schema exactly what DBOS's migrations make (computed once per process on an
in-memory database), its migration version DBOS's latest, and no row in any other table. A
warm parent checks it once (``trust_template``) and keeps the file's identity (device, inode,
size, modification and change times); a child forked from it copies from the file it opened
only if that file still has this identity, so a template changed or replaced since the check
(any write moves its change time) is checked again, on the run's own copy. A spawned child, with
no check behind it, always checks its copy. A template that fails is not used (the run starts
from an empty file, as before there was one) and the warm parent's helper makes it again,
atomically (``make_template``). The template is in WAL mode already, as a run's database must
be, so a child does not rewrite its copy's header (about 5 ms on the path of every new run).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from urllib.parse import quote

from relay_notebook.runner.dbos_private import SCHEMA_FILES, sqlite_migrations

__all__ = [
    "copy_template",
    "make_template",
    "template_path",
    "template_problem",
    "trust_template",
]

#: the one table a template keeps a row in (DBOS's migration version)
_VERSIONS = "dbos_migrations"
#: part of the template's name: a template of another format (rollback journal) is not used
_FORMAT = b"journal_mode=wal"
Schema = frozenset[tuple[str, str, str]]
Identity = tuple[int, int, int, int, int]

#: the identity of the template file this process checked (``trust_template``), if any
_trusted: Identity | None = None


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@functools.cache
def expected_schema() -> tuple[Schema, int]:
    """What DBOS's SQLite migrations make (every table, index and trigger, with its SQL) and
    their number (the version a migrated database records), from an in-memory database."""
    migrations = sqlite_migrations()
    with contextlib.closing(sqlite3.connect(":memory:")) as conn:
        conn.execute(f"CREATE TABLE {_VERSIONS} (version INTEGER NOT NULL PRIMARY KEY)")
        for migration in migrations:
            for statement in migration.split(";"):
                if statement.strip():
                    conn.execute(statement)
        return _schema(conn), len(migrations)


def _schema(conn: sqlite3.Connection) -> Schema:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return frozenset((str(t), str(n), " ".join(str(q).split())) for t, n, q in rows)


def template_problem(path: Path) -> str | None:
    """Why the SQLite file at ``path`` is not a template a run may start from (``None``: it
    is): damaged, another schema than DBOS's migrations make, another migration version, or a
    row in any table but the version's. Read only; the file is left as it is."""
    try:
        with contextlib.closing(
            sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True)
        ) as conn:
            if conn.execute("PRAGMA quick_check").fetchone() != ("ok",):
                return "it is damaged"
            schema, latest = expected_schema()
            if _schema(conn) != schema:
                return "its schema is not the one DBOS's migrations make"
            versions = conn.execute(f"SELECT version FROM {_VERSIONS}").fetchall()
            if versions != [(latest,)]:
                return f"its migration version is {versions}, not {latest}"
            for _, table, _ in (e for e in schema if e[0] == "table" and e[1] != _VERSIONS):
                if conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
                    return f"its table {table} holds rows"
    except (sqlite3.Error, OSError) as exc:
        return f"it cannot be read as a database ({exc})"
    return None


@functools.cache
def template_path() -> Path | None:
    """Where the template for the installed DBOS lives (``None``: DBOS is not found)."""
    spec = importlib.util.find_spec("dbos")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    digest = hashlib.sha256(sqlite3.sqlite_version.encode() + _FORMAT)
    for name in SCHEMA_FILES:
        try:
            digest.update((package / name).read_bytes())
        except OSError:
            return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "relay_notebook"
    return cache / f"dbos-sqlite-{digest.hexdigest()[:16]}.db"


def trust_template() -> bool:
    """Check the template once for the children this process will fork (a warm parent): they
    copy it unchecked while the file keeps the identity it had when checked. Whether it passed."""
    global _trusted
    _trusted = None
    template = template_path()
    if template is None:
        return False
    try:
        fd = os.open(template, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        before = _identity(os.fstat(fd))
        # the file opened, by its descriptor: not whatever the name points at meanwhile
        if template_problem(Path(f"/proc/self/fd/{fd}")) is None and before == _identity(
            os.fstat(fd)
        ):
            _trusted = before
    finally:
        os.close(fd)
    return _trusted is not None


def copy_template(database: Path) -> bool:
    """Give a run's not-yet-created SQLite ``database`` the template's schema; whether it did.

    The copy is checked (``template_problem``) before it takes the database's name, unless it
    was copied from the very file this process's warm parent checked (``trust_template``): a
    template that is wrong is not used. A kill mid-copy leaves at most a ``.template`` part
    beside it, never a half database.
    """
    template = template_path()
    if template is None or database.exists():
        return False
    part = database.with_name(database.name + ".template")
    try:
        with open(template, "rb") as source:
            trusted = _trusted is not None and _identity(os.fstat(source.fileno())) == _trusted
            with open(part, "wb") as target:
                shutil.copyfileobj(source, target)
        if not trusted and template_problem(part) is not None:
            part.unlink()
            return False
        os.replace(part, database)
    except OSError:
        with contextlib.suppress(OSError):
            part.unlink()
        return False
    return True


def make_template() -> Path | None:
    """Make the template if it is missing or wrong (``template_problem``), replacing it
    atomically (kit code only; DBOS is launched in this process, so call it in a process of its
    own). Returns where it is, or ``None`` if it cannot be."""
    target = template_path()
    if target is None or (target.is_file() and template_problem(target) is None):
        return target
    from dbos import DBOS

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="relay-dbos-template-") as scratch:
        source = Path(scratch) / "dbos.sqlite"
        conn = sqlite3.connect(source)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()
        DBOS(
            config={
                "name": "relay-template",
                "system_database_url": f"sqlite:///{source}",
                "application_version": "template",
                "executor_id": "template",
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        conn = sqlite3.connect(source)
        try:
            conn.execute("VACUUM INTO ?", (str(part),))
        finally:
            conn.close()
    copy = sqlite3.connect(part)
    try:
        with copy:
            copy.execute("DELETE FROM application_versions")
        # a run's database is in WAL mode (runner.child): its copy needs no header rewrite
        copy.execute("PRAGMA journal_mode=WAL")
    finally:
        copy.close()  # the last connection: the WAL is checkpointed and removed
    problem = template_problem(part)
    if problem is not None:
        part.unlink()
        raise RuntimeError(f"no template made: the fresh DBOS database made for it {problem}")
    os.replace(part, target)
    return target
