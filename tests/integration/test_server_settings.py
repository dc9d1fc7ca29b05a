"""The server extension's settings are traitlets: ``c.RelayExtension.*``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_rest_api import seed, start_server, stop_server


def test_server_traits_choose_the_database_and_confinement(
    tmp_path: Path, database_url: str
) -> None:
    """`--RelayExtension.database_url` and `--RelayExtension.confine=False`, with nothing in the
    environment, keep the API's runs in PostgreSQL and start their children unconfined."""
    root = tmp_path / "root"
    root.mkdir()
    seed(root / "relays")
    srv = start_server(
        root,
        f"--RelayExtension.database_url={database_url}",
        "--RelayExtension.confine=False",
    )
    try:
        run_id = srv.call(
            "POST", "/relays/{name}/runs", {"name": "five"}, body={"input": {"n": 2}}
        ).body["run_id"]
        run = srv.finish(run_id)
        assert run["status"] == "succeeded" and run["result"] == {"total": 10}
    finally:
        stop_server(srv)
    meta = json.loads((root / "relays/five/runs/iteration-1-hook/run.json").read_text())
    assert meta["database"] == {"kind": "postgresql", "url": database_url}
    assert meta["attempts"][0]["confined"] is False
    assert "confine setting" in meta["attempts"][0]["confinement"]["reason"]
