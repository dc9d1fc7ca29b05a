"""The live run view's state (statuses, reused badges, throttling) and the recovery lab widget."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from relay_notebook import commands
from relay_notebook.magics.lab import RecoveryLab
from relay_notebook.views.live import RunMonitor, Throttle
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.workspace import Workspace

RELAYS = Path(__file__).parents[1] / "relays"


def invoice_graph(workspace: Workspace):  # type: ignore[no-untyped-def]
    workspace.resolve_target(str(RELAYS / "invoice.py"))
    return commands.graph(workspace, "invoice")


def test_events_colour_the_flow_graph(workspace: Workspace) -> None:
    """Step events mark nodes running, succeeded or reused, and the summary follows the run."""
    monitor = RunMonitor("invoice-1", invoice_graph(workspace))
    monitor.apply({"kind": "attempt_start", "attempt": 2})
    monitor.apply({"kind": "step_reused", "step": "extract_invoice", "attempt": 2})
    monitor.apply({"kind": "step_start", "step": "review", "attempt": 2})
    doc = monitor.bundle()[GRAPH_MIME]
    by_id = {n["id"]: n for n in doc["nodes"]}
    assert by_id["step-extract_invoice"]["details"]["status"] == "reused"
    assert by_id["step-extract_invoice"]["details"]["reused"] is True
    assert by_id["step-review"]["details"]["status"] == "running"
    assert "status" not in by_id["agent-review"]["details"]
    monitor.apply({"kind": "step_end", "step": "review", "attempt": 2})
    monitor.apply({"kind": "attempt_end", "attempt": 2, "status": "succeeded"})
    assert monitor.summary() == "run invoice-1: succeeded (attempt 2), 1 checkpoints reused"
    text = monitor.bundle()["text/plain"]
    assert text.startswith("run invoice-1: succeeded") and "review" in text
    assert "reused" in monitor.bundle()["image/svg+xml"]


def test_throttle_coalesces_a_flood_and_keeps_the_final_state() -> None:
    """A thousand requests make at most a handful of pushes; flush always sends the last."""
    seen: list[int] = []
    state = {"n": 0}
    throttle = Throttle(lambda: seen.append(state["n"]), rate=20)

    def flood() -> None:
        for i in range(1, 1001):
            state["n"] = i
            throttle.request()

    worker = threading.Thread(target=flood)
    started = time.monotonic()
    worker.start()
    worker.join()
    throttle.flush()
    elapsed = time.monotonic() - started
    assert seen[-1] == 1000
    assert len(seen) <= 20 * elapsed + 3  # never more than 20 a second (plus edges)


def test_the_recovery_lab_widget_runs_a_scenario(workspace: Workspace) -> None:
    """Start and recover the after-checkpoint scenario from the lab's buttons."""
    lab = RecoveryLab(workspace)
    try:
        assert repr(lab) == "recovery lab: 5 scenarios"
        lab.scenario.value = "after-checkpoint"
        assert "--crash after:price" in lab.expect.value
        lab._safely(lab._start)
        assert "interrupted" in lab.report.value
        lab._safely(lab._recover)
        assert "interrupted → succeeded" in lab.report.value
        assert "plan reused" in lab.report.value and "price reused" in lab.report.value
        lab._safely(lab._recover)  # a finished run comes back as it was
        assert "orders created</th><td>1" in lab.report.value
        lab._in_background(lab._start)  # a button click: the kernel thread is not blocked
        assert all(b.disabled for b in lab._buttons)
        for _ in range(1200):
            if not any(b.disabled for b in lab._buttons):
                break
            time.sleep(0.05)
        assert "recovery-lab-2" in lab.report.value
    finally:
        lab.lab.service.stop()


def test_run_controls_show_a_selected_nodes_details(workspace: Workspace) -> None:
    """Picking a node in the run view's controls shows its prompt, model and line."""
    from relay_notebook.magics.runs import RunControls, RunView

    view = RunView(workspace, "invoice", invoice_graph(workspace), shell=None, output=None)
    controls = RunControls(view)
    assert repr(controls) == "relay controls for invoice"
    controls.node.value = "agent-extract"
    assert "Extract invoice fields as JSON." in controls.details.value
    assert "<th>line</th><td><code>8</code>" in controls.details.value
    controls.node.value = ""
    assert controls.details.value == ""


def test_mcp_calls_colour_their_node(workspace: Workspace) -> None:
    """An mcp:SERVER.TOOL step event marks the flow graph's MCP node."""
    workspace.save_draft(
        "m",
        "from dbos import DBOS\nfrom agentworks import mcp\n\n@DBOS.workflow()\n"
        "async def run(INPUT):\n"
        "    return await mcp(server='inventory', tool='stock', arguments={})\n",
    )
    monitor = RunMonitor("m-1", commands.graph(workspace, "m"))
    monitor.apply({"kind": "step_end", "step": "mcp:inventory.stock", "attempt": 1})
    (node,) = [n for n in monitor.bundle()[GRAPH_MIME]["nodes"] if n["type"] == "mcp"]
    assert node["details"]["status"] == "succeeded"
