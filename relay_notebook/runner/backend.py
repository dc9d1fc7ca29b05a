"""Preparing a PostgreSQL system database for a workspace's runs (see ``record.backend``).

The supervisor creates the database if missing, adds the kit's schema (``relay_kit``) and claims
the database for one workspace, since run ids are only unique within a workspace.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from relay_notebook.errors import DatabaseOwnedError, DatabaseUnavailableError
from relay_notebook.record.backend import (
    ENV_VAR,
    Backend,
    app_name_for_run,
    app_version_for_run,
    backend_for_run,
    connect,
    resolve_backend,
    workspace_backend,
)

__all__ = [
    "ENV_VAR",
    "KIT_SCHEMA",
    "Backend",
    "app_name_for_run",
    "app_version_for_run",
    "backend_for_run",
    "connect",
    "delete_run_workflows",
    "prepare_database",
    "resolve_backend",
    "workspace_backend",
]

KIT_SCHEMA = "relay_kit"
WORKSPACE_ID_FILE = ".relay_workspace_id"


def _ensure_database_exists(backend: Backend) -> None:
    import psycopg
    from psycopg import sql

    try:
        connect(backend).close()
        return
    except DatabaseUnavailableError as exc:
        if "does not exist" not in exc.message:
            raise
    name = urlsplit(backend.libpq_url).path.strip("/")
    with (
        connect(backend, dbname="postgres") as conn,
        # two first uses at once: the loser sees either error
        contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation),
    ):
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _workspace_id(home: Path) -> str:
    """The workspace's stable id, created on first use (whole before it is visible)."""
    path = home / WORKSPACE_ID_FILE
    with contextlib.suppress(FileNotFoundError):
        return path.read_text(encoding="utf-8").strip()
    home.mkdir(parents=True, exist_ok=True)
    draft = home / f"{WORKSPACE_ID_FILE}.{uuid.uuid4().hex}"
    draft.write_text(uuid.uuid4().hex + "\n", encoding="utf-8")
    try:
        os.link(draft, path)  # atomic, and refuses to replace: the first writer wins
    except FileExistsError:
        pass
    finally:
        draft.unlink()
    return path.read_text(encoding="utf-8").strip()


_prepared: set[tuple[str, str]] = set()

_KIT_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {KIT_SCHEMA};
CREATE TABLE IF NOT EXISTS {KIT_SCHEMA}.workspace (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    workspace_id text NOT NULL,
    home text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {KIT_SCHEMA}.worker_leases (
    executor_id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    concurrency integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
"""


def prepare_database(backend: Backend, home: Path) -> None:
    """Create the database and the kit's schema if missing, and claim it for this workspace."""
    workspace_id = _workspace_id(home)
    key = (backend.display or "", workspace_id)
    if key in _prepared:
        return
    _ensure_database_exists(backend)
    # concurrent first uses serialise on the lock (CREATE ... IF NOT EXISTS alone can race)
    with connect(backend) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('relay_kit.ddl', 0))")
        conn.execute(_KIT_DDL)
        conn.execute(
            f"INSERT INTO {KIT_SCHEMA}.workspace (workspace_id, home) VALUES (%s, %s) "
            "ON CONFLICT (only_row) DO NOTHING",
            (workspace_id, str(home)),
        )
        owner = conn.execute(f"SELECT workspace_id, home FROM {KIT_SCHEMA}.workspace").fetchone()
    if owner[0] != workspace_id:
        raise DatabaseOwnedError(
            f"PostgreSQL database {backend.display} holds the runs of another workspace "
            f"({owner[1]}); run ids are only unique within one workspace. Give workspace {home} "
            f"a database of its own: change the database name in {ENV_VAR}."
        )
    _prepared.add(key)


def delete_run_workflows(backend: Backend, run_id: str, also: Sequence[str] = ()) -> None:
    """Delete run ``run_id``'s workflow and its children from the PostgreSQL system database,
    with DBOS's own client (a deleted run leaves no rows for DBOS's tools to list), and the
    workflows ``also`` names (a half-made fork's forked child, not yet given its parent); a
    run on its own SQLite file has nothing here."""
    if not backend.is_postgres:
        return
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=backend.dbos_url)
    try:
        client.delete_workflows([run_id, *also], delete_children=True)
    finally:
        client.destroy()
