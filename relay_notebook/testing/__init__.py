"""Public helpers for testing relays, and a pytest plugin for relay authors' own test suites.

The plugin (registered as ``relay_notebook`` under ``pytest11``, so installing the kit is
enough) gives three fixtures:

- ``relay_workspace``: an empty workspace in the test's temporary folder;
- ``relay_harness``: a ``relay_notebook.testing.harness.RelayHarness`` on it — ``save`` a relay
  (with scripted agent replies), ``run`` it (optionally ``crash=``), ``recover`` it, read
  ``logs`` and ``executions``, and ``crash_each`` it;
- ``relay_postgres``: a private PostgreSQL server for the session (skips the test when no
  PostgreSQL programs are installed).

The rest of this module is the throwaway PostgreSQL server. Design note: tests of the PostgreSQL
backend need a real server, and one that no other program shares, so that a test can kill
workers and count rows without surprises. The helper runs Debian's (or any) PostgreSQL binaries:
``initdb`` into a private folder, then ``postgres`` on a free loopback port with trust
authentication and its socket in the same folder. PostgreSQL refuses to run as root, so as root
the server runs as the ``postgres`` system user. Each test takes a fresh database of its own
(``server.database_url()``); DBOS creates it on first use.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "PostgresServer",
    "PostgresUnavailableError",
    "find_postgres_bin",
    "postgres_server",
    "relay_harness",
    "relay_postgres",
    "relay_workspace",
]


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server binaries on this machine (Debian: ``apt-get install postgresql``)."""


def find_postgres_bin() -> Path:
    """The folder holding ``initdb`` and ``postgres`` (newest installed version first)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    config = shutil.which("pg_config")
    candidates: list[str] = []
    if config:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run([config, "--bindir"], capture_output=True, text=True, check=True)
            candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "postgres").is_file():
            return Path(folder)
    raise PostgresUnavailableError(
        "PostgreSQL's server programs (initdb, postgres) are not installed. On Debian: "
        "apt-get install postgresql (make system-deps does it as root)."
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A running private server; ``database_url(name)`` names a database on it."""

    def __init__(self, folder: Path, port: int, user: str, process: subprocess.Popen[bytes]):
        self.folder = folder
        self.port = port
        self.user = user
        self.process = process

    def database_url(self, name: str | None = None) -> str:
        """A ``postgresql://`` URL for database ``name`` (a fresh unique name by default)."""
        name = name or f"relay_{uuid.uuid4().hex[:12]}"
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.process.poll() is None:
            # SIGINT: fast shutdown (SIGTERM's smart one waits for every client to leave, and a
            # pooled connection of the process that started the server never does)
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def postgres_server(*, fsync: bool = False) -> Iterator[PostgresServer]:
    """Start a private PostgreSQL server for the duration of the ``with`` block.

    ``fsync=False`` (the default) trades crash safety of the *server* for speed, which is
    what tests want; benchmarks comparing against bare DBOS run both on the same server.
    """
    bindir = find_postgres_bin()
    system_user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="relay-pg-"))
    data = folder / "data"
    # initdb and the server run in the folder, as the postgres user when we are root
    as_server: dict[str, Any] = {
        "env": {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
        "cwd": folder,
        "user": system_user.pw_uid if system_user else None,
        "group": system_user.pw_gid if system_user else None,
        "extra_groups": [] if system_user else None,
    }
    if system_user is not None:
        os.chown(folder, system_user.pw_uid, system_user.pw_gid)
    db_user = "relay"
    subprocess.run(
        [str(bindir / "initdb"), "-D", str(data), "-U", db_user, "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        **as_server,
    )
    port = _free_port()
    options = [
        "-c", f"port={port}",
        "-c", "listen_addresses=127.0.0.1",
        "-c", f"unix_socket_directories={folder}",
        "-c", "max_connections=300",
        "-c", f"fsync={'on' if fsync else 'off'}",
        "-c", "synchronous_commit=" + ("on" if fsync else "off"),
        "-c", "full_page_writes=" + ("on" if fsync else "off"),
    ]  # fmt: skip
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed with the server
    process = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(data), *options],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **as_server,
    )
    server = PostgresServer(folder, port, db_user, process)
    try:
        deadline = time.monotonic() + 30
        while True:
            ready = subprocess.run(
                [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-q"],
                check=False,
            )
            if ready.returncode == 0:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise PostgresUnavailableError(
                    "PostgreSQL did not start: "
                    + (folder / "server.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.1)
        yield server
    finally:
        server.stop()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


# -- the pytest plugin -------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - the helpers above work without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def relay_workspace(tmp_path: Path) -> Any:
        """An empty relay workspace in the test's temporary folder."""
        from relay_notebook.workspace import Workspace

        return Workspace(tmp_path / "relays")

    @pytest.fixture
    def relay_harness(relay_workspace: Any) -> Any:
        """A ``RelayHarness`` on ``relay_workspace``: save, run, crash, recover, assert."""
        from relay_notebook.testing.harness import RelayHarness

        return RelayHarness(relay_workspace)

    @pytest.fixture(scope="session")
    def relay_postgres() -> Iterator[PostgresServer]:
        """A private PostgreSQL server for the session; ``.database_url()`` gives a fresh
        database. Skips the test when PostgreSQL's programs are not installed."""
        try:
            find_postgres_bin()
        except PostgresUnavailableError as exc:
            pytest.skip(str(exc))
        with postgres_server() as server:
            yield server
