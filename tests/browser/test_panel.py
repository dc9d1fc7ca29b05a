"""The Relays side panel as a user works it: the flow graph before any run, a crash test at a
chosen step and moment, actions that cannot apply disabled with the reason, a deliberate crash
shown as the expected state, and a selection that stays readable in the dark theme."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import open_panel

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
ORDER = (REPO / "tests" / "relays" / "order.py").read_text(encoding="utf-8")
BIG = '{"items": [{"sku": "a", "qty": 1, "unit": 50}, {"sku": "b", "qty": 1, "unit": 70}]}'
LabServer = Any

CONTRAST = """el => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => {
    const [r, g, b] = c.map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const style = getComputedStyle(el);
  const fg = lum(rgb(style.color)), bg = lum(rgb(style.backgroundColor));
  return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
}"""


def _contrast(element: Any) -> float:
    """The element's text contrast, read again if the panel re-rendered it meanwhile (a
    detached element has no computed colours)."""
    from playwright.sync_api import Error

    for _ in range(50):
        try:
            return float(element.evaluate(CONTRAST))
        except Error:
            time.sleep(0.1)
    return float(element.evaluate(CONTRAST))


@pytest.fixture(scope="module")
def panel_page(browser_context: Any, lab: LabServer) -> Any:
    """Lab with the Relays panel open on the order relay (saved, no runs yet)."""
    ws = Workspace(lab.home)
    ws.save_draft("order", ORDER)
    page, panel = open_panel(browser_context, lab, "order")
    panel.locator(".jp-RelayPanel-relay .jp-RelayGraph g.relay-node").first.wait_for()
    yield page
    page.close()


def _status(graph: Any, node_id: str) -> str | None:
    classes = graph.locator(f'g.relay-node[data-node-id="{node_id}"]').get_attribute("class") or ""
    found = re.search(r"relay-node--status-(\w+)", classes)
    return found.group(1) if found else None


def test_the_flow_graph_shows_before_any_run(panel_page: Any, lab: LabServer) -> None:
    """Selecting a relay with no runs shows its flow graph, node for node."""
    graph = panel_page.locator("#relay-panel .jp-RelayPanel-relay .jp-RelayGraph")
    expected = len(commands.graph(Workspace(lab.home), "order").nodes)
    assert graph.locator("g.relay-node").count() == expected
    assert graph.get_attribute("data-kind") == "flow"


def test_a_crash_test_at_a_chosen_step_ends_interrupted_not_in_error(
    panel_page: Any, lab: LabServer
) -> None:
    """A crash test during ship#1 stops there: the run reads interrupted with the crash as the
    reason (no error box), Recover is enabled, and recovering it reuses the earlier steps."""
    panel = panel_page.locator("#relay-panel")
    panel.locator(".jp-RelayPanel-input").fill(BIG)
    panel.locator(".jp-RelayPanel-when").select_option("during")
    panel.locator(".jp-RelayPanel-step").select_option("ship")
    panel.get_by_role("button", name="Crash test").click()
    panel_page.wait_for_selector(
        '#relay-panel .jp-RelayPanel-run[data-run-id="order-1"] .jp-RelayBadge--interrupted',
        timeout=120_000,
    )
    run = panel.locator(".jp-RelayPanel-run")
    note = run.locator(".jp-RelayPanel-note").first
    assert note.inner_text().startswith("crashed on purpose during ship (--crash)")
    assert run.locator(".jp-RelayPanel-error").count() == 0
    log = commands.logs(Workspace(lab.home), "order-1")
    assert log.attempts[0].crash == {"when": "during", "step": "ship", "occurrence": 1}
    recover = panel.get_by_role("button", name="Recover")
    assert recover.is_enabled()
    panel_page.screenshot(path=str(ARTIFACTS / "panel_crash_test.png"))
    recover.click()
    panel_page.wait_for_selector(
        '#relay-panel .jp-RelayPanel-run[data-run-id="order-1"] .jp-RelayBadge--succeeded',
        timeout=120_000,
    )
    graph = run.locator(".jp-RelayGraph")
    graph.locator('g.relay-node[data-node-id="step-ship"]').wait_for()
    assert _status(graph, "step-ship") == "succeeded"
    assert _status(graph, "step-ship-2") == "not_reached"


def test_actions_that_cannot_apply_are_disabled_with_the_reason(
    panel_page: Any, lab: LabServer
) -> None:
    """Recover is disabled on a succeeded and on a failed run, and its tooltip says why."""
    panel = panel_page.locator("#relay-panel")
    recover = panel.get_by_role("button", name="Recover")
    assert not recover.is_enabled()
    assert "nothing to recover" in (recover.get_attribute("title") or "")
    panel.locator(".jp-RelayPanel-input").fill('{"items": []}')
    panel.get_by_role("button", name="Run", exact=False).first.click()
    panel_page.wait_for_selector(
        '#relay-panel .jp-RelayPanel-run[data-run-id="order-2"] .jp-RelayBadge--failed',
        timeout=120_000,
    )
    recover = panel.get_by_role("button", name="Recover")
    assert not recover.is_enabled()
    assert "a relay error is final" in (recover.get_attribute("title") or "")
    error = panel.locator(".jp-RelayPanel-run .jp-RelayPanel-error").inner_text()
    assert error.startswith("ValueError: order has no items (relay.py line")


def test_the_selection_is_readable_in_the_dark_theme(panel_page: Any) -> None:
    """In JupyterLab Dark the selected relay and run rows keep a text contrast of at least 4.5."""
    panel_page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme',"
        " {theme: 'JupyterLab Dark'})"
    )
    panel_page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    panel = panel_page.locator("#relay-panel")
    for selector in (
        ".jp-RelayPanel-item.jp-mod-selected",
        ".jp-RelayRunList-item.jp-mod-selected",
    ):
        element = panel.locator(selector).first
        assert _contrast(element) >= 4.5, selector
    panel_page.screenshot(path=str(ARTIFACTS / "panel_dark.png"))
    panel_page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme',"
        " {theme: 'JupyterLab Light'})"
    )


def test_fork_from_the_panels_run_graph_then_delete_a_run(panel_page: Any, lab: LabServer) -> None:
    """In the panel's run graph a node's "fork from check#1" makes a fork the panel opens
    (its parent linked, calls before check copied, as the record says); Delete removes a
    finished run after the confirmation."""
    panel = panel_page.locator("#relay-panel")
    panel.locator('.jp-RelayRunList-item[data-run-id="order-1"]').click()
    graph = panel.locator('.jp-RelayPanel-run[data-run-id="order-1"] .jp-RelayGraph')
    graph.locator('g.relay-node[data-node-id="step-ship"]').click()
    graph.locator('.jp-RelayGraph-details button[data-call="ship#1"]').first.click()
    panel_page.wait_for_selector(
        '#relay-panel .jp-RelayPanel-run[data-run-id="order-3"] .jp-RelayBadge--succeeded',
        timeout=120_000,
    )
    run = panel.locator(".jp-RelayPanel-run")
    assert run.locator(".jp-RelayPanel-fork").inner_text().startswith("forked from order-1 at")
    # the lineage: order-1 at the root, the fork under it (marked: it is the run shown)
    tree = run.locator(".jp-RelayLineage")
    root = tree.locator('li.jp-RelayLineage-run[data-run-id="order-1"]')
    child = root.locator('li.jp-RelayLineage-run[data-run-id="order-3"]')
    child.locator(":scope > .jp-RelayBadge--succeeded").wait_for(timeout=30_000)
    assert "jp-mod-current" in (child.get_attribute("class") or "")
    assert child.inner_text().split() == ["order-3", "succeeded", "from", "ship#1"]
    assert tree.locator("li.jp-RelayLineage-run").count() == 1 + len(
        [f for f in Path(lab.home, "order", "runs").glob("*/run.json") if '"fork"' in f.read_text()]
    )
    tree.screenshot(path=str(ARTIFACTS / "panel_lineage.png"))
    log = commands.logs(Workspace(lab.home), "order-3")
    assert [s.name for s in log.steps if s.copied_from == "order-1"] == [
        "price",
        "pack",
        "pack",
    ]
    # its first attempt lists the 3 copied checkpoints as copied, as the run view does
    first = run.locator(".jp-RelayPanel-attempts li").first.inner_text()
    assert "3 copied" in first and "3 reused" not in first, first
    # and its step table says so call by call: copied from order-1, never reused
    rows = run.locator(".jp-RelayPanel-steps tbody tr")
    shown = [rows.nth(i).inner_text().split("\t") for i in range(rows.count())]
    copied = [row[0] for row in shown if "copied from order-1" in row[2]]
    assert copied == [s.name for s in log.steps if s.copied_from == "order-1"], shown
    assert not [row for row in shown if "reused" in row[2]], shown
    panel_page.once("dialog", lambda dialog: dialog.accept())
    panel.get_by_role("button", name="Delete").click()
    panel.locator('.jp-RelayRunList-item[data-run-id="order-3"]').wait_for(state="detached")
    with pytest.raises(Exception, match=r"run-not-found|No run"):
        commands.logs(Workspace(lab.home), "order-3")


def test_a_draft_that_fails_admission_is_marked_broken(panel_page: Any, lab: LabServer) -> None:
    """A draft without a workflow entrypoint is listed with a broken marker and its problem."""
    Workspace(lab.home).save_draft(
        "bad", "from dbos import DBOS\n\ndef run(INPUT):\n    DBOS.launch()\n    return 1\n"
    )
    panel_page.locator("#relay-panel").get_by_role("button", name="⟳").click()
    item = panel_page.locator('#relay-panel li[data-relay="bad"]')
    item.wait_for()
    assert item.get_attribute("data-broken") == "true"
    assert item.locator(".jp-RelayPanel-broken").inner_text().startswith("broken: ")


def test_the_panel_offers_the_workspace_of_the_notebook_in_front(
    browser_context: Any, lab: LabServer
) -> None:
    """A notebook whose kernel keeps its relays in another workspace (under the server's root):
    the panel says so and offers it; "Show it" lists that workspace's relays, and "server's"
    brings the server's own back. Ground truth: the relays saved in each folder."""
    import nbformat

    Workspace(lab.home).save_draft("order", ORDER)
    other = lab.root / "team" / "relays"
    Workspace(other).save_draft("solo", (REPO / "tests" / "relays" / "five.py").read_text())
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            f"%load_ext relay_notebook\n%config RelayMagics.home = {str(other)!r}"
        )
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, lab.root / "team.ipynb")
    page = browser_context.new_page()
    try:
        page.goto(lab.lab_url("team.ipynb"))
        page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel"
            "?.status === 'idle'"
        )
        page.locator('.jp-SideBar .lm-TabBar-tab[data-id="relay-panel"]').click()
        panel = page.locator("#relay-panel")
        line = panel.locator(".jp-RelayPanel-workspace-line")
        line.wait_for()
        panel.locator('li[data-relay="order"]').wait_for()
        assert line.inner_text().split() == ["workspace", "relays"]
        assert panel.locator('li[data-relay="order"]').count() == 1
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        offer = panel.locator(".jp-RelayPanel-workspace-offer")
        offer.wait_for(timeout=30_000)
        assert offer.inner_text().startswith("team.ipynb uses the workspace team/relays (1 relay).")
        page.screenshot(path=str(ARTIFACTS / "panel_workspace_offer.png"))
        offer.get_by_role("button", name="Show it").click()
        panel.locator('li[data-relay="solo"]').wait_for()
        assert panel.locator('li[data-relay="order"]').count() == 0
        # the relays come first; the line follows once the panel has asked what it now shows
        page.wait_for_function(
            "() => document.querySelector('#relay-panel .jp-RelayPanel-workspace-path')"
            "?.textContent === 'team/relays'"
        )
        assert line.inner_text().split()[:2] == ["workspace", "team/relays"]
        assert offer.count() == 0  # the notebook's workspace is the one shown now
        page.screenshot(path=str(ARTIFACTS / "panel_workspace_followed.png"))
        line.get_by_role("button", name="server’s").click()
        panel.locator('li[data-relay="order"]').wait_for()
        assert panel.locator('li[data-relay="solo"]').count() == 0
    finally:
        page.close()
