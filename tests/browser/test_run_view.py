"""The run view in real JupyterLab, read as a person reads it, checked against the run's record.

A notebook saves ``tests/relays/order.py`` (an if/else, a loop, a try) with ``%%relay``, crashes
a run after ``pack#2``, recovers it, runs a failing input and a live run; the tests read the
header (run id, status badge, attempt of the budget, why it stopped, what to type next), the
node colours (the untaken branch greyed, exact reused counts) and compare them with the ledger
and DBOS's rows through ``relay_notebook.commands.logs``. The header's buttons start new runs
whose views update to their final state; the saved notebook, reopened with its kernel shut
down, still shows the last header and colours and no "model not found". Screenshots go to
``tests/browser/artifacts/`` (the README's pictures come from there).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from relay_notebook import commands
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import notebook_run, open_panel, reopen_notebook, run_view

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
DOCS = REPO / "docs" / "images"
ORDER = (REPO / "tests" / "relays" / "order.py").read_text(encoding="utf-8")
BIG = '{"items": [{"sku": "a", "qty": 1, "unit": 50}, {"sku": "b", "qty": 1, "unit": 70}]}'
LabServer = Any

CELLS = [
    "%load_ext relay_notebook",
    "%%relay order\n" + ORDER,
    f"%relay run order --input '{BIG}' --crash after:pack#2 --wait",
    "%relay recover order-1 --wait",
    "%relay run order --input '{\"items\": []}' --wait",
    '%relay run order --input \'{"items": [{"sku": "c", "qty": 2, "unit": 5}]}\'',
]
#: the notebook is set up once the last cell's run has succeeded
LAST_RUN_DONE = '.jp-RelayRunHeader[data-run-id="order-3"][data-status="succeeded"]'


def _shot(page: Any, name: str, *, view: Any = None, full: bool = False) -> Path:
    """A screenshot of the page; with ``view``, also that view alone, which replaces the one in
    docs/images/ when ``RELAY_DOC_IMAGES=1`` (a plain test run leaves the checkout clean)."""
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=full)
    if view is not None:
        view.screenshot(path=str(ARTIFACTS / f"view_{name}"))
        if os.environ.get("RELAY_DOC_IMAGES") == "1":
            DOCS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ARTIFACTS / f"view_{name}", DOCS / name)
    return path


def _node_status(view: Any, node_id: str) -> str | None:
    classes = view.locator(f'g.relay-node[data-node-id="{node_id}"]').get_attribute("class") or ""
    found = re.search(r"relay-node--status-(\w+)", classes)
    return found.group(1) if found else None


@pytest.fixture(scope="module")
def order_page(browser_context: Any, lab: LabServer) -> Iterator[Any]:
    """order.ipynb opened in Lab and run all (the last run left going live)."""
    with notebook_run(browser_context, lab, "order.ipynb", CELLS, LAST_RUN_DONE) as page:
        yield page


def test_a_crashed_run_says_interrupted_and_what_to_type(order_page: Any, lab: LabServer) -> None:
    """After --crash after:pack#2 the header names the run, says interrupted and gives the
    exact magic to recover it; the nodes the run reached match the ledger."""
    view = run_view(order_page, 2)
    header = view.locator(".jp-RelayRunHeader")
    assert header.get_attribute("data-run-id") == "order-1"
    assert header.get_attribute("data-status") == "interrupted"
    text = header.inner_text()
    assert "interrupted" in text and "attempt 1 of 3" in text
    assert "crashed on purpose after pack#2 (--crash)" in text
    assert "%relay recover order-1" in text
    assert view.get_by_role("button", name="recover").is_enabled()
    assert _node_status(view, "step-pack") == "succeeded"
    assert _node_status(view, "step-ship") == "pending"  # the run can still go on
    view.scroll_into_view_if_needed()
    _shot(order_page, "run_view_interrupted.png", view=view)


def test_a_recovered_run_greys_the_untaken_branch_and_counts_reuse_per_call(
    order_page: Any, lab: LabServer
) -> None:
    """Recovered, the view shows succeeded on attempt 2 of 3, express shipping taken and
    standard greyed, and each node's reuse exactly as the run's record has it."""
    view = run_view(order_page, 3)
    header = view.locator(".jp-RelayRunHeader")
    assert header.get_attribute("data-status") == "succeeded"
    assert "attempt 2 of 3" in header.inner_text()
    log = commands.logs(Workspace(lab.home), "order-1")
    reused = {s.function_id for s in log.steps if 2 in s.reused_in}
    executed = {s.function_id for s in log.steps if 2 in s.executed_in}
    assert f"{len(executed)} executed" in header.inner_text()
    assert f"{len(reused)} reused" in header.inner_text()
    # total is 120 > 100: the first ship call (express, line 35) ran, the other never did
    assert _node_status(view, "step-ship") == "succeeded"
    assert _node_status(view, "step-ship-2") == "not_reached"
    assert _node_status(view, "step-notify-2") == "not_reached"  # nothing raised: no except
    packs = [s for s in log.steps if s.name == "pack"]
    assert all(list(s.reused_in) == [2] for s in packs)
    pack = view.locator('g.relay-node[data-node-id="step-pack"]')
    badge = pack.locator(".relay-badge--reused").text_content()
    assert badge == f"{len(packs)} of {len(packs)} reused"
    assert view.locator('g.relay-node[data-node-id="step-ship"] .relay-badge--reused').count() == 0
    ship = view.locator('g.relay-node[data-node-id="step-ship"]').text_content() or ""
    other = view.locator('g.relay-node[data-node-id="step-ship-2"]').text_content() or ""
    assert "STEP · L35" in ship and "STEP · L37" in other
    assert not view.get_by_role("button", name="recover").is_enabled()
    view.scroll_into_view_if_needed()
    _shot(order_page, "run_view_recovered.png", view=view)


def test_a_failed_run_shows_the_relays_exception_and_line(order_page: Any) -> None:
    """A failing input's view gives the exception and its relay.py line in the header and on
    the node where the run ended."""
    view = run_view(order_page, 4)
    header = view.locator(".jp-RelayRunHeader")
    assert header.get_attribute("data-status") == "failed"
    line = ORDER.splitlines().index('        raise ValueError("order has no items")') + 1
    error = header.locator(".jp-RelayRunHeader-error").inner_text()
    assert error == f"ValueError: order has no items (relay.py line {line})"
    assert "%relay logs" in header.inner_text()
    assert _node_status(view, "output") == "failed"
    assert _node_status(view, "step-price") == "not_reached"
    view.locator('g.relay-node[data-node-id="output"]').click()
    details = view.locator(".jp-RelayGraph-details")
    details.wait_for(state="visible")
    assert "order has no items" in details.inner_text()
    view.scroll_into_view_if_needed()
    _shot(order_page, "run_view_failed.png", view=view)


def test_a_live_run_view_reaches_its_final_state(order_page: Any, lab: LabServer) -> None:
    """The view of a run left going (no --wait) updates in place to what its record says."""
    view = run_view(order_page, 5)
    log = commands.logs(Workspace(lab.home), "order-3")
    assert log.run.status == "succeeded"
    assert _node_status(view, "step-ship") == "not_reached"  # 10 is not over 100
    assert _node_status(view, "step-ship-2") == "succeeded"
    label = view.locator('g.relay-node[data-node-id="loop-L32"]').text_content() or ""
    assert "×1" in label


def test_header_buttons_start_runs_whose_views_update(order_page: Any, lab: LabServer) -> None:
    """crash during ship from the recovered run's header starts a new run the view follows
    to interrupted; its recover button then takes it to succeeded, with its checkpoints
    reused as the record says."""
    view = run_view(order_page, 3)
    view.scroll_into_view_if_needed()
    view.locator(".jp-RelayRunHeader-step").select_option("ship")
    view.get_by_role("button", name="crash during").click()
    header = view.locator(".jp-RelayRunHeader")
    try:
        order_page.wait_for_selector(
            '.jp-RelayRunHeader[data-run-id="order-4"][data-status="interrupted"]',
            timeout=120_000,
        )
    except Exception:
        _shot(order_page, "run_view_button_failed.png")
        raise
    assert "crashed on purpose during ship" in header.inner_text()
    view.get_by_role("button", name="recover").click()
    order_page.wait_for_selector(
        '.jp-RelayRunHeader[data-run-id="order-4"][data-status="succeeded"]', timeout=120_000
    )
    log = commands.logs(Workspace(lab.home), "order-4")
    assert log.run.status == "succeeded"
    reused = sum(1 for s in log.steps if 2 in s.reused_in)
    assert f"{reused} reused" in header.inner_text() and reused == 3
    assert _node_status(view, "step-ship") == "succeeded"
    _shot(order_page, "run_view_button_recovered.png")


def test_fork_from_a_node_in_the_run_view(order_page: Any, lab: LabServer) -> None:
    """Clicking a call's node and "fork from ship#1" follows a new run to succeeded: its header
    names the parent, and the calls before ship are drawn copied, as the record says."""
    view = run_view(order_page, 5)
    view.scroll_into_view_if_needed()
    parent = view.locator(".jp-RelayRunHeader").get_attribute("data-run-id")
    view.locator('g.relay-node[data-node-id="step-ship-2"]').click()
    view.locator('.jp-RelayGraph-details button[data-call="ship#1"]').first.click()
    header = view.locator(".jp-RelayRunHeader")
    try:
        order_page.wait_for_function(
            """([el, parent]) => el.dataset.runId !== parent
                                 && el.dataset.status === 'succeeded'""",
            arg=[header.element_handle(), parent],
            timeout=120_000,
        )
    except Exception:
        _shot(order_page, "run_view_fork_failed.png")
        raise
    fork_id = header.get_attribute("data-run-id") or ""
    assert f"forked from {parent} at ship#1" in header.inner_text()
    log = commands.logs(Workspace(lab.home), fork_id)
    copied = [s.name for s in log.steps if s.copied_from == parent]
    assert copied == ["price", "pack"]
    assert _node_status(view, "step-price") == "copied"
    assert _node_status(view, "step-ship-2") == "succeeded"
    _shot(order_page, "run_view_fork.png", view=view)


def test_the_saved_notebook_reopens_without_a_kernel(
    order_page: Any, browser_context: Any, lab: LabServer
) -> None:
    """Saved and reopened with its kernel shut down, every view shows its last header and
    colours (a button's run included), and nothing reads "model not found"."""
    order_page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    order_page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.context.model.dirty === false"
    )
    saved = nbformat.read(lab.root / "order.ipynb", as_version=4)
    docs = [
        out["data"]["application/vnd.relay.graph+json"]
        for cell in saved.cells
        for out in cell.get("outputs", [])
        if "application/vnd.relay.graph+json" in out.get("data", {})
    ]
    assert [d["run"]["run_id"] for d in docs if "run" in d] == [
        "order-1",
        "order-4",
        "order-2",
        "order-5",
    ]
    assert all("application/vnd.jupyter.widget-view+json" not in json.dumps(d) for d in docs)
    page = reopen_notebook(browser_context, lab, "order.ipynb", kernel_idle=False)
    page.wait_for_function("() => document.querySelectorAll('.jp-RelayRunHeader').length >= 4")
    assert page.get_by_text("model not found").count() == 0
    assert run_view(page, 2).locator(".jp-RelayRunHeader").get_attribute("data-status") == (
        "interrupted"
    )
    assert run_view(page, 3).locator(".jp-RelayRunHeader").get_attribute("data-run-id") == "order-4"
    assert _node_status(run_view(page, 3), "step-ship-2") == "not_reached"
    _shot(page, "run_view_reopened.png")
    page.close()


def test_the_side_panels_run_graph_uses_the_same_call_sites(
    order_page: Any, browser_context: Any, lab: LabServer
) -> None:
    """The Relays panel's graph of the recovered run greys the untaken ship and the unused
    except path exactly as the notebook's view does (the server paints it with overlay_run)."""
    page, panel = open_panel(browser_context, lab, "order")
    panel.locator('.jp-RelayRunList-item[data-run-id="order-1"]').click()
    graph = panel.locator(".jp-RelayPanel-run .jp-RelayGraph")
    graph.locator('g.relay-node[data-node-id="step-ship-2"]').wait_for()
    assert _node_status(graph, "step-ship") == "succeeded"
    assert _node_status(graph, "step-ship-2") == "not_reached"
    assert _node_status(graph, "step-notify-2") == "not_reached"
    assert _node_status(graph, "step-pack") == "reused"
    _shot(page, "side_panel_run_graph.png")
    page.close()


def test_the_first_draw_fits_the_whole_graph_centred(order_page: Any) -> None:
    """On first draw every node and edge label lies inside the view (none cut off at the
    bottom or the left edge), and the drawing is centred in the output's width."""
    view = run_view(order_page, 2)
    view.scroll_into_view_if_needed()
    box = view.locator(".jp-RelayGraph-viewport").evaluate(
        """area => {
          const a = area.getBoundingClientRect();
          const parts = [...area.querySelectorAll('g.relay-node, text.relay-edge-label')]
            .map(e => e.getBoundingClientRect());
          const left = Math.min(...parts.map(r => r.left));
          const right = Math.max(...parts.map(r => r.right));
          return {
            inside: parts.every(r => r.left >= a.left - 1 && r.right <= a.right + 1
                                  && r.top >= a.top - 1 && r.bottom <= a.bottom + 1),
            offCentre: Math.abs((left + right) / 2 - (a.left + a.right) / 2),
            labels: area.querySelectorAll('text.relay-edge-label').length,
          };
        }"""
    )
    assert box["labels"] >= 4
    assert box["inside"]
    assert box["offCentre"] < 40
