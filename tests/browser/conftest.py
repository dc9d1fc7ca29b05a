"""Fixtures for the real-browser tests: JupyterLab on loopback and headless Debian Chromium.

The server runs as a subprocess in its own session (its process group is killed at the end),
with every Jupyter directory in a temporary folder and ``window.jupyterapp`` exposed so tests
can run Lab commands. Chromium is the system's (``apt-get install chromium``); Playwright is
only the driver, and never downloads a browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LABEXTENSION = Path(__file__).parents[2] / "relay_notebook" / "labextension" / "package.json"
STARTUP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LabServer:
    """A running JupyterLab: its URL, token, notebook folder and relay workspace."""

    url: str
    token: str
    root: Path
    home: Path
    process: subprocess.Popen[bytes]
    log: Path

    def lab_url(self, path: str) -> str:
        """The URL that opens ``path`` (relative to ``root``) in a fresh Lab workspace."""
        return f"{self.url}lab/tree/{path}?token={self.token}&reset"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the server's REST API with the token; the decoded JSON reply."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None


def _wait_ready(server: LabServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"JupyterLab exited with {server.process.returncode} before it was ready; "
                f"its log:\n{server.log.read_text(errors='replace')[-4000:]}"
            )
        try:
            server.api("GET", "api/status")
            return
        except OSError:
            time.sleep(0.2)  # polling the server's readiness, not waiting for an effect
    raise RuntimeError(
        f"JupyterLab did not answer within {STARTUP_TIMEOUT_S:.0f} s; its log:\n"
        f"{server.log.read_text(errors='replace')[-4000:]}"
    )


@pytest.fixture(scope="module")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder JupyterLab serves: notebooks here, the relay workspace in ``relays/``."""
    return tmp_path_factory.mktemp("lab")


@contextlib.contextmanager
def running_lab(root: Path, *, relay_api: bool = True) -> Iterator[LabServer]:
    """JupyterLab serving ``root`` on a free loopback port; ``relay_api`` enables the REST API."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed: run 'make system-deps' (apt-get install chromium)")
    if not LABEXTENSION.is_file():
        pytest.skip(
            "the JupyterLab extension is not built: run 'make setup' (pip install -e . builds it)"
        )
    root.mkdir(parents=True, exist_ok=True)
    state = root.parent / f"{root.name}-jupyter"
    for sub in ("config", "runtime", "settings", "workspaces", "app-settings"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "app-settings" / "overrides.json").write_text(
        json.dumps(
            {
                "@jupyterlab/apputils-extension:notification": {
                    "checkForUpdates": False,
                    "fetchNews": "false",
                }
            }
        )
    )
    home = root / "relays"
    port, token = _free_port(), "relay-browser-test"
    # this tree's build of the extension, ahead of any other installed (e.g. by another
    # checkout's `pip install -e .`): JupyterLab takes the first one it finds on JUPYTER_PATH
    data = state / "data"
    (data / "labextensions").mkdir(parents=True, exist_ok=True)
    mine = data / "labextensions" / "relay-notebook"
    if not mine.exists():
        mine.symlink_to(LABEXTENSION.parent, target_is_directory=True)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(state / "config"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "JUPYTER_PATH": os.pathsep.join(filter(None, [str(data), os.environ.get("JUPYTER_PATH")])),
        "RELAY_HOME": str(home),
    }
    log = state / "lab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).parents[1] / "jupyter_app.py"),  # python -m, minus a grammar
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.allow_root=True",
                f"--ServerApp.jpserver_extensions={{'relay_notebook.server': {relay_api}}}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.extension_manager=readonly",
                "--LabApp.news_url=None",
                f"--LabApp.user_settings_dir={state / 'settings'}",
                f"--LabApp.workspaces_dir={state / 'workspaces'}",
                f"--LabServerApp.app_settings_dir={state / 'app-settings'}",
            ],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LabServer(f"http://127.0.0.1:{port}/", token, root, home, process, log)
    try:
        _wait_ready(server)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture
def start_lab() -> Any:
    """``running_lab`` itself, for tests that need a server set up differently."""
    return running_lab


@pytest.fixture(scope="module")
def lab(lab_root: Path) -> Iterator[LabServer]:
    """JupyterLab on a free loopback port with the relay server extension enabled."""
    with running_lab(lab_root) as server:
        yield server


@pytest.fixture(scope="session")
def _chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """A headless Chromium with a fresh profile, driven by Playwright, and the event loop
    Playwright's sync API runs: one per test worker, shared by its browser modules (each serves
    its own JupyterLab on its own port, so origins, cookies and storage do not mix), whose
    later modules load JupyterLab's bundles from the profile's cache instead of fetching and
    compiling them again.

    Between sync calls Playwright leaves its loop marked running in the main thread, which
    makes every ``asyncio.run`` fail: the mark is held only while a browser module runs
    (``browser_context``), never across the other files a worker runs in between."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed: run 'make system-deps' (apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install -e '.[test]'"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        loop = asyncio.events._get_running_loop()
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
            viewport={"width": 1400, "height": 1000},
        )
        context.set_default_timeout(60_000)
        try:
            asyncio.events._set_running_loop(None)  # until a browser module takes it
            yield context, loop
        finally:
            asyncio.events._set_running_loop(loop)  # Playwright's own calls need it again
            context.close()


@pytest.fixture(scope="module")
def browser_context(_chromium: tuple[Any, Any]) -> Iterator[Any]:
    """The worker's Chromium for one browser module, with Playwright's loop marked running
    in the main thread for as long as the module drives it."""
    context, loop = _chromium
    asyncio.events._set_running_loop(loop)
    try:
        yield context
    finally:
        asyncio.events._set_running_loop(None)
