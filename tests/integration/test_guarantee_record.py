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
    twice = [f"{s.name}#{s.occurrence}" for s in log.steps if len(s.executed_in) > 1]
    assert twice == ["fetch#2"]  # the ground truth: the ledger's attempts per call
    graph = overlay_run(commands.graph(workspace, "five"), log)
    fetch, add = graph.node("step-fetch"), graph.node("step-add")
    assert fetch.details["guarantee"]["kind"] == "at_least_once"
    assert fetch.details["guarantee"]["ran_again"] == ["fetch#2"]
    assert "ran_again" not in add.details["guarantee"]
    assert "≥1× · ran again ×1" in render_svg(graph)


DURABLE = """from dbos import DBOS


@DBOS.step()
def draft(x):
    return {"draft": x}


@DBOS.workflow()
async def run(INPUT):
    d = draft(INPUT["x"])
    await DBOS.set_event_async("draft", d)
    await DBOS.sleep_async(0.2)
    answer = await DBOS.recv_async("approval", timeout_seconds=0.3)
    await DBOS.write_stream_async("progress", "done")
    return {"d": d, "answer": answer}
"""


def test_what_the_body_hands_to_dbos_is_drawn_recorded_once_and_painted(
    workspace: Workspace,
) -> None:
    """set_event, sleep, recv (with its timeout) and write_stream are nodes of their own types
    with the recorded-once badge; a run paints each one from DBOS's own rows (recv's timeout
    sleep is not mistaken for the sleep node)."""
    workspace.save_draft("appr", DURABLE)
    flow = commands.graph(workspace, "appr")
    drawn = [
        (n.id, n.type, n.label, n.details.get("guarantee", {}).get("badge")) for n in flow.nodes
    ]
    assert drawn == [
        ("input", "input", "input", None),
        ("step-draft", "step", "draft", "≥1×"),
        ("event-L12", "event", "event draft", "1×"),
        ("sleep-L13", "sleep", "sleep 0.2 s", "1×"),
        ("wait-L14", "wait", "wait for approval", "1×"),
        ("stream-L15", "stream", "stream progress", "1×"),
        ("output", "output", "output", None),
    ]
    out = commands.run(workspace, "appr", run_input={"x": 1}).wait(120)
    assert out.status == "succeeded" and out.result == {"d": {"draft": 1}, "answer": None}
    log = commands.logs(workspace, out.run_id)
    recorded = [s.name for s in log.steps]
    assert recorded == [
        "draft", "DBOS.setEvent", "DBOS.sleep", "DBOS.recv", "DBOS.sleep", "DBOS.writeStream",
    ]  # fmt: skip
    graph = overlay_run(flow, log)
    assert {n.id: n.details.get("status") for n in graph.nodes} == dict.fromkeys(
        [n.id for n in flow.nodes], "succeeded"
    )
    assert graph.node("sleep-L13").details["count"] == 1
