"""The side panel's files section: a recovered agent run's call folders, labelled, and previews."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.history.run_files import PREVIEW_LIMIT
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import open_panel
from tests.integration.test_agentworks_run import setup_relay
from tests.integration.test_run_files import RELAY, SCRIPT

ARTIFACTS = Path(__file__).parent / "artifacts"
LabServer = Any


@pytest.fixture(scope="module")
def files_page(browser_context: Any, lab: LabServer) -> Any:
    """Lab with the Relays panel open on run r-1, whose second agent call died once."""
    ws = Workspace(lab.home)
    setup_relay(ws, RELAY, SCRIPT)
    first = commands.run(ws, "r").wait(120)
    assert commands.recover(ws, first.run_id).wait(120).status == "succeeded"
    execution = ws.relay_dir("r") / "runs/iteration-1-hook/execution"
    (execution / "big.log").write_text("z" * (PREVIEW_LIMIT + 10))
    page, panel = open_panel(browser_context, lab, "r")
    panel.locator('.jp-RelayPanel-relay [data-run-id="r-1"]').first.click()
    panel.locator('.jp-RelayFiles-folder[data-folder="call-3"]').wait_for()
    yield page
    page.close()


def test_the_files_section_shows_both_attempts_folders(files_page: Any) -> None:
    """Each call folder reads its agent and attempt; the killed one says it has no receipt."""
    files = files_page.locator("#relay-panel .jp-RelayFiles")
    labels = [
        files.locator(f'.jp-RelayFiles-folder[data-folder="{name}"] > summary').inner_text()
        for name in ("call-1", "call-2", "call-3")
    ]
    assert labels[0].startswith("call-1 · agent writer") and "attempt 1" in labels[0]
    assert "reused in attempt 2" in labels[0]
    assert labels[1].startswith("call-2 · agent checker") and "attempt 1" in labels[1]
    assert "no receipt" in labels[1]
    assert labels[2].startswith("call-3 · agent checker") and "attempt 2" in labels[2]
    loose = files.locator('.jp-RelayFiles-folder[data-folder="."]')
    assert "note.txt" in loose.inner_text()


def test_clicking_a_file_previews_it(files_page: Any) -> None:
    """A receipt opens pretty-printed; a big file says where it was cut."""
    files = files_page.locator("#relay-panel .jp-RelayFiles")
    files.locator('li[data-path="call-3/receipt.json"] a').click()
    text = files.locator(".jp-RelayFiles-preview pre")
    text.wait_for()
    assert '"agent": "checker"' in text.inner_text()
    files_page.screenshot(path=str(ARTIFACTS / "panel_files.png"))
    files.locator('li[data-path="big.log"] a').click()
    cut = files.locator(".jp-RelayFiles-cut")
    cut.wait_for()
    assert cut.inner_text().startswith("cut at 64.0 KiB of 64.0 KiB")


def test_a_nodes_details_link_to_its_calls_folder(files_page: Any) -> None:
    """The run graph's details of the checker node name the folder of the call that finished
    (call-3, made by attempt 2, as its receipt says); clicking it opens that folder below."""
    panel = files_page.locator("#relay-panel")
    graph = panel.locator('.jp-RelayPanel-run[data-run-id="r-1"] .jp-RelayGraph')
    graph.locator('g.relay-node[data-node-id="agent-checker"]').click()
    row = graph.locator(".jp-RelayGraph-details .jp-RelayGraph-filesRow")
    assert row.inner_text() == "files of agent:checker#1: call-3"
    panel.locator('.jp-RelayFiles-folder[data-folder="call-3"]').evaluate(
        "d => { d.open = false; }"
    )
    row.get_by_role("link", name="call-3").click()
    folder = panel.locator('.jp-RelayFiles-folder[data-folder="call-3"]')
    assert folder.get_attribute("open") is not None
    assert "jp-mod-revealed" in (folder.get_attribute("class") or "")
    files_page.screenshot(path=str(ARTIFACTS / "panel_node_files.png"))
