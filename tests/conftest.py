"""Shared fixtures: a fresh workspace per test and the example relays in tests/relays/."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay_notebook.commands.settings import Settings
from relay_notebook.runner.sandbox_plan import sandbox_probe
from relay_notebook.runner.warm import restart_warm_parent
from relay_notebook.testing import PostgresServer, postgres_server
from relay_notebook.workspace import Workspace
from tests.file_order import FileSeconds, order_longest_first
from tests.relays import relay_source

SERVERS = Path(__file__).parent / "servers"
ROOT = Path(__file__).resolve().parent.parent


# the tiers `make test-quick` leaves out, by where a test is and what it uses
def _tiers(item: pytest.Item) -> set[str]:
    path = Path(str(item.path)).resolve()
    found = set()
    if path.is_relative_to(ROOT / "tests" / "browser"):
        found.add("browser")
    if path.suffix == ".ipynb":
        found.add("notebook")
    if {"postgres", "database_url"} & set(getattr(item, "fixturenames", ())):
        found.add("postgres")
    if "fuzz" in path.name:
        found.add("fuzz")
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the slow tiers it belongs to (markers in pyproject.toml), and put
    the longest files first (tests/file_order.py)."""
    for item in items:
        for tier in _tiers(item):
            item.add_marker(getattr(pytest.mark, tier))
    order_longest_first(items)


_FILE_SECONDS = FileSeconds()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _FILE_SECONDS.add(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller sees every worker's reports
        _FILE_SECONDS.keep(session.config)


@pytest.fixture(autouse=True)
def _sqlite_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run on per-run SQLite files unless they ask for PostgreSQL themselves, whatever
    RELAY_DATABASE_URL the developer's shell holds."""
    monkeypatch.setenv("RELAY_DATABASE_URL", "")  # remembers the original, restored after
    monkeypatch.delenv("RELAY_DATABASE_URL")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test file that leaves an asyncio loop marked running in the main thread fails by name:
    every later ``asyncio.run`` in the worker would fail instead, far from the cause. Checked
    when the file's module fixtures are gone (a browser module's Playwright marks its loop
    running for as long as the module drives the browser)."""
    result = yield
    last_of_file = nextitem is None or nextitem.path != item.path
    if last_of_file and asyncio.events._get_running_loop() is not None:
        asyncio.events._set_running_loop(None)
        raise AssertionError(
            f"{item.path.name} left an asyncio event loop running in the main thread"
        )
    return result


@pytest.fixture(scope="session")
def warm_start() -> bool:
    """Whether runs fork from a warm parent (``RELAY_WARM_START=0`` runs the suite without);
    when on, this process's warm parent is started first, so every attempt is forked."""
    enabled = Settings.from_environment().warm_start
    if enabled:
        assert restart_warm_parent().wait_ready(120), "the warm parent did not start"
    return enabled


@pytest.fixture
def workspace(tmp_path: Path, warm_start: bool) -> Workspace:
    """An empty workspace in a fresh temporary folder."""
    return Workspace(tmp_path / "relays", warm_start=warm_start)


@pytest.fixture(params=["landlock", "sandbox"])
def confined(request: pytest.FixtureRequest, workspace: Workspace) -> tuple[str, Workspace]:
    """The workspace, with its attempts in the sandbox: forked from the warm parent
    (``landlock``) or spawned (``sandbox``, through ``runner.sandbox_exec``)."""
    if request.param == "sandbox":
        probe = sandbox_probe()
        if probe is None or not probe.get("namespaces"):
            pytest.skip(f"no namespaces for a spawned sandbox here: {probe}")
        return "sandbox", Workspace(workspace.home, warm_start=False)
    parent = restart_warm_parent()
    assert parent.wait_ready(120), "the warm parent did not start"
    if not parent.can_confine():
        pytest.skip(f"no Landlock or namespaces here: {parent.info}")
    return "landlock", Workspace(workspace.home, warm_start=True)


@pytest.fixture
def invoice_source() -> str:
    """The SPEC §2 invoice relay."""
    return relay_source("invoice")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One private PostgreSQL server for the session (see relay_notebook.testing).

    Missing binaries fail the test rather than skip it: ``make test`` installs them.
    """
    with postgres_server() as server:
        yield server


@pytest.fixture
def database_url(postgres: PostgresServer) -> str:
    """A fresh database on the session's server (DBOS and the kit create it on first use)."""
    return postgres.database_url()


@pytest.fixture
def with_orders_server(workspace: Workspace) -> Workspace:
    """A workspace declaring the test suite's MCP order server."""
    workspace.home.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVERS / "mcp_orders.py", workspace.home / "mcp_orders.py")
    (workspace.home / "mcp_servers.yaml").write_text(
        "servers:\n  orders:\n    command: python\n    args: [mcp_orders.py]\n"
        "    env: {ORDERS_DB: orders.json}\n"
    )
    return workspace
