"""A step's guarantee confirmed by the run's record: a body killed mid-way ran again."""

from __future__ import annotations

from pathlib import Path

from relay_notebook import commands
from relay_notebook.history import overlay_run
from relay_notebook.views.svg import render_svg
from relay_notebook.workspace import Workspace

FIVE = (Path(__file__).parents[1] / "relays" / "five.py").read_text(encoding="utf-8")


def test_a_step_killed_during_its_body_is_marked_as_ran_again(workspace: Workspace) -> None:
    """--crash during:fetch#2, then recover: fetch#2's body ran in both attempts, so the fetch
    node's at-least-once badge says "ran again" (red), and add, never killed, does not."""
    workspace.save_draft("five", FIVE)
    first = commands.run(workspace, "five", run_input={"n": 3}, crash="during:fetch#2").wait(120)
    assert first.status == "interrupted"
    second = commands.recover(workspace, first.run_id).wait(120)
    assert second.status == "succeeded" and second.result == {"total": 30}
    log = commands.logs(workspace, first.run_id)
    twice = [f"{s['name']}#{s['occurrence']}" for s in log.steps if len(s["executed_in"]) > 1]
    assert twice == ["fetch#2"]  # the ground truth: the ledger's attempts per call
    graph = overlay_run(commands.graph(workspace, "five"), log)
    fetch, add = graph.node("step-fetch"), graph.node("step-add")
    assert fetch.details["guarantee"]["kind"] == "at_least_once"
    assert fetch.details["guarantee"]["ran_again"] == ["fetch#2"]
    assert "ran_again" not in add.details["guarantee"]
    assert "≥1× · ran again ×1" in render_svg(graph)
