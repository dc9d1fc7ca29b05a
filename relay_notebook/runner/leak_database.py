"""The supervisor's secret check of a run's SQLite database: every cell, scrubbed in place.

Design note: DBOS saves values as base64 pickles (or portable JSON), so each text or blob cell
is searched as stored and base64-decoded; a pickle's strings are read from its opcodes
(``pickletools``), never loaded. A cell holding a secret is replaced by the marker in the form
its readers decode (the pickle of ``[vault:NAME]``, or its JSON); then the file is vacuumed with
``secure_delete`` and its WAL truncated, so no freed page keeps the value. See
``runner.leak_check``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import pickle
import pickletools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from relay_notebook.record import dbos_tables
from relay_notebook.record.backend import Backend, app_name_for_run, connect
from relay_notebook.record.store import open_database
from relay_notebook.runner.leak_needles import Leak, Needles, marker

__all__ = ["check_database", "check_postgres", "marker", "read_file", "strings"]

#: the columns in which DBOS saves values (pickles or portable JSON)
_VALUES = frozenset({"output", "error", "inputs", "value", "message"})


def read_file(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def strings(value: Any) -> Iterator[str]:
    """The strings inside a JSON value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)


def _decoded(cell: str | bytes) -> bytes | None:
    try:
        return base64.b64decode(cell, validate=True) if cell else None
    except (binascii.Error, ValueError):
        return None


def _pickle_strings(data: bytes) -> list[str]:
    """The strings a pickle holds, read from its opcodes (nothing is loaded)."""
    out: list[str] = []
    try:
        for _, arg, _ in pickletools.genops(data):
            if isinstance(arg, str):
                out.append(arg)
            elif isinstance(arg, bytes):
                out.append(arg.decode("utf-8", "replace"))
    except Exception:  # a damaged pickle: the strings read so far are all there is
        pass
    return out


def _value_strings(cell: Any) -> list[str]:
    """The strings of a saved value (a pickle, base64-encoded, or portable JSON)."""
    if not isinstance(cell, str | bytes):
        return []
    data = _decoded(cell)
    if data is not None and data[:1] == b"\x80":
        return _pickle_strings(data)
    try:
        return list(strings(json.loads(cell)))
    except (ValueError, RecursionError):
        return []


def _replacement(cell: Any, needles: Needles, name: str) -> Any:
    """What a cell holding ``name``'s value becomes, in the form its readers decode."""
    if isinstance(cell, bytes):
        return needles.scrub(cell)
    data = _decoded(cell)
    if data is not None and data[:1] == b"\x80":
        return base64.b64encode(pickle.dumps(marker(name))).decode()
    try:
        json.loads(cell)
    except (ValueError, RecursionError):
        text = needles.scrub_text(cell)
        return text if data is None or not needles.find(data) else marker(name)
    return json.dumps(marker(name))


def _cell_label(table: str, column: str, row: dict[str, Any]) -> str:
    step, workflow = row.get("function_name"), row.get("name") or row.get("workflow_uuid")
    key = row.get("key") or row.get("topic")
    labels = {
        ("operation_outputs", "output"): f"the result of step {step}",
        ("operation_outputs", "error"): f"the error of step {step}",
        ("workflow_status", "output"): f"the result of workflow {workflow}",
        ("workflow_output", "output"): f"the result of workflow {workflow}",
        ("workflow_status", "error"): f"the error of workflow {workflow}",
        ("workflow_status", "inputs"): f"the input of workflow {workflow}",
        ("workflow_input", "inputs"): f"the input of workflow {workflow}",
        ("workflow_events", "value"): f"event {key} of workflow {workflow}",
        ("workflow_events_history", "value"): f"event {key} of workflow {workflow}",
        ("streams", "value"): f"stream {key} of workflow {workflow}",
        ("notifications", "message"): f"a message on topic {key}",
    }
    return labels.get((table, column)) or f"column {column} of DBOS table {table}"


def check_database(path: Path, needles: Needles, leak: Leak) -> None:
    """Every text and blob cell of every table; hits are rewritten, then the file vacuumed."""
    updates: list[tuple[str, str, Any, Any]] = []
    with open_database(path, live=False) as conn:
        if conn is None:
            return
        conn.execute("PRAGMA trusted_schema=OFF")
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            quoted = table.replace('"', '""')
            cursor = conn.execute(f'SELECT rowid, * FROM "{quoted}"')
            columns = [d[0] for d in cursor.description][1:]
            rows = {r[0]: dict(zip(columns, r[1:], strict=True)) for r in cursor}
            # one search over all of the table's cells; cell by cell only after a hit
            if needles.find(b"\n".join(_stored(c) for row in rows.values() for c in row.values())):
                updates += _cell_hits(table, rows, needles, leak)
            updates += _split_hits(table, rows, needles, leak)
    wal = path.with_name(path.name + "-wal")
    stored = read_file(path) + (read_file(wal) if wal.is_file() and not wal.is_symlink() else b"")
    if updates or leak.add(needles.find(stored), "the run's DBOS database (a freed page)"):
        _rewrite_database(path, updates)


#: the columns by which a row of DBOS's PostgreSQL tables names its workflow
_PG_KEYS = ("workflow_uuid", "destination_uuid")


def check_postgres(backend: Backend, run_id: str, needles: Needles, leak: Leak) -> None:
    """The run's rows in DBOS's PostgreSQL tables (those of its application's workflows),
    checked as the SQLite file's cells are; hits are rewritten in place and the tables
    vacuumed, so no dead row version keeps the value."""
    conn = connect(backend)
    try:
        app = app_name_for_run(run_id)
        found = conn.execute(dbos_tables.PG_APP_WORKFLOWS, (app,))
        ids = [r[0] for r in found.fetchall()]
        if not ids:
            return
        keyed = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'dbos' AND column_name = ANY(%s) ORDER BY table_name",
            (list(_PG_KEYS),),
        ).fetchall()  # every table of DBOS's schema with a row per workflow, whatever its version
        updates: list[tuple[str, str, Any, Any]] = []
        for table, key in keyed:
            cursor = conn.execute(
                f'SELECT ctid::text, * FROM dbos."{table}" WHERE "{key}" = ANY(%s)', (ids,)
            )
            columns = [d.name for d in cursor.description or ()][1:]
            rows = {r[0]: dict(zip(columns, r[1:], strict=True)) for r in cursor.fetchall()}
            if needles.find(b"\n".join(_stored(c) for row in rows.values() for c in row.values())):
                updates += _cell_hits(table, rows, needles, leak)
            updates += _split_hits(table, rows, needles, leak)
        for table, column, ctid, value in updates:
            conn.execute(
                f'UPDATE dbos."{table}" SET "{column}" = %s WHERE ctid = %s::tid', (value, ctid)
            )
        for table in sorted({u[0] for u in updates}):
            conn.execute(f'VACUUM dbos."{table}"')
    finally:
        conn.close()


def _stored(cell: Any) -> bytes:
    """A cell as stored and, when it is base64, decoded."""
    if not isinstance(cell, str | bytes) or not cell:
        return b""
    data = cell.encode("utf-8", "surrogatepass") if isinstance(cell, str) else cell
    decoded = _decoded(cell)
    return data if decoded is None else data + b"\n" + decoded


def _cell_hits(
    table: str, rows: dict[Any, dict[str, Any]], needles: Needles, leak: Leak
) -> list[tuple[str, str, Any, Any]]:
    updates = []
    for rowid, row in rows.items():
        for column, cell in row.items():
            found = needles.find(_stored(cell))
            if found is not None:
                leak.add(found, needles.scrub_text(_cell_label(table, column, row)))
                updates.append((table, column, rowid, _replacement(cell, needles, found[0])))
    return updates


def _split_hits(
    table: str, rows: dict[Any, dict[str, Any]], needles: Needles, leak: Leak
) -> list[tuple[str, str, Any, Any]]:
    """A secret cut across the strings of the table's saved values, in row order."""
    spans: list[tuple[Any, str, int, int]] = []  # (rowid, column, start, end)
    text: list[str] = []
    at = 0
    for rowid, row in rows.items():
        for column in _VALUES.intersection(row):
            for s in _value_strings(row[column]):
                spans.append((rowid, column, at, at + len(s)))
                text.append(s)
                at += len(s)
    hit = needles.find_split("".join(text))
    if hit is None:
        return []
    name, start, end = hit
    updates = []
    for rowid, column, a, b in spans:
        if a < end and b > start:
            row = rows[rowid]
            leak.add((name, "cut across saved values"), _cell_label(table, column, row))
            updates.append((table, column, rowid, _replacement(row[column], needles, name)))
    return updates


def _rewrite_database(path: Path, updates: list[tuple[str, str, Any, Any]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute("PRAGMA secure_delete=ON")  # freed pages are zeroed, not kept
        conn.execute("BEGIN IMMEDIATE")
        for table, column, rowid, value in updates:
            t, c = table.replace('"', '""'), column.replace('"', '""')
            conn.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid = ?', (value, rowid))
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
