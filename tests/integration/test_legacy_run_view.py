"""A legacy ``run(INPUT, ctx)`` program's run drawn on its ``# @relay`` annotations.

The seeds: "Agent ids (or ``call``) match ``ctx.call_agent(name=...)``. Runs overlay actual
named agent calls, status, tool receipts and returned outputs [...] Unmatched calls remain in the
run list. Script/decision nodes and conditional edges have no inferred execution status." The
run here is real (DBOS on the run's SQLite file, a scripted model); the picture is what the run
view and the side panel draw (``overlay_run`` of the graph the run is drawn on).
"""

from __future__ import annotations

import json

import pytest

from relay_notebook import commands
from relay_notebook.history import overlay_run
from relay_notebook.workspace import Manifest, Workspace

SOURCE = """\
# @relay node {"id": "order", "type": "input", "label": "Order"}
# @relay node {"id": "clerk", "type": "agent", "label": "Clerk"}
# @relay node {"id": "audit", "type": "agent", "label": "Auditor", "call": "auditor"}
# @relay node {"id": "pay", "type": "script", "label": "Charge the card"}
# @relay node {"id": "receipt", "type": "output", "label": "Receipt"}
# @relay edge {"from": "order", "to": "clerk"}
# @relay edge {"from": "clerk", "to": "audit"}
# @relay edge {"from": "audit", "to": "pay"}
# @relay edge {"from": "pay", "to": "receipt"}


def charge(sku):
    return {"charged": sku}


async def run(INPUT, ctx):
    note = await ctx.call_agent(name="clerk", user_message=INPUT["sku"])
    audit = await ctx.call_agent(name="auditor", user_message=note)
    paid = await ctx.step("charge", charge, arguments={"sku": INPUT["sku"]})
    return {"note": note, "audit": audit, "paid": paid}
"""


@pytest.fixture
def shop(workspace: Workspace) -> Workspace:
    """The workspace with the legacy program saved as ``shop``, its agents' answers scripted."""
    workspace.save_draft(
        "shop",
        SOURCE,
        Manifest(model="scripted:s.json"),  # type: ignore[arg-type]
    )
    answers = {"clerk": [{"content": "ok"}], "auditor": [{"content": "fine"}]}
    (workspace.relay_dir("shop") / "s.json").write_text(json.dumps(answers))
    return workspace


def _drawn(
    ws: Workspace, run_id: str
) -> tuple[dict[str, object], list[tuple[str, str, bool]], list[str]]:
    graph = overlay_run(commands.run_flow(ws, run_id).graph, commands.logs(ws, run_id))
    nodes = {n.id: n.details.get("status") for n in graph.nodes}
    edges = [(e.source, e.target, bool(e.taken)) for e in graph.edges]
    return nodes, edges, graph.notes


def test_a_legacy_run_lights_its_annotated_agents_input_and_output(shop: Workspace) -> None:
    """The agent nodes carry their calls (by id, or by ``call``), the input and output nodes
    (any ids) the run's start and end; the script node has no status; the ctx.step no node
    stands for is named in a note, not lost."""
    out = commands.run(shop, "shop", run_input={"sku": "A"}).wait(120)
    assert out.status == "succeeded", out.error
    nodes, edges, notes = _drawn(shop, out.run_id)
    assert nodes == {
        "order": "succeeded",
        "clerk": "succeeded",
        "audit": "succeeded",  # its call is "auditor", not its id
        "pay": None,  # code no call records: neither run nor "not reached"
        "receipt": "succeeded",
    }
    assert all(taken for _, _, taken in edges), edges  # the run went from the input to the end
    assert notes == [
        "1 step call of the run could not be placed on the flow graph (no # @relay node "
        "stands for it); see the run graph."
    ]


def test_a_legacy_run_crashed_after_its_first_agent_shows_where_it_stopped(
    shop: Workspace,
) -> None:
    """Crashed after the clerk's call: the clerk succeeded, the auditor and the output are
    still to come (``pending``: an interrupted run goes on when recovered); recovered, the
    clerk's call is reused and the rest ran."""
    first = commands.run(shop, "shop", run_input={"sku": "A"}, crash="after:agent:clerk").wait(120)
    assert first.status == "interrupted"
    nodes, edges, _ = _drawn(shop, first.run_id)
    assert nodes["order"] == "succeeded" and nodes["clerk"] == "succeeded"
    assert nodes["audit"] == nodes["receipt"] == "pending", nodes
    assert ("order", "clerk", True) in edges and ("audit", "pay", False) in edges
    done = commands.recover(shop, first.run_id).wait(120)
    assert done.status == "succeeded", done.error
    nodes, _, _ = _drawn(shop, first.run_id)
    assert nodes["clerk"] == "reused" and nodes["audit"] == nodes["receipt"] == "succeeded"
