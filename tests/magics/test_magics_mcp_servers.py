"""``%%relay`` on a real shell refuses a relay that uses MCP when mcp_servers.yaml is invalid."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from tests.magics.relay_magic import magic

CELL = """\
from dbos import DBOS
from agentworks import mcp


@DBOS.workflow()
async def run(INPUT):
    return await mcp(server="docs", prompt="review", arguments={"text": INPUT})
"""


def test_a_cell_using_mcp_fails_admission_on_an_invalid_mcp_servers_yaml(ip: Any) -> None:
    """The cell is saved but refused with the file's coded line, not its own cell lines."""
    home = Path(os.environ["RELAY_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "mcp_servers.yaml").write_text("servers:\n  docs:\n    url: 8000\n")
    with pytest.raises(UsageError) as caught:
        magic(ip, "reader", CELL)
    message = str(caught.value)
    assert "../mcp_servers.yaml:3:0: error: The workspace's mcp_servers.yaml is invalid" in message
    assert "servers.docs.url must be the server's http:// or https:// address" in message
    assert "[mcp-servers-invalid]" in message
