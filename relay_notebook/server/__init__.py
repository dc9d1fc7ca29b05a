"""The Jupyter server extension that makes relays API-callable: REST under the server's auth.

Enabled by ``jupyter-config/jupyter_server_config.d/relay_notebook.json`` (installed with the
wheel) or explicitly with ``--ServerApp.jpserver_extensions="{'relay_notebook.server': True}"``.
The routes are documented in ``openapi.yaml`` next to this file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay_notebook.server.app import RelayExtension

__all__ = ["OPENAPI_PATH", "RelayExtension"]

#: the OpenAPI 3.1 document of the REST API, shipped in the package
OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "relay_notebook.server", "app": RelayExtension}]
