"""The ``relay://`` resources: a run's record and log, a relay's flow graph and its source."""

from __future__ import annotations

import json
from typing import Any

from relay_notebook import commands
from relay_notebook.commands.api_requests import log_document
from relay_notebook.mcp_server.app import RelayMCPServer, Supervision

__all__ = ["RUN_URI", "register_resources"]

RUN_URI = "relay://runs/{run_id}"


def register_resources(server: RelayMCPServer, served: Supervision) -> None:
    """Add the resource templates to ``server``; they read ``served.workspace``."""
    ws = served.workspace

    def as_json(data: Any) -> str:
        return json.dumps(served.clean(data), indent=2)

    @server.resource(RUN_URI, name="run", mime_type="application/json")
    def run_resource(run_id: str) -> str:
        """A run's record (status, result, attempts, painted graph) and its typed log."""
        with served.relay_errors():
            return as_json(
                {"run": commands.run_detail(ws, run_id), "log": log_document(ws, run_id)}
            )

    @server.resource("relay://relays/{name}/graph", name="graph", mime_type="application/json")
    def graph_resource(name: str) -> str:
        """A relay's flow graph from its draft (relay-graph/v1)."""
        with served.relay_errors():
            return as_json(commands.graph_of_draft(ws.load_draft(name)).to_dict())

    @server.resource("relay://relays/{name}/source", name="source", mime_type="text/x-python")
    def source_resource(name: str) -> str:
        """A relay's draft source, its relay.py."""
        with served.relay_errors():
            return str(served.clean(ws.load_draft(name).source))
