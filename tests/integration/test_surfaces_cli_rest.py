"""The same bad inputs, deletes and broken drafts through the `relay` CLI and the REST API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.runner.run_input import MAX_INPUT_BYTES
from relay_notebook.workspace import Workspace
from tests.integration.test_rest_api import Server, start_server, stop_server
from tests.polling import wait_until
from tests.relays import relay_path, relay_source

BAD = relay_source("bad")
DEEP = "[" * 150 + "]" * 150
BIG = json.dumps({"blob": "x" * MAX_INPUT_BYTES})
SURROGATE = '{"text": "\\udcff"}'
#: (what, CLI arguments after `relay`, REST method, route, params, body)
BAD_INPUTS: list[tuple[str, list[str], str, str, dict[str, str], Any]] = [
    ("deep input", ["run", "nap", "--input", DEEP], "POST", "/relays/{name}/runs",
     {"name": "nap"}, {"input": json.loads(DEEP)}),
    ("input over 1 MiB", ["run", "nap", "--input-file", "{big}"], "POST",
     "/relays/{name}/runs", {"name": "nap"}, {"input": json.loads(BIG)}),
    ("lone surrogate input", ["run", "nap", "--input", SURROGATE], "POST",
     "/relays/{name}/runs", {"name": "nap"}, {"input": json.loads(SURROGATE)}),
    ("deep result", ["reconcile", "nap-1", "--result", DEEP], "POST",
     "/runs/{run_id}/reconcile", {"run_id": "nap-1"}, {"result": json.loads(DEEP)}),
    ("lone surrogate result", ["reconcile", "nap-1", "--result", SURROGATE], "POST",
     "/runs/{run_id}/reconcile", {"run_id": "nap-1"}, {"result": json.loads(SURROGATE)}),
]  # fmt: skip


def relay(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`relay --home HOME ARGS...` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "RELAY_DEBUG": ""},
        timeout=120,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A Jupyter server with the REST API on a workspace holding nap (with a run) and bad."""
    root = tmp_path_factory.mktemp("surfaces") / "root"
    ws = Workspace(root / "relays")
    ws.save_draft("nap", relay_source("nap"))
    ws.save_draft("bad", BAD)
    assert relay(ws.home, "run", "nap").returncode == 0
    srv = start_server(root)
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_the_cli_and_the_api_refuse_a_bad_input_with_the_same_code(
    server: Server, case: tuple[str, list[str], str, str, dict[str, str], Any]
) -> None:
    """A bad input is one CLI line with [invalid-input] and a 400 `invalid-input` from REST."""
    _, argv, method, route, params, body = case
    big = server.home.parent / "big.json"
    big.write_text(BIG)
    proc = relay(server.home, *(a.replace("{big}", str(big)) for a in argv))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith("relay: error: ")
    assert line.endswith("[invalid-input]"), line
    reply = server.call(method, route, params, body=body)
    assert reply.status == 400 and reply.body["error"]["code"] == "invalid-input"
    assert len(reply.body["error"]["message"]) < 400


def test_api_messages_name_api_routes(server: Server) -> None:
    """A REST refusal's hint is an API route, not a terminal command."""
    reply = server.call("GET", "/runs/{run_id}", {"run_id": "nap-99"})
    assert reply.status == 404
    message = reply.body["error"]["message"]
    assert "List runs with: GET relay/api/runs?relay=nap" in message
    assert "relay runs" not in message
    proc = relay(server.home, "logs", "nap-99")
    assert "List runs with: relay runs nap" in proc.stderr


def test_a_broken_draft_is_listed_broken_by_the_cli_and_the_api(server: Server) -> None:
    """`relay relays` and GET /relays mark the draft that fails admission, with its problem."""
    listed = {r["name"]: r for r in server.call("GET", "/relays").body}
    assert listed["nap"]["broken"] is False and listed["nap"]["problem"] is None
    assert listed["bad"]["broken"] is True
    problem = listed["bad"]["problem"]
    assert problem.startswith("relay.py:3:0: error:") and problem.endswith("]")
    proc = relay(server.home, "relays", "--json")
    assert {r["name"]: r for r in json.loads(proc.stdout)} == listed
    text = relay(server.home, "relays").stdout
    assert f"BROKEN: {problem}" in text
    runs = relay(server.home, "runs").stdout
    assert f"bad: broken draft: {problem} (all problems: relay check bad)" in runs
    assert json.loads(relay(server.home, "runs", "--json").stdout)  # still one JSON document


def wait_for_status(server: Server, run_id: str, status: str) -> None:
    """Poll the run until its status is ``status``."""
    wait_until(
        lambda: server.call("GET", "/runs/{run_id}", {"run_id": run_id}).body["status"] == status,
        what=f"run {run_id} to be {status}",
    )


def test_deletes_refuse_live_runs_and_keep_releases(server: Server) -> None:
    """DELETE refuses a live run (409) and a relay with runs; a deleted run keeps its release."""
    published = server.call("POST", "/relays/{name}/releases", {"name": "nap"}).body
    done = server.call("POST", "/relays/{name}/runs", {"name": "nap"}, body={"release": "v1"})
    server.finish(done.body["run_id"])
    live = server.call(
        "POST", "/relays/{name}/runs", {"name": "nap"},
        body={"release": "v1", "input": {"seconds": 60}},
    ).body["run_id"]  # fmt: skip
    wait_for_status(server, live, "running")
    refused = server.call("DELETE", "/runs/{run_id}", {"run_id": live})
    assert refused.status == 409 and refused.body["error"]["code"] == "run-locked"
    proc = relay(server.home, "delete", live)
    assert proc.returncode == 1 and proc.stderr.strip().endswith("[run-locked]")
    deleted = server.call("DELETE", "/runs/{run_id}", {"run_id": done.body["run_id"]})
    assert deleted.status == 200 and deleted.body["runs"] == [done.body["run_id"]]
    releases = server.call("GET", "/relays/{name}/releases", {"name": "nap"}).body
    assert [r["hash"] for r in releases] == [published["hash"]]
    assert relay(server.home, "verify", "nap", "v1").returncode == 0
    relay_refused = server.call("DELETE", "/relays/{name}", {"name": "nap"})
    assert relay_refused.status == 409
    assert relay_refused.body["error"]["code"] == "relay-has-runs"
    assert "DELETE relay/api/relays/nap?force=true" in relay_refused.body["error"]["message"]
    forced = server.call("DELETE", "/relays/{name}", {"name": "nap"}, query="?force=true")
    assert forced.status == 409 and forced.body["error"]["code"] == "run-locked"
    assert server.call("GET", "/relays/{name}", {"name": "nap"}).status == 200


def test_the_cli_deletes_a_run_and_then_the_relay(tmp_path: Path) -> None:
    """`relay delete RUN`, then `relay delete NAME` once it has no runs; ids are not reused."""
    home = tmp_path / "relays"
    assert relay(home, "check", str(relay_path("nap"))).returncode == 0
    assert relay(home, "run", "nap").returncode == 0
    refused = relay(home, "delete", "nap")
    assert refused.returncode == 1 and "relay delete nap --force" in refused.stderr
    assert refused.stderr.strip().endswith("[relay-has-runs]")
    proc = relay(home, "delete", "nap-1")
    assert proc.returncode == 0 and proc.stdout.startswith("run nap-1: deleted")
    assert relay(home, "runs", "nap", "--json").stdout.strip() == "[]"
    assert relay(home, "run", "nap", "--json").returncode == 0
    assert [r["run_id"] for r in json.loads(relay(home, "runs", "--json").stdout)] == ["nap-2"]
    proc = relay(home, "delete", "nap", "--force", "--json")
    assert json.loads(proc.stdout)["runs"] == ["nap-2"]
    assert json.loads(relay(home, "relays", "--json").stdout) == []
