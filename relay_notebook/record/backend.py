"""Where a run's DBOS state lives: its own SQLite file (the default) or a PostgreSQL database.

Design note: with ``RELAY_DATABASE_URL=postgresql://…`` every run of the workspace keeps its
DBOS state in one PostgreSQL system database, so any machine's worker can recover it. Three
rules keep that database as trustworthy as a run's private SQLite file:

* **One workspace per database.** Run ids (``invoice-3``) are DBOS workflow ids and are only
  unique within a workspace, so the kit records the workspace's id in the database on first
  use (schema ``relay_kit``) and refuses any other workspace.
* **One DBOS application per run.** A child launches DBOS with the application name
  ``relay-run-<run id>``. DBOS scopes recovery and dequeueing by application name, so a child
  can only ever pick up its own run's workflow, even when many children of one release share
  the database and its internal queue; history reads a run by the same name. DBOS requires
  application versions to be unique across the applications of a database, so the version
  is the release (or draft) hash followed by ``+<run id>`` (on SQLite it is the bare hash).
* **The password is live input, never a record.** ``run.json`` keeps the URL without its
  password; the full URL reaches a child through its stdin pipe, like vault values.

The supervisor talks to PostgreSQL with psycopg only (never DBOS): to create the database and
claim it for the workspace (``runner.backend``), for the run locks (``runner.locks``), and,
like history, to read a run's rows (``record.store``).
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from relay_notebook.errors import DatabaseUnavailableError, InvalidDatabaseUrlError

if TYPE_CHECKING:
    from relay_notebook.record.run_record import RunRecord
    from relay_notebook.workspace import Workspace

__all__ = [
    "ENV_VAR",
    "Backend",
    "app_name_for_run",
    "app_version_for_run",
    "backend_for_run",
    "connect",
    "database_error",
    "error_text",
    "resolve_backend",
    "workspace_backend",
]

ENV_VAR = "RELAY_DATABASE_URL"
_SCHEMES = {"postgresql", "postgres", "postgresql+psycopg"}
_APP_NAME = re.compile(r"[a-z0-9_-]{3,256}")
_SECRET_PARAMS = {"password", "sslpassword"}


@dataclass(frozen=True)
class Backend:
    """The system database of runs: ``url`` is ``None`` for per-run SQLite files."""

    url: str | None = None

    @property
    def is_postgres(self) -> bool:
        return self.url is not None

    @property
    def kind(self) -> str:
        return "postgresql" if self.url else "sqlite"

    @property
    def display(self) -> str | None:
        """The URL without its password: what run.json, logs and messages may show."""
        if self.url is None:
            return None
        parts = urlsplit(self.url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            netloc = f"{userinfo.split(':', 1)[0]}@{host}"
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in _SECRET_PARAMS])
        return urlunsplit(("postgresql", netloc, parts.path, query, ""))

    @property
    def password(self) -> str | None:
        if not self.url:
            return None
        parts = urlsplit(self.url)
        in_query = [v for k, v in parse_qsl(parts.query) if k in _SECRET_PARAMS]
        return parts.password or (in_query[0] if in_query else None)

    @property
    def libpq_url(self) -> str:
        """The URL as psycopg (libpq) takes it: no SQLAlchemy driver suffix."""
        assert self.url is not None
        parts = urlsplit(self.url)
        return urlunsplit(("postgresql", *parts[1:]))

    @property
    def dbos_url(self) -> str:
        return self.libpq_url

    def record(self) -> dict[str, Any] | None:
        """What run.json keeps about the database (nothing for SQLite)."""
        return {"kind": "postgresql", "url": self.display} if self.url else None

    def scrub(self, text: str) -> str:
        """``text`` with the password replaced, for messages built from driver errors."""
        secret = self.password
        return text.replace(secret, "***") if secret else text

    def sentence(self, text: str) -> str:
        """A driver error's ``text`` as one password-free sentence, ready for the next one."""
        detail = " ".join(self.scrub(text).split())
        return detail + (" " if detail.endswith((".", "?")) else ". ")


def resolve_backend(database_url: str | None = None) -> Backend:
    """``database_url`` (PostgreSQL), else (``None`` or empty) per-run SQLite files.

    The environment is read only by the boundaries (see ``relay_notebook.commands.settings``).
    """
    url = database_url
    if url is None or not url.strip():
        return Backend(None)
    url = url.strip()
    try:
        parts = urlsplit(url)
        usable = parts.scheme in _SCHEMES and bool(parts.hostname) and bool(parts.path.strip("/"))
        if usable:
            parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:  # e.g. an unclosed IPv6 bracket
        parts, usable = urlsplit(""), False
    if not usable:
        # never echo the value: it may carry a password
        shown = f"a {parts.scheme}: URL" if re.fullmatch(r"[a-z+]+", parts.scheme) else "a value"
        socket = ""
        if parts.scheme in _SCHEMES and not parts.hostname and parts.path.strip("/"):
            # libpq's own form for a server on a Unix socket (no host, or ``?host=/run/...``)
            socket = (
                " A server on a Unix socket is not supported: a confined run reaches its "
                "database over TCP, so give the server's TCP address (e.g. 127.0.0.1:5432)."
            )
        raise InvalidDatabaseUrlError(
            f"The database setting ({shown}) is not a usable PostgreSQL URL: expected "
            f"postgresql://USER@HOST:PORT/DBNAME "
            f"(from --database-url or {ENV_VAR}).{socket} Unset {ENV_VAR} to keep each run's "
            f"state in its own SQLite file."
        )
    return Backend(url)


def backend_for_run(run: RunRecord, current: Backend | None = None) -> Backend:
    """The database of ``run``; the live setting supplies a password.

    A run keeps the database it started with. ``current`` (the caller's setting, usually
    ``workspace_backend``) is used when it names the same database, since only it carries the
    password; without it the recorded URL (no password) is used.
    """
    record = run.database
    if not record:
        return Backend(None)
    live = current if current is not None else Backend(None)
    if live.is_postgres and live.display == record["url"]:
        return live
    return Backend(str(record["url"]))


def workspace_backend(workspace: Workspace, backend: Backend | None = None) -> Backend:
    """``backend`` if given, else the database ``workspace`` was opened with (its
    ``database_url`` setting, resolved at the boundary)."""
    if backend is not None:
        return backend
    return resolve_backend(workspace.database_url)


def app_version_for_run(source_hash: str, run_id: str) -> str:
    """The DBOS application version of a run on PostgreSQL (see the design note)."""
    return f"{source_hash}+{run_id}"


def app_name_for_run(run_id: str) -> str:
    """The DBOS application name of one run (lowercase; a short hash keeps case distinct)."""
    name = "relay-run-" + run_id.lower()
    if run_id != run_id.lower():
        name += "-" + hashlib.sha256(run_id.encode()).hexdigest()[:8]
    assert _APP_NAME.fullmatch(name), name
    return name


def connect(
    backend: Backend,
    *,
    autocommit: bool = True,
    dbname: str | None = None,
    keepalive: bool = False,
    connect_timeout: int = 10,
    options: str | None = None,
) -> Any:
    """A psycopg connection; ``DatabaseUnavailableError`` (password-free) when it fails.
    ``options``: server settings the session starts with (libpq's ``-c NAME=VALUE ...``)."""
    import psycopg

    kwargs: dict[str, Any] = {"autocommit": autocommit, "connect_timeout": connect_timeout}
    if keepalive:  # notice a dead server within about 25 s
        kwargs.update(keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3)
    if dbname is not None:
        kwargs["dbname"] = dbname
    if options is not None:
        kwargs["options"] = options
    try:
        return psycopg.connect(backend.libpq_url, application_name="relay_notebook", **kwargs)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError(
            f"Cannot connect to PostgreSQL at {backend.display}: {backend.sentence(str(exc))}"
            f"Start the server, or fix {ENV_VAR}."
        ) from None


def database_error(exc: BaseException) -> BaseException | None:
    """The driver's own error (sqlite3, psycopg) under ``exc`` if ``exc`` is one SQLAlchemy
    raised for a statement, else ``None``. SQLAlchemy's text for it adds the statement and
    its parameters (``[SQL: ...]``), which may hold a run's data: users see the driver's."""
    if "sqlalchemy" not in sys.modules:
        return None  # nothing imported SQLAlchemy, so nothing raised its errors
    from sqlalchemy.exc import StatementError

    if isinstance(exc, StatementError) and exc.orig is not None:
        return exc.orig
    return None


def error_text(exc: BaseException) -> str:
    """``str(exc)``; for a database error, the driver's message alone (``no such table:
    notifications``), never the SQL."""
    return str(database_error(exc) or exc)
