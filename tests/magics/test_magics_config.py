"""The magics' settings as traitlets on a real IPython shell: ``%config RelayMagics.home``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.utils.capture import capture_output
from traitlets.config import Config

RELAYS = Path(__file__).parent.parent / "relays"


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
        configured.run_cell_magic("relay", "nap --no-graph", (RELAYS / "nap.py").read_text())
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
