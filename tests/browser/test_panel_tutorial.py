"""A tutorial opened in JupyterLab as `make lab` opens it: the Relays panel shows its relays."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from relay_notebook import commands
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import open_notebook, run_all

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
TUTORIAL = "02-crash-and-recover.ipynb"
NEXT = "01-first-relay.ipynb"

FINISHED = """() => {
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
  const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
  return kernel?.status === 'idle' && prompts.length > 0
    && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""

FIRST_CELL = """() => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  notebook.activeCellIndex = 1;  // the workspace cell, after the title
  window.jupyterapp.commands.execute('notebook:run-cell');
}"""

RUNS = """() => [...document.querySelectorAll('#relay-panel .jp-RelayRunList-item[data-run-id]')]
  .map(item => [item.dataset.runId, item.dataset.status]).sort()"""


def test_the_panel_shows_a_tutorials_relays_and_runs(
    browser_context: Any, start_lab: Any, tmp_path: Path
) -> None:
    """Tutorial 02 in a Lab whose own workspace is empty: once its first cell ran, the panel shows
    the tutorial's workspace by itself (no offer to press); as the other cells run it lists
    their relay, and its runs as that workspace records them; it follows to the next tutorial
    opened."""
    with start_lab(tmp_path / "lab") as lab:
        folder = lab.root / "notebooks"
        folder.mkdir()
        shutil.copy(REPO / "notebooks" / TUTORIAL, folder / TUTORIAL)
        page = open_notebook(browser_context, lab, f"notebooks/{TUTORIAL}")
        try:
            page.locator('.jp-SideBar .lm-TabBar-tab[data-id="relay-panel"]').click()
            panel = page.locator("#relay-panel")
            panel.locator(".jp-RelayPanel-workspace-line").wait_for()
            assert panel.locator("li[data-relay]").count() == 0
            page.evaluate(FIRST_CELL)
            page.wait_for_function(
                "() => document.querySelector('#relay-panel .jp-RelayPanel-workspace-path')"
                "?.textContent === 'notebooks/.relay-tutorial-02'"
            )
            assert panel.locator(".jp-RelayPanel-workspace-offer").count() == 0
            assert panel.locator("li[data-relay]").count() == 0
            run_all(page)
            page.wait_for_function(FINISHED, timeout=300_000)
            # listed after the cells ran, with no refresh pressed
            panel.locator('li[data-relay="orders"]').wait_for(timeout=60_000)
            panel.locator('li[data-relay="orders"]').click()
            home = folder / ".relay-tutorial-02"
            recorded = sorted([r.run_id, r.status] for r in commands.runs(Workspace(home)))
            assert len(recorded) == 2
            shown = json.dumps(json.dumps(recorded, separators=(",", ":")))
            page.wait_for_function(f"() => JSON.stringify(({RUNS})()) === {shown}")
            page.screenshot(path=str(ARTIFACTS / "panel_tutorial.png"))
            # the next tutorial, opened in the same Lab: the panel follows it by itself
            shutil.copy(REPO / "notebooks" / NEXT, folder / NEXT)
            page.evaluate(f"() => window.jupyterapp.commands.execute('docmanager:open', "
                          f"{{path: 'notebooks/{NEXT}'}})")  # fmt: skip
            page.wait_for_function(
                f"() => window.jupyterapp.shell.currentWidget?.title.label === '{NEXT}'"
                " && window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel"
                "?.status === 'idle'"
            )
            page.evaluate(FIRST_CELL)
            page.wait_for_function(
                "() => document.querySelector('#relay-panel .jp-RelayPanel-workspace-path')"
                "?.textContent === 'notebooks/.relay-tutorial-01'"
            )
            assert panel.locator(".jp-RelayPanel-workspace-offer").count() == 0
        finally:
            page.close()
