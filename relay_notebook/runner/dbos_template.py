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

from relay_notebook.runner.dbos_private import SCHEMA_FILES

__all__ = ["copy_template", "make_template", "template_path"]

#: DBOS's tables that must be empty in a template (only its migration version is kept)
_EMPTY = ("workflow_status", "operation_outputs", "notifications", "workflow_events")


@functools.cache
def template_path() -> Path | None:
    """Where the template for the installed DBOS lives (``None``: DBOS is not found)."""
    spec = importlib.util.find_spec("dbos")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    digest = hashlib.sha256(sqlite3.sqlite_version.encode())
    for name in SCHEMA_FILES:
        try:
            digest.update((package / name).read_bytes())
        except OSError:
            return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "relay_notebook"
    return cache / f"dbos-sqlite-{digest.hexdigest()[:16]}.db"


def copy_template(database: Path) -> bool:
    """Give a run's not-yet-created SQLite ``database`` the template's schema; whether it did.

    A kill mid-copy leaves at most a ``.template`` part beside it, never a half database.
    """
    template = template_path()
    if template is None or database.exists() or not template.is_file():
        return False
    part = database.with_name(database.name + ".template")
    try:
        shutil.copyfile(template, part)
        os.replace(part, database)
    except OSError:
        with contextlib.suppress(OSError):
            part.unlink()
        return False
    return True


def make_template() -> Path | None:
    """Make the template if it is missing (kit code only; DBOS is launched in this process,
    so call it in a process of its own). Returns where it is, or ``None`` if it cannot be."""
    target = template_path()
    if target is None or target.is_file():
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
        if any(copy.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in _EMPTY):
            raise RuntimeError("a fresh DBOS database holds rows; no template made")
    finally:
        copy.close()
    os.replace(part, target)
    return target
