"""Legacy run(INPUT, ctx) programs: ctx calls checkpointed at whole-call boundaries."""

from __future__ import annotations

import json
import textwrap

from relay_notebook import commands
from relay_notebook.history import read_run_log
from relay_notebook.runner import RunOutcome
from relay_notebook.workspace import Manifest, Workspace

LEGACY = textwrap.dedent(
    """
    # @relay node {"id": "start", "type": "input", "label": "Order"}
    # @relay node {"id": "clerk", "type": "agent", "label": "Clerk"}
    # @relay node {"id": "done", "type": "output", "label": "Receipt"}
    # @relay edge {"from": "start", "to": "clerk"}
    # @relay edge {"from": "clerk", "to": "done"}
    import os


    def charge(sku, key):
        with open("charges.log", "a") as fh:  # relative: the run's execution folder
            fh.write(f"{sku} {key}\\n")
        return {"charged": sku, "key": key}


    async def run(INPUT, ctx):
        token = ctx.vault("SHOP_TOKEN")
        note = await ctx.call_agent(name="clerk", user_message=INPUT["sku"])
        paid = await ctx.step("charge", charge, arguments={"sku": INPUT["sku"], "key": "k-1"},
                              replay_safe=INPUT.get("safe", False))
        return {"note": note, "paid": paid, "region": ctx.variables["region"],
                "token_len": len(token)}
    """
)


def setup(ws: Workspace, durability: str = "dbos") -> None:
    ws.save_draft(
        "shop",
        LEGACY,
        Manifest(
            relay_durability=durability,
            model="scripted:s.json",  # type: ignore[arg-type]
            variables={"region": "eu"},
        ),
    )
    (ws.relay_dir("shop") / "s.json").write_text(json.dumps({"clerk": [{"content": "ok"}]}))
    commands.vault_set(ws, "SHOP_TOKEN", "shop-secret-123")


def go(ws: Workspace, run_input: dict[str, object], crash: str | None = None) -> RunOutcome:
    out: RunOutcome = commands.run(ws, "shop", run_input=run_input, crash=crash).wait(120)
    return out


def charges(ws: Workspace) -> list[str]:
    path = ws.relay_dir("shop") / "runs/iteration-1-hook/execution/charges.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_legacy_program_runs_with_ctx(workspace: Workspace) -> None:
    """ctx.call_agent, ctx.step, ctx.vault and ctx.variables all work, each call a step."""
    setup(workspace)
    out = go(workspace, {"sku": "A"})
    assert out.status == "succeeded", out.error
    assert out.result == {
        "note": "ok",
        "paid": {"charged": "A", "key": "k-1"},
        "region": "eu",
        "token_len": 15,
    }
    steps = [s.name for s in read_run_log(workspace, out.run_id).steps]
    assert steps == ["agent:clerk", "step:charge"]
    for path in workspace.relay_dir("shop").rglob("*"):
        if path.is_file():
            assert b"shop-secret-123" not in path.read_bytes(), path


def test_a_checkpointed_agent_call_is_reused(workspace: Workspace) -> None:
    """A crash after the agent call: recovery reuses it and runs the service step once."""
    setup(workspace)
    first = go(workspace, {"sku": "A"}, crash="after:agent:clerk")
    assert first.status == "interrupted"
    second = commands.recover(workspace, first.run_id).wait(120)
    assert second.status == "succeeded" and second.reused == [1]
    assert charges(workspace) == ["A k-1"]


def test_an_interrupted_ctx_step_stops_for_reconciliation(workspace: Workspace) -> None:
    """A ctx.step cut off before its checkpoint is uncertain: recovery waits for a decision."""
    setup(workspace)
    first = go(workspace, {"sku": "A"}, crash="during:step:charge")
    assert first.status == "interrupted" and charges(workspace) == ["A k-1"]
    held = commands.recover(workspace, first.run_id).wait(120)
    assert held.status == "needs_reconciliation" and "step 'charge'" in held.error["message"]
    commands.reconcile(workspace, first.run_id, result={"charged": "A", "key": "k-1"})
    done = commands.recover(workspace, first.run_id).wait(120)
    assert done.status == "succeeded" and done.result["paid"] == {"charged": "A", "key": "k-1"}
    assert charges(workspace) == ["A k-1"]  # the service operation was not repeated


def test_a_replay_safe_ctx_step_runs_again(workspace: Workspace) -> None:
    """With replay_safe=True the interrupted service step simply runs again."""
    setup(workspace)
    first = go(workspace, {"sku": "A", "safe": True}, crash="during:step:charge")
    done = commands.recover(workspace, first.run_id).wait(120)
    assert done.status == "succeeded"
    assert charges(workspace) == ["A k-1", "A k-1"]


def test_durability_none_runs_once_and_cannot_be_recovered(workspace: Workspace) -> None:
    """relay_durability: none runs without DBOS; an interrupted run is not recoverable."""
    import pytest

    from relay_notebook.errors import NotDurableError

    setup(workspace, durability="none")
    out = go(workspace, {"sku": "B"})
    assert out.status == "succeeded" and out.result["paid"]["charged"] == "B"
    assert not (
        workspace.relay_dir("shop") / "runs/iteration-1-hook/.relay_dbos/dbos.sqlite"
    ).exists()
    first = go(workspace, {"sku": "C"}, crash="during:step:charge")
    assert first.status == "interrupted"
    with pytest.raises(NotDurableError, match="relay_durability: none"):
        commands.recover(workspace, first.run_id)


def test_the_annotations_draw_the_legacy_graph(workspace: Workspace) -> None:
    """A legacy program's # @relay comments become its flow graph."""
    setup(workspace)
    graph = commands.graph(workspace, "shop")
    assert graph.kind == "annotations"
    assert [n.id for n in graph.nodes] == ["start", "clerk", "done"]
