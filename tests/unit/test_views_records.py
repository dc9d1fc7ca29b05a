"""Text and HTML views of run records: stable enough for nbval, made from real runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from relay_notebook import commands
from relay_notebook.history import list_runs, preview_recovery, read_run_log
from relay_notebook.views.records import (
    RecoveryPreviewView,
    RunListView,
    RunLogView,
    preview_text,
    run_log_text,
    runs_text,
)
from relay_notebook.workspace import Manifest, Workspace

RELAY = textwrap.dedent(
    """
    from dbos import DBOS
    from agentworks import agent


    @DBOS.step()
    async def ask(text):
        return await agent(name="clerk", user_message=text)


    @DBOS.step()
    async def double(x):
        return 2 * x


    @DBOS.workflow()
    async def run(INPUT):
        note = await ask("hello")
        return {"note": note, "out": [await double(x) for x in range(INPUT["n"])]}
    """
)


def crashed_then_recovered(home: Path) -> tuple[Workspace, str, str]:
    """A run crashed after its second double, and the texts read before and after recovery."""
    ws = Workspace(home)
    ws.save_draft("clerk", RELAY, Manifest(model="scripted:s.json"))
    (ws.relay_dir("clerk") / "s.json").write_text(json.dumps({"clerk": [{"content": "hi"}]}))
    first = commands.run(ws, "clerk", run_input={"n": 40}, crash="after:double#2").wait(120)
    assert first.status == "interrupted"
    preview = preview_text(preview_recovery(ws, first.run_id))
    assert commands.recover(ws, first.run_id).wait(120).status == "succeeded"
    return ws, preview, run_log_text(read_run_log(ws, first.run_id))


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Workspace, str, str]]:
    """The same crash and recovery in two workspaces."""
    return [crashed_then_recovered(tmp_path_factory.mktemp(f"twin{i}") / "relays") for i in (1, 2)]


def test_the_same_run_twice_gives_the_same_text(
    twins: list[tuple[Workspace, str, str]],
) -> None:
    """Two identical runs print identical logs and previews: no times, durations or paths."""
    (ws_a, preview_a, log_a), (ws_b, preview_b, log_b) = twins
    assert log_a == log_b and preview_a == preview_b
    assert runs_text(list_runs(ws_a)) == runs_text(list_runs(ws_b))
    for text in (log_a, preview_a):
        assert str(ws_a.home) not in text and " ms" not in text and ":" not in text.split()[0]


def test_the_log_text_is_concise(twins: list[tuple[Workspace, str, str]]) -> None:
    """Attempts, a shortened list of calls, reuse and the agent call are each one line."""
    _, _, text = twins[0]
    lines = text.splitlines()
    assert lines[0] == "run clerk-1 of clerk (draft): succeeded"
    assert lines[1] == "  DBOS SUCCESS · 2 attempts · 3 checkpoints reused"
    assert "      1  interrupted           executed 3, reused 0  crash after:double#2" in lines
    assert "steps of clerk-1: 41 calls" in lines
    assert "      …  11 more calls" in lines
    assert any(line.split()[:2] == ["3", "double"] and "reused in 2" in line for line in lines)
    assert lines[-2:] == ["platform calls: 1", "  agent 'clerk': done (call 1, attempt 1)"]
    assert len(lines) < 45


def test_the_preview_text_says_what_recovery_will_do(
    twins: list[tuple[Workspace, str, str]],
) -> None:
    """Before recovery: attempt 2, three checkpoints reused by name, nothing uncertain."""
    _, preview, _ = twins[0]
    assert preview.splitlines() == [
        "recovering clerk-1 starts attempt 2",
        "  reused: 3 checkpoints (ask, double, double #2)",
    ]


def test_views_have_plain_and_html_forms(twins: list[tuple[Workspace, str, str]]) -> None:
    """Each view's text/plain is its text; HTML adds durations."""
    ws, _, text = twins[0]
    log = read_run_log(ws, "clerk-1")
    bundle = RunLogView(log)._repr_mimebundle_()
    assert bundle["text/plain"] == text and repr(RunLogView(log)) == text
    assert "<table" in bundle["text/html"] and " ms</td>" in bundle["text/html"]
    runs = RunListView(list_runs(ws))._repr_mimebundle_()
    assert runs["text/plain"].splitlines()[1].split() == [
        "clerk-1",
        "draft",
        "succeeded",
        "attempts",
        "2",
        "reused",
        "3",
    ]
    assert "clerk-1" in runs["text/html"]
    preview = RecoveryPreviewView(preview_recovery(ws, "clerk-1"))._repr_mimebundle_()
    assert preview["text/plain"].startswith("recovering clerk-1 returns it as it was (succeeded)")


def test_no_runs_says_how_to_start_one() -> None:
    """An empty list tells the user what to type."""
    assert runs_text([]) == "no runs yet (start one with %relay run NAME)"
