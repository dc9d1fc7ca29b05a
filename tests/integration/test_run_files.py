"""Agent files on real runs: each call's execution/ folder, labelled, across crashes and reuse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from relay_notebook import commands
from relay_notebook.errors import RunFileNotFoundError, RunFileRefusedError
from relay_notebook.history.run_files import PREVIEW_LIMIT, run_file, run_files
from relay_notebook.magics import RelayMagics
from relay_notebook.workspace import Workspace
from tests.integration.test_agentworks_run import setup_relay
from tests.relays import relay_script, relay_source

RELAY = relay_source("agent_files")
SCRIPT = relay_script("agent_files")


@pytest.fixture
def recovered(workspace: Workspace) -> str:
    """A run whose second agent call died once and was recovered: the run id."""
    setup_relay(workspace, RELAY, SCRIPT)
    first = commands.run(workspace, "r").wait(120)
    assert first.status == "interrupted", first.error
    second = commands.recover(workspace, first.run_id).wait(120)
    assert second.status == "succeeded", second.error
    assert second.result == "checked"
    return first.run_id


def test_both_attempts_keep_their_call_folders(workspace: Workspace, recovered: str) -> None:
    """The killed call's folder stays, the re-run gets a new one, the reused call keeps its own."""
    files = run_files(workspace, recovered)
    got = [(c.folder, c.agent, c.attempt, c.has_receipt, c.reused_in) for c in files.calls]
    assert got == [
        ("call-1", "writer", 1, True, [2]),
        ("call-2", "checker", 1, False, []),
        ("call-3", "checker", 2, True, []),
    ]
    assert files.calls[1].key == files.calls[2].key  # the same call, made by two attempts
    assert [f.path for f in files.calls[1].files] == ["call-2/call.json"]
    assert [f.path for f in files.files] == ["checked-once", "note.txt"]
    assert files.calls[0].label.startswith("call-1 · agent writer · step ")
    assert files.calls[0].label.endswith("· attempt 1")


def test_previews_pretty_print_json_and_cut_big_files(workspace: Workspace, recovered: str) -> None:
    """A receipt is pretty-printed JSON; a big file is cut at the limit and says so."""
    receipt = run_file(workspace, recovered, "call-3/receipt.json")
    assert (receipt.kind, receipt.content_type) == ("json", "application/json")
    assert json.loads(receipt.text or "")["agent"] == "checker"
    execution = workspace.relay_dir("r") / "runs/iteration-1-hook/execution"
    (execution / "big.log").write_text("x" * (PREVIEW_LIMIT * 3))
    big = run_file(workspace, recovered, "big.log")
    assert big.truncated and len(big.text or "") == PREVIEW_LIMIT and big.size == PREVIEW_LIMIT * 3


def test_paths_outside_the_execution_folder_are_refused(
    workspace: Workspace, recovered: str, tmp_path: Path
) -> None:
    """Traversal, absolute paths, control files and symlinks out are refused; missing is 404."""
    execution = workspace.relay_dir("r") / "runs/iteration-1-hook/execution"
    (tmp_path / "outside.txt").write_text("secret")
    (execution / "link.txt").symlink_to(tmp_path / "outside.txt")
    for path in ("../run.json", "call-1/../../run.json", "/etc/passwd", "link.txt", ".relay_x"):
        with pytest.raises(RunFileRefusedError):
            run_file(workspace, recovered, path)
    with pytest.raises(RunFileNotFoundError):
        run_file(workspace, recovered, "call-9/receipt.json")
    assert "link.txt" not in [f.path for f in run_files(workspace, recovered).files]


def test_secrets_are_scrubbed_from_previews(workspace: Workspace, recovered: str) -> None:
    """A vault value a relay wrote to a file is never shown in its preview."""
    commands.vault_set(workspace, "TOKEN", "s3cr3t-value-42")
    execution = workspace.relay_dir("r") / "runs/iteration-1-hook/execution"
    (execution / "out.txt").write_text("token=s3cr3t-value-42\n")
    preview = run_file(workspace, recovered, "out.txt")
    assert "s3cr3t-value-42" not in (preview.text or "")


def test_the_terminal_lists_call_folders_and_logs_json_has_them(
    workspace: Workspace, recovered: str
) -> None:
    """`relay files RUN` prints labelled folders; `relay logs RUN --json` carries the same."""

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home), *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout

    text = cli("files", recovered)
    assert "call-2 · agent checker" in text and "no receipt" in text
    assert "note.txt" in text
    one = json.loads(cli("files", recovered, "call-3", "--json"))
    assert [c["folder"] for c in one["calls"]] == ["call-3"]
    log = json.loads(cli("logs", recovered, "--json"))
    assert [c["folder"] for c in log["files"]["calls"]] == ["call-1", "call-2", "call-3"]
    assert "call-1/receipt.json" in [f["path"] for f in log["files"]["calls"][0]["files"]]


def test_the_magic_shows_the_tree_and_previews(workspace: Workspace, recovered: str) -> None:
    """`%relay files RUN` shows every call folder; with CALL, only that one, with its receipt."""
    shell = InteractiveShell()
    shell.register_magics(RelayMagics(shell, home=str(workspace.home)))
    view = shell.run_line_magic("relay", f"files {recovered}")
    bundle = view._repr_mimebundle_()
    assert "call-1 · agent writer" in bundle["text/plain"]
    assert "call-3 · agent checker" in bundle["text/plain"]
    assert "KiB" not in bundle["text/plain"] and " B" not in bundle["text/plain"]
    one = shell.run_line_magic("relay", f"files {recovered} call-3")._repr_mimebundle_()
    assert "call-1" not in one["text/plain"]
    assert "&quot;agent&quot;: &quot;checker&quot;" in one["text/html"]


def test_the_run_views_node_details_name_each_calls_folder(
    workspace: Workspace, recovered: str
) -> None:
    """The run view's details of an agent node list the call folder its receipt names (the
    folders the files view shows): the reused writer call's call-1, the re-made checker's call-3."""
    from relay_notebook.history import overlay_run

    graph = overlay_run(commands.graph(workspace, "r"), commands.logs(workspace, recovered))
    folders = {
        call["name"]: call.get("folders")
        for node in graph.nodes
        for call in node.details.get("calls", [])
    }
    assert folders == {"agent:writer": ["call-1"], "agent:checker": ["call-3"]}
    listed = {c.folder for c in run_files(workspace, recovered).calls}
    assert {"call-1", "call-3"} <= listed
