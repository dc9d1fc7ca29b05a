"""JupyterLab in headless Chromium: the relay MIME renderers and the Relays side panel.

A notebook displays bundles holding ``application/vnd.relay.graph+json`` (and the runs type)
next to their SVG/HTML fallbacks; the tests assert that the extension's renderers draw them,
that nodes show their details on click, that saved outputs render again on reopening, that a
200-node graph renders (timed, reported, not asserted), and that the side panel lists relays
and runs, starts a crash test and recovers it. Screenshots go to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from relay_notebook import commands
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import open_notebook, reopen_notebook, run_all, write_notebook

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
# the ``lab`` fixture (conftest.py) gives a LabServer: url, token, root, home, api()
LabServer = Any
GRAPH_NODE = ".jp-RelayGraph svg g.relay-node"

SETUP_CELL = """\
import os
from IPython.display import display
from relay_notebook import commands
from relay_notebook.views.svg import render_svg
from relay_notebook.workspace import Workspace

ws = Workspace(os.environ["RELAY_HOME"])


def bundle(graph):
    return {
        "application/vnd.relay.graph+json": graph.to_dict(),
        "image/svg+xml": render_svg(graph),
        "text/plain": f"{graph.kind} graph of {graph.relay}: {len(graph.nodes)} nodes",
    }
"""

FLOW_CELL = 'display(bundle(commands.graph(ws, "invoice")), raw=True)'

RUN_GRAPH_CELL = """\
log = commands.logs(ws, {run_id!r})
run_graph = commands.graph(ws, "five")
run_graph.kind = "run"
for node in run_graph.nodes:
    records = [s for s in log.steps if s.name == node.details.get("name")]
    if node.type == "step" and records:
        node.details["status"] = "succeeded"
        node.details["reused"] = any(s.reused_in for s in records)
display(bundle(run_graph), raw=True)
"""

RUNS_CELL = """\
runs = [r.to_dict() for r in commands.runs(ws)]
display(
    {
        "application/vnd.relay.runs+json": {"runs": runs},
        "text/html": "<table class='fallback-runs'><tr><td>runs</td></tr></table>",
        "text/plain": f"{len(runs)} runs",
    },
    raw=True,
)
"""

BIG_CELL = 'display(bundle(commands.graph(ws, "big")), raw=True)'


def _load_relaygen() -> Any:
    spec = importlib.util.spec_from_file_location("relaygen", REPO / "benchmarks" / "relaygen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def workspace(lab: LabServer) -> Workspace:
    """The served workspace: invoice (flow graph), five (crashed then recovered), big (200)."""
    ws = Workspace(lab.home)
    ws.save_draft("invoice", (REPO / "tests" / "relays" / "invoice.py").read_text())
    ws.save_draft("five", (REPO / "tests" / "relays" / "five.py").read_text())
    ws.save_draft("big", _load_relaygen().generate_relay(200))
    return ws


@pytest.fixture(scope="module")
def recovered_run(workspace: Workspace) -> str:
    """A run of five that crashed after its first step and was recovered (one reused step)."""
    first = commands.run(workspace, "five", run_input={"n": 3}, crash="after:fetch").wait(120)
    assert first.status == "interrupted"
    second = commands.recover(workspace, first.run_id).wait(120)
    assert second.status == "succeeded"
    return first.run_id


def _duration(ms: float) -> str:
    """A duration as the extension's ``formatDuration`` words it."""
    if ms < 1000:
        return f"{round(ms)} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {int(ms % 60_000 // 1000):02d} s"


def _shot(page: Any, name: str) -> Path:
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path


@pytest.fixture(scope="module")
def demo_page(
    browser_context: Any, lab: LabServer, workspace: Workspace, recovered_run: str
) -> Iterator[Any]:
    """demo.ipynb opened in Lab, run all, rendered and saved."""
    write_notebook(
        lab.root / "demo.ipynb",
        [SETUP_CELL, FLOW_CELL, RUN_GRAPH_CELL.format(run_id=recovered_run), RUNS_CELL],
    )
    page = open_notebook(browser_context, lab, "demo.ipynb")
    run_all(page)
    page.wait_for_selector(".jp-RelayRunsOutput tr[data-run-id]")
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-RelayGraph[data-nodes]').length >= 2"
    )
    yield page
    page.close()


def test_graph_outputs_render_through_the_extension(
    demo_page: Any, workspace: Workspace, recovered_run: str
) -> None:
    """The flow graph, run graph and runs table are drawn by our renderers, not the fallbacks."""
    page = demo_page
    expected = len(commands.graph(workspace, "invoice").nodes)
    flow = page.locator(".jp-RelayGraph").first
    flow.locator("g.relay-node").first.wait_for()
    assert flow.locator("g.relay-node").count() == expected
    assert flow.locator("g.relay-edge path[marker-end]").count() > 0
    assert page.locator(".jp-OutputArea-output.jp-RenderedSVG").count() == 0
    assert page.locator(".fallback-runs").count() == 0
    run_graph = page.locator(".jp-RelayGraph").nth(1)
    assert run_graph.get_attribute("data-kind") == "run"
    assert run_graph.locator(".relay-node--status-succeeded").count() >= 1
    assert run_graph.locator(".relay-badge--reused").count() == 1
    row = page.locator(f'.jp-RelayRunsOutput tr[data-run-id="{recovered_run}"]')
    assert "succeeded" in row.inner_text()
    assert row.locator(".jp-RelayBadge--reused").inner_text() == "1 reused"
    flow.scroll_into_view_if_needed()
    _shot(page, "notebook_run_all.png")
    run_graph.scroll_into_view_if_needed()
    _shot(page, "notebook_run_graph.png")
    page.locator(".jp-RelayRunsOutput").screenshot(path=str(ARTIFACTS / "notebook_runs.png"))


def test_clicking_a_node_shows_its_details(demo_page: Any) -> None:
    """Clicking a node opens a panel with its type, label, source line and details JSON."""
    page = demo_page
    flow = page.locator(".jp-RelayGraph").first
    flow.scroll_into_view_if_needed()
    flow.locator('g.relay-node[data-node-id="step-extract_invoice"]').click()
    details = flow.locator(".jp-RelayGraph-details")
    details.wait_for(state="visible")
    text = details.inner_text()
    assert "step" in text and "extract_invoice" in text and "line" in text
    assert json.loads(details.locator(".jp-RelayGraph-json").inner_text())["name"] == (
        "extract_invoice"
    )
    assert flow.locator(".relay-node--selected").get_attribute("data-node-id") == (
        "step-extract_invoice"
    )
    _shot(page, "node_details.png")


def test_drag_pans_and_ctrl_wheel_zooms(demo_page: Any) -> None:
    """Dragging the graph moves it and Ctrl+wheel over it zooms in."""
    page = demo_page
    flow = page.locator(".jp-RelayGraph").first
    flow.scroll_into_view_if_needed()
    area = flow.locator(".jp-RelayGraph-viewport")
    viewport = flow.locator("g.relay-viewport")
    before = viewport.get_attribute("transform")
    scale = float(flow.get_attribute("data-scale") or "0")
    box = area.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] - 20, box["y"] + box["height"] - 20
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 60, y - 40, steps=5)
    page.mouse.up()
    assert viewport.get_attribute("transform") != before
    page.keyboard.down("Control")
    page.mouse.wheel(0, -400)
    page.keyboard.up("Control")
    page.wait_for_function(
        "s => parseFloat(document.querySelector('.jp-RelayGraph').dataset.scale) > s", arg=scale
    )


def test_saved_notebook_renders_its_outputs_again(
    demo_page: Any, browser_context: Any, lab: LabServer
) -> None:
    """Saved, closed and reopened without running, the notebook still shows graphs and runs."""
    demo_page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    demo_page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.context.model.dirty === false"
    )
    saved = nbformat.read(lab.root / "demo.ipynb", as_version=4)
    outputs = [out for cell in saved.cells for out in cell.get("outputs", [])]
    mimes = {key for out in outputs for key in out.get("data", {})}
    assert {"application/vnd.relay.graph+json", "application/vnd.relay.runs+json"} <= mimes
    page = reopen_notebook(browser_context, lab, "demo.ipynb", kernel_idle=False)
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-RelayGraph[data-nodes]').length >= 2"
    )
    # outputs render one after another: wait for the last kinds before counting
    page.wait_for_selector(".jp-RelayGraph .relay-badge--reused")
    page.wait_for_selector(".jp-RelayRunsOutput tr[data-run-id]")
    assert page.locator(".jp-RelayGraph").first.locator("g.relay-node").count() > 0
    assert page.locator(".jp-RelayGraph .relay-badge--reused").count() == 1
    assert page.locator(".jp-RelayRunsOutput tr[data-run-id]").count() >= 1
    assert page.locator(".jp-OutputArea-output.jp-RenderedSVG").count() == 0
    _shot(page, "saved_notebook_reopened.png")
    page.close()


def test_200_step_relay_graph_renders(
    browser_context: Any, lab: LabServer, workspace: Workspace, record_property: Any
) -> None:
    """The graph of a generated 200-step relay renders in full; its render time is reported."""
    graph = commands.graph(workspace, "big")
    write_notebook(lab.root / "big.ipynb", [SETUP_CELL, BIG_CELL])
    page = open_notebook(browser_context, lab, "big.ipynb")
    page.evaluate(
        """n => {
          const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
          window.__relay = {arrived: null, rendered: null};
          kernel.anyMessage.connect((_, {msg, direction}) => {
            const data = msg.content && msg.content.data;
            if (direction === 'recv' && data && data['application/vnd.relay.graph+json']
                && window.__relay.arrived === null) {
              window.__relay.arrived = performance.now();
            }
          });
          const seen = () => {
            const view = document.querySelector(`.jp-RelayGraph[data-nodes="${n}"]`);
            return view && view.querySelectorAll('g.relay-node').length === n;
          };
          const observer = new MutationObserver(() => {
            if (window.__relay.rendered === null && seen()) {
              observer.disconnect();
              // two frames: the drawing has been laid out and painted
              requestAnimationFrame(() => requestAnimationFrame(() => {
                window.__relay.rendered = performance.now();
              }));
            }
          });
          observer.observe(document.body, {childList: true, subtree: true});
        }""",
        len(graph.nodes),
    )
    run_all(page)
    page.wait_for_function("() => window.__relay.rendered !== null")
    timing = page.evaluate("() => window.__relay")
    assert timing["arrived"] is not None
    elapsed_ms = timing["rendered"] - timing["arrived"]
    view = page.locator(f'.jp-RelayGraph[data-nodes="{len(graph.nodes)}"]')
    assert view.locator("g.relay-node").count() == len(graph.nodes)
    assert view.locator("g.relay-edge").count() == len(graph.edges)
    record_property("render_ms_200_steps", round(elapsed_ms, 1))
    (ARTIFACTS / "render_timing.json").write_text(
        json.dumps(
            {
                "relay": "generate_relay(200)",
                "nodes": len(graph.nodes),
                "edges": len(graph.edges),
                "output_arrival_to_rendered_ms": round(elapsed_ms, 1),
            },
            indent=2,
        )
    )
    print(
        f"\n200-step relay graph ({len(graph.nodes)} nodes, {len(graph.edges)} edges): "
        f"{elapsed_ms:.0f} ms from output arrival to rendered"
    )
    view.scroll_into_view_if_needed()
    _shot(page, "graph_200_steps.png")
    page.close()


def test_side_panel_lists_relays_and_runs_a_crash_test_and_recovery(
    browser_context: Any, lab: LabServer, workspace: Workspace, recovered_run: str
) -> None:
    """The Relays panel lists the workspace, crash-tests five and recovers it with reused steps."""
    page = browser_context.new_page()
    page.goto(f"{lab.url}lab?token={lab.token}&reset")
    tab = page.locator('.jp-SideBar .lm-TabBar-tab[data-id="relay-panel"]')
    tab.click()
    panel = page.locator("#relay-panel")
    panel.locator('li[data-relay="five"]').wait_for()
    assert panel.locator(".jp-RelayPanel-message").is_hidden()
    names = panel.locator(".jp-RelayPanel-item .jp-RelayPanel-name").all_inner_texts()
    assert names == ["big", "five", "invoice"]
    panel.locator('li[data-relay="five"]').click()
    panel.locator(f'.jp-RelayRunList-item[data-run-id="{recovered_run}"]').wait_for()
    before = set(
        panel.locator(".jp-RelayRunList-item").evaluate_all(
            "rows => rows.map(r => r.dataset.runId)"
        )
    )
    panel.locator(".jp-RelayPanel-input").fill('{"n": 2}')
    panel.get_by_role("button", name="Crash test").click()
    new_row = panel.locator(".jp-RelayRunList-item").last
    page.wait_for_function(
        """known => {
          const runBox = document.querySelector('#relay-panel .jp-RelayPanel-run');
          return runBox && runBox.dataset.runId && !known.includes(runBox.dataset.runId)
            && runBox.querySelector('.jp-RelayBadge--interrupted');
        }""",
        arg=sorted(before),
    )
    run_id = panel.locator(".jp-RelayPanel-run").get_attribute("data-run-id")
    assert run_id is not None and run_id not in before
    assert new_row.get_attribute("data-run-id") == run_id
    panel.get_by_role("button", name="Recover").click()
    panel.locator(".jp-RelayPanel-run .jp-RelayBadge--succeeded").first.wait_for()
    page.wait_for_function(
        "() => document.querySelectorAll("
        "'#relay-panel .jp-RelayPanel-run .relay-badge--reused').length >= 1"
    )
    row = panel.locator(f'.jp-RelayRunList-item[data-run-id="{run_id}"]')
    row.locator(".jp-RelayBadge--reused").wait_for()
    assert "succeeded" in row.inner_text()
    # its duration is the time its two attempts ran, the wall time (the wait before the
    # Recover press included) beside, as `relay runs` words it
    summary = next(r for r in commands.runs(workspace, "five") if r.run_id == run_id)
    assert summary.active_ms is not None and summary.duration_ms is not None
    meta = row.locator(".jp-RelayRunList-meta").inner_text()
    shown = f"2 attempts · {_duration(summary.active_ms)} ({_duration(summary.duration_ms)} wall)"
    assert shown in meta, (meta, summary)
    reused_fetch = '.jp-RelayPanel-steps tr[data-step="fetch"] .jp-RelayBadge--reused'
    assert panel.locator(reused_fetch).count() >= 1
    _shot(page, "side_panel.png")
    page.close()


def test_side_panel_says_when_the_relay_api_is_missing(
    browser_context: Any, start_lab: Any, tmp_path: Path
) -> None:
    """Without the relay server extension the panel shows "relay API unavailable", not a crash."""
    with start_lab(tmp_path / "no-api", relay_api=False) as lab:
        page = browser_context.new_page()
        page.goto(f"{lab.url}lab?token={lab.token}&reset")
        page.locator('.jp-SideBar .lm-TabBar-tab[data-id="relay-panel"]').click()
        message = page.locator("#relay-panel .jp-RelayPanel-message")
        message.wait_for(state="visible")
        assert message.inner_text().startswith("relay API unavailable")
        assert "jupyter server extension enable relay_notebook.server" in message.inner_text()
        _shot(page, "side_panel_without_api.png")
        page.close()


def test_a_saved_agent_tutorial_shows_what_each_run_paid_and_did_not(
    browser_context: Any, lab: LabServer
) -> None:
    """Tutorial 15's saved outputs, reopened: each run header says its status and what its
    model calls paid and did not pay, as the saved run graphs record them, and those figures
    are the scripted model's own (40+8 tokens, then 61+12, at 2/8 USD per million)."""
    source = Path(__file__).parents[2] / "notebooks" / "15-openai-agents.ipynb"
    (lab.root / "agents.ipynb").write_bytes(source.read_bytes())
    saved = nbformat.read(source, as_version=4)
    headers = [
        out["data"]["application/vnd.relay.graph+json"]["run"]
        for cell in saved.cells
        for out in cell.get("outputs", [])
        if (out.get("data", {}).get("application/vnd.relay.graph+json") or {}).get("run")
    ]
    page = browser_context.new_page()
    page.goto(lab.lab_url("agents.ipynb"))
    page.wait_for_function(
        f"() => document.querySelectorAll('.jp-RelayRunHeader-usage').length >= {len(headers)}"
    )
    shown = page.locator(".jp-RelayRunHeader[data-run-id]").evaluate_all(
        """hs => hs.map(h => [h.dataset.runId, h.dataset.status,
             h.querySelector('.jp-RelayRunHeader-usage')?.textContent ?? null])"""
    )
    assert shown == [[h["run_id"], h["status"], h["usage"]] for h in headers], shown
    assert [s[:2] for s in shown] == [
        ["shop-1", "interrupted"],
        ["shop-1", "succeeded"],
        ["shop-2", "succeeded"],
    ]
    assert shown[1][2] == (
        "model calls: paid 2 calls, 101 in + 20 out tokens, 0.000362 USD; not paid (reused or "
        "copied) 1 call, 40 in + 8 out tokens, 0.000144 USD"
    )
    recovered = page.locator(".jp-RelayRunHeader[data-run-id]").nth(1)
    recovered.scroll_into_view_if_needed()
    recovered.screenshot(path=str(ARTIFACTS / "agent_cost_header.png"))
    page.close()


def test_a_saved_legacy_run_is_drawn_on_its_annotations(
    browser_context: Any, lab: LabServer
) -> None:
    """Tutorial 07's saved run of a legacy `run(INPUT, ctx)` program, reopened: its annotated
    input and output nodes are painted succeeded, its script node has no status (no call
    records script code), both edges are taken, and the note names the ctx.step no node stands
    for; as the saved run graph says."""
    source = Path(__file__).parents[2] / "notebooks" / "07-legacy-programs.ipynb"
    (lab.root / "legacy.ipynb").write_bytes(source.read_bytes())
    saved = nbformat.read(source, as_version=4)
    graphs = [
        out["data"]["application/vnd.relay.graph+json"]
        for cell in saved.cells
        for out in cell.get("outputs", [])
        if (out.get("data", {}).get("application/vnd.relay.graph+json") or {}).get("run")
    ]
    graph = graphs[0]
    page = browser_context.new_page()
    page.goto(lab.lab_url("legacy.ipynb"))
    view = page.locator(
        f'.jp-RelayGraph[data-kind="run"][data-nodes="{len(graph["nodes"])}"]'
    ).first
    view.locator("g.relay-node").first.wait_for()
    drawn = view.locator("g.relay-node").evaluate_all(
        """gs => gs.map(g => [g.dataset.nodeId,
             ([...g.classList].find(c => c.startsWith('relay-node--status-')) || '')
               .replace('relay-node--status-', '') || null])"""
    )
    assert drawn == [[n["id"], n.get("status")] for n in graph["nodes"]], drawn
    assert drawn == [["in", "succeeded"], ["shout", None], ["out", "succeeded"]]
    assert view.locator(".relay-edge--taken").count() == 2
    assert "no # @relay node stands for it" in view.inner_text()
    view.screenshot(path=str(ARTIFACTS / "legacy_run.png"))
    page.close()
