"""``%relay mcp`` on a real shell: the client configuration for the notebook's workspace."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.magics.relay_magic import magic


def test_relay_mcp_prints_the_mcp_servers_json_for_the_notebooks_workspace(
    ip: Any, tmp_path: Path
) -> None:
    """The printed JSON starts ``relay mcp`` with this kernel's Python on this workspace."""
    assert magic(ip, "mcp") is None
    server = json.loads(ip.last_stdout)["mcpServers"]["relay"]
    assert server["command"] == sys.executable
    home = str(tmp_path / "relays")
    assert server["args"] == ["-m", "relay_notebook.cli", "--home", home, "mcp"]
