"""The magics' settings as traitlets on a real IPython shell: ``%config RelayMagics.home``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.utils.capture import capture_output
from traitlets.config import Config

from tests.relays import relay_source


@pytest.fixture
def configured(ip: Any) -> Iterator[Any]:
    """The shell; whatever the test configures for RelayMagics is dropped afterwards."""
    try:
        yield ip
    finally:
        ip.config.RelayMagics = Config()
        ip.run_line_magic("reload_ext", "relay_notebook")


def test_config_home_moves_the_workspace(configured: Any, tmp_path: Path) -> None:
    """`%config RelayMagics.home = ...` sends later cells and commands to that workspace."""
    chosen = tmp_path / "configured"
    configured.run_line_magic("config", f"RelayMagics.home = {str(chosen)!r}")
    with capture_output():
        configured.run_cell_magic("relay", "nap --no-graph", relay_source("nap"))
        assert configured.run_line_magic("relay", "run nap --wait") == {"slept": 0}
    assert (chosen / "nap" / "relay.py").is_file()
    assert [r["run_id"] for r in configured.run_line_magic("relay", "runs --json")] == ["nap-1"]
    assert not (Path(os.environ["RELAY_HOME"]) / "nap").exists()  # the environment is unchanged


def test_a_profile_setting_holds_from_load(configured: Any, tmp_path: Path) -> None:
    """`c.RelayMagics.home` set before the extension loads is its workspace from the start."""
    configured.config.RelayMagics.home = str(tmp_path / "profile")
    configured.run_line_magic("reload_ext", "relay_notebook")
    magics = configured.magics_manager.registry["RelayMagics"]
    assert magics.home == str(tmp_path / "profile")
    assert magics.workspace.home == tmp_path / "profile"


def _magics(ip: Any) -> Any:
    return ip.magics_manager.registry["RelayMagics"]


def _nap_run(ip: Any) -> dict[str, Any]:
    """Save and run the nap relay; the run's run.json."""
    with capture_output():
        ip.run_cell_magic("relay", "nap --no-graph", relay_source("nap"))
        assert ip.run_line_magic("relay", "run nap --wait") == {"slept": 0}
    home = _magics(ip).workspace.home
    meta: dict[str, Any] = json.loads((home / "nap/runs/iteration-1-hook/run.json").read_text())
    return meta


def test_config_database_url_keeps_new_runs_in_postgresql(
    configured: Any, database_url: str
) -> None:
    """`%config RelayMagics.database_url = ...` puts the next run's DBOS state in PostgreSQL,
    and the kernel's environment is left as it was."""
    configured.run_line_magic("config", f"RelayMagics.database_url = {database_url!r}")
    meta = _nap_run(configured)
    assert meta["database"] == {"kind": "postgresql", "url": database_url}
    assert "RELAY_DATABASE_URL" not in os.environ


def test_a_bad_configured_database_url_is_refused_and_the_old_one_kept(
    configured: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A `%config` URL that is not postgresql:// is reported (as `%config` reports errors) with
    its code and without the URL; the magics keep the setting they had."""
    configured.run_line_magic("config", "RelayMagics.database_url = 'mysql://u:hunter2@h/db'")
    assert "not a usable PostgreSQL URL" in caplog.text and "[invalid-database-url]" in caplog.text
    assert "hunter2" not in caplog.text
    assert _magics(configured).database_url is None
    assert _magics(configured).workspace.database_url is None


def test_config_confine_false_runs_unconfined(configured: Any) -> None:
    """`%config RelayMagics.confine = False` starts the next attempt without bubblewrap, and
    the attempt says why."""
    configured.run_line_magic("config", "RelayMagics.confine = False")
    attempt = _nap_run(configured)["attempts"][0]
    assert attempt["confined"] is False
    assert "confine setting" in attempt["confinement"]["reason"]


def test_the_environment_is_read_when_the_extension_loads(
    configured: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RELAY_HOME, RELAY_DATABASE_URL and RELAY_CONFINE set before `%load_ext` are the magics'
    defaults (the tutorials rely on it); a change afterwards does not move them."""
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "from-env"))
    monkeypatch.setenv("RELAY_DATABASE_URL", "")
    monkeypatch.setenv("RELAY_CONFINE", "0")
    configured.run_line_magic("reload_ext", "relay_notebook")
    magics = _magics(configured)
    assert (magics.home, magics.database_url, magics.confine) == (
        str(tmp_path / "from-env"), "", False,
    )  # fmt: skip
    assert magics.workspace.home == tmp_path / "from-env" and magics.workspace.confine is False
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "later"))
    assert magics.workspace.home == tmp_path / "from-env"


def test_config_warm_start_false_spawns_and_doctor_says_why(configured: Any) -> None:
    """`%config RelayMagics.warm_start = False` spawns the next attempt under bubblewrap, and
    `%relay doctor` names the setting."""
    configured.run_line_magic("config", "RelayMagics.warm_start = False")
    report = configured.run_line_magic("relay", "doctor --json")
    assert report["start"] == "spawned" and "RELAY_WARM_START=0" in report["start_reason"]
    attempt = _nap_run(configured)["attempts"][0]
    assert attempt["confinement"]["mechanism"] != "landlock"
    with capture_output() as shown:
        configured.run_line_magic("relay", "doctor")
    assert shown.stdout.startswith("start: spawned (turned off by the warm_start setting")
    assert "\nconfinement: " in shown.stdout
