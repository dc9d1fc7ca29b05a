"""GET /runs/{id}/files and /files/{path} on a real Jupyter server: confined, capped, scrubbed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay_notebook import commands
from relay_notebook.history.run_files import PREVIEW_LIMIT
from relay_notebook.workspace import Workspace
from tests.integration.test_agentworks_run import setup_relay
from tests.integration.test_rest_api import (
    TOKEN,
    Reply,
    Server,
    start_server,
    stop_server,
    validate,
)
from tests.relays import relay_script, relay_source

ONE = "/runs/{run_id}/files/{path}"
SECRET = "s3cr3t-value-42"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server over a workspace with one recovered agent run (r-1) and a few planted files."""
    root = tmp_path_factory.mktemp("files") / "root"
    root.mkdir()
    ws = Workspace(root / "relays")
    setup_relay(ws, relay_source("agent_files"), relay_script("agent_files"))
    first = commands.run(ws, "r").wait(120)
    assert commands.recover(ws, first.run_id).wait(120).status == "succeeded"
    commands.vault_set(ws, "TOKEN", SECRET)
    execution = ws.relay_dir("r") / "runs/iteration-1-hook/execution"
    (execution / "big.log").write_text("y" * (PREVIEW_LIMIT * 2))
    (execution / "leak.txt").write_text(f"token={SECRET}\n")
    (root / "outside.txt").write_text("not the run's")
    (execution / "out-link.txt").symlink_to(root / "outside.txt")
    srv = start_server(root)
    try:
        yield srv
    finally:
        stop_server(srv)


def raw_get(server: Server, path: str) -> Reply:
    """GET a URL exactly as written (no quoting), validated against the one-file operation."""
    request = urllib.request.Request(f"{server.url}relay/api{path}")
    request.add_header("Authorization", f"token {TOKEN}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = Reply(response.status, dict(response.headers), json.load(response))
    except urllib.error.HTTPError as err:
        reply = Reply(err.code, dict(err.headers), json.loads(err.read()))
    validate(reply, "GET", ONE)
    return reply


def test_the_list_names_every_call_folder_and_its_attempt(server: Server) -> None:
    """Both attempts' folders of the re-run call are listed, labelled, and symlinks out are not."""
    reply = server.call("GET", "/runs/{run_id}/files", {"run_id": "r-1"})
    assert reply.status == 200
    calls = [(c["folder"], c["agent"], c["attempt"]) for c in reply.body["calls"]]
    assert calls == [("call-1", "writer", 1), ("call-2", "checker", 1), ("call-3", "checker", 2)]
    assert "out-link.txt" not in [f["path"] for f in reply.body["files"]]


def test_a_file_comes_with_its_content_type_and_a_pretty_preview(server: Server) -> None:
    """A receipt is JSON, pretty-printed; a path with its slash encoded works the same."""
    reply = server.call("GET", ONE, {"run_id": "r-1", "path": "call-3/receipt.json"})
    assert reply.status == 200
    assert (reply.body["content_type"], reply.body["kind"]) == ("application/json", "json")
    assert json.loads(reply.body["text"])["agent"] == "checker"
    assert raw_get(server, "/runs/r-1/files/call-3/receipt.json").body == reply.body


@pytest.mark.parametrize(
    "path",
    [
        "/runs/r-1/files/call-1/../../run.json",
        "/runs/r-1/files/..%2Frun.json",
        "/runs/r-1/files/%2e%2e/run.json",
        "/runs/r-1/files/%2E%2E%2F%2E%2E%2Fr.py",
        "/runs/r-1/files/%2Fetc%2Fpasswd",
        "/runs/r-1/files/out-link.txt",
        "/runs/r-1/files/.relay_ipc%2Fjournal.jsonl",
    ],
)
def test_paths_leading_out_of_execution_are_refused(server: Server, path: str) -> None:
    """Traversal (plain or encoded), absolute paths, symlinks out and kit files answer 400."""
    reply = raw_get(server, path)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "run-file-refused"
    assert "not the run's" not in json.dumps(reply.body)


def test_a_missing_file_is_a_404_that_says_how_to_list(server: Server) -> None:
    """A file that is not there answers 404 run-file-not-found, naming relay files."""
    reply = server.call("GET", ONE, {"run_id": "r-1", "path": "call-9/receipt.json"})
    assert reply.status == 404
    assert reply.body["error"]["code"] == "run-file-not-found"
    assert "relay files r-1" in reply.body["error"]["message"]
    gone = server.call("GET", "/runs/{run_id}/files", {"run_id": "r-9"})
    assert gone.status == 404 and gone.body["error"]["code"] == "run-not-found"


def test_big_files_are_cut_and_secrets_scrubbed(server: Server) -> None:
    """A big file's preview stops at the cap and says so; a vault value never comes back."""
    big = server.call("GET", ONE, {"run_id": "r-1", "path": "big.log"})
    assert big.body["truncated"] is True and len(big.body["text"]) == PREVIEW_LIMIT
    assert big.body["size"] == PREVIEW_LIMIT * 2
    leak = server.call("GET", ONE, {"run_id": "r-1", "path": "leak.txt"})
    assert leak.status == 200 and SECRET not in leak.body["text"]


def test_the_folder_of_the_killed_attempt_is_untouched(server: Server) -> None:
    """The killed attempt's call folder holds only its call.json, naming attempt 1."""
    reply = server.call("GET", ONE, {"run_id": "r-1", "path": "call-2/call.json"})
    marker = json.loads(reply.body["text"])
    assert (marker["agent"], marker["attempt"]) == ("checker", 1)
    assert Path(marker["key"]).parts[0] == "r-1"
