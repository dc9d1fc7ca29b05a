"""Waiting runs, events and streams in real JupyterLab, read as a person reads them.

A notebook saves ``tests/relays/approval.py`` (a step drafts a refund, publishes it as the
event ``draft``, then waits for a message on topic ``approval``) and ``tests/relays/streamer.py``
(a stream value and a progress event a second), and starts a run of each. The tests read the
approval run's header (waiting, the topic, what to type), the draft in its events strip and the
wait node drawn as waiting (no red anywhere); press Approve and follow the run to succeeded with
the result the record holds; and watch streamed values appear while the streamer goes,
compared with the reader of the run's DBOS rows. Screenshots go to ``tests/browser/artifacts/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.history.run_events import read_run_events
from relay_notebook.record.folders import find_run
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import notebook_run, open_panel, run_view
from tests.polling import wait_until

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
APPROVAL = (REPO / "tests" / "relays" / "approval.py").read_text(encoding="utf-8")
STREAMER = (REPO / "tests" / "relays" / "streamer.py").read_text(encoding="utf-8")
LabServer = Any

CELLS = [
    "%load_ext relay_notebook",
    "%%relay approval --no-graph\n" + APPROVAL,
    '%relay run approval --input \'{"order": "B-2"}\'',
    "%%relay streamer --no-graph\n" + STREAMER,
    '%relay run streamer --input \'{"parts": 6, "pause": 1.0}\'',
]
#: the notebook is set up once the streamer's run view shows
STREAMER_SHOWN = '.jp-RelayRunHeader[data-run-id="streamer-1"]'


def _node_status(view: Any, node_type: str) -> str | None:
    classes = view.locator(f"g.relay-node--{node_type}").first.get_attribute("class") or ""
    found = re.search(r"relay-node--status-(\w+)", classes)
    return found.group(1) if found else None


def _shot(page: Any, view: Any, name: str) -> None:
    view.scroll_into_view_if_needed()
    view.screenshot(path=str(ARTIFACTS / name))


@pytest.fixture(scope="module")
def waiting_page(browser_context: Any, lab: LabServer) -> Iterator[Any]:
    """waiting.ipynb opened in Lab and run all: approval-1 waiting, streamer-1 going."""
    with notebook_run(browser_context, lab, "waiting.ipynb", CELLS, STREAMER_SHOWN) as page:
        yield page


def test_a_streamed_value_appears_while_the_run_goes(waiting_page: Any, lab: LabServer) -> None:
    """While streamer-1 is still running, its view already shows some of its stream values
    (not all six yet); at the end it shows every one, as the run's DBOS rows have them."""
    view = run_view(waiting_page, 4)
    header = view.locator('.jp-RelayRunHeader[data-run-id="streamer-1"]')
    row = header.locator('.jp-RelayRunEvents-stream[data-key="output"]')
    row.wait_for(timeout=60_000)
    seen_running = wait_until(
        lambda: (
            header.get_attribute("data-status") == "running"
            and 0 < int(row.get_attribute("data-count") or 0) < 6
            and row.inner_text()
        ),
        timeout=60,
        what="a stream value shown while the run is running",
    )
    assert '"part 0"' in seen_running
    _shot(waiting_page, view, "waiting_stream_live.png")
    view.locator('.jp-RelayRunHeader[data-status="succeeded"]').wait_for(timeout=120_000)
    found = read_run_events(Workspace(lab.home), "streamer-1")
    assert [s["value"] for s in found.streams] == [f"part {i}" for i in range(6)]
    text = row.inner_text()
    assert "6 values, closed" in text
    assert text.endswith(" · ".join(s["preview"] for s in found.streams[-5:]))
    progress = header.locator('.jp-RelayRunEvents-event[data-key="progress"]').inner_text()
    assert json.dumps(found.values()["events"]["progress"]) in progress
    _shot(waiting_page, view, "waiting_stream_done.png")


def test_a_waiting_run_says_what_it_waits_for(waiting_page: Any, lab: LabServer) -> None:
    """approval-1's header says waiting, for a message on topic "approval", and what to type;
    the draft it published is shown; the wait node is drawn waiting, and nothing is red."""
    view = run_view(waiting_page, 2)
    header = view.locator('.jp-RelayRunHeader[data-run-id="approval-1"]')
    header.locator('xpath=self::*[@data-status="waiting"]').wait_for(timeout=60_000)
    record = find_run(Workspace(lab.home), "approval-1").read_meta()
    assert record["status"] == "waiting" and record["waiting"]["topic"] == "approval"
    text = header.inner_text()
    assert 'waiting for a message on topic "approval"' in text
    assert "%relay send approval-1 approval JSON" in text
    draft = header.locator('.jp-RelayRunEvents-event[data-key="draft"]').inner_text()
    assert "Refund 42 EUR on order B-2" in draft
    assert _node_status(view, "wait") == "waiting"
    assert view.locator("g.relay-node--wait .relay-badge--waiting").text_content() == "waiting"
    assert _node_status(view, "event") == "succeeded"
    assert view.locator(".relay-node--status-failed").count() == 0
    assert view.locator(".jp-RelayRunHeader-error").count() == 0
    assert header.get_by_role("button", name="approve").is_enabled()
    _shot(waiting_page, view, "waiting_approval.png")


def test_approve_resumes_the_run_to_its_end(waiting_page: Any, lab: LabServer) -> None:
    """Approve with a note sends {"approved": true, "note": ...}: the view follows the
    resumed run to succeeded, and the act_on step's output is the run's recorded result."""
    view = run_view(waiting_page, 2)
    header = view.locator('.jp-RelayRunHeader[data-run-id="approval-1"]')
    header.locator(".jp-RelayRunHeader-answerInput").fill("ok by the browser test")
    header.get_by_role("button", name="approve").click()
    try:
        view.locator('.jp-RelayRunHeader[data-status="succeeded"]').wait_for(timeout=120_000)
    except Exception:
        _shot(waiting_page, view, "waiting_approve_failed.png")
        raise
    ws = Workspace(lab.home)
    result = find_run(ws, "approval-1").read_result()
    assert result == {"paid": 42, "note": "ok by the browser test"}
    log = commands.logs(ws, "approval-1")
    assert log.run.status == "succeeded" and len(log.attempts) >= 2
    assert _node_status(view, "wait") == "succeeded"
    assert view.locator(".jp-RelayRunHeader-answer").count() == 0
    view.locator('g.relay-node[data-node-id="step-act_on"]').click()
    details = view.locator(".jp-RelayGraph-details").inner_text()
    assert '"paid": 42' in details and "ok by the browser test" in details
    messages = read_run_events(ws, "approval-1").messages
    assert [(m["topic"], m["value"], m["consumed"]) for m in messages] == [
        ("approval", {"approved": True, "note": "ok by the browser test"}, True)
    ]
    _shot(waiting_page, view, "waiting_approved.png")


def test_the_side_panel_shows_events_and_a_waiting_run(
    waiting_page: Any, browser_context: Any, lab: LabServer
) -> None:
    """The Relays panel shows the selected run's events strip (streamer-1's six values), and
    for a run waiting for approval what it waits for and the command that answers it."""
    started = lab.api("POST", "relay/api/relays/approval/runs", {"input": {"order": "C-3"}})
    run_id = started["run_id"]
    ws = Workspace(lab.home)
    wait_until(
        lambda: find_run(ws, run_id).read_meta().get("status") == "waiting",
        timeout=120,
        what=f"{run_id} to wait",
    )
    page, panel = open_panel(browser_context, lab, "streamer")
    panel.locator('.jp-RelayRunList-item[data-run-id="streamer-1"]').click()
    row = panel.locator('.jp-RelayRunEvents-stream[data-key="output"]')
    row.wait_for()
    assert row.get_attribute("data-count") == "6" and "6 values, closed" in row.inner_text()
    panel.locator('li[data-relay="approval"]').click()
    panel.locator(f'.jp-RelayRunList-item[data-run-id="{run_id}"]').click()
    waiting = panel.locator(".jp-RelayPanel-waiting")
    waiting.wait_for()
    text = waiting.inner_text()
    assert text.startswith('waiting for a message on topic "approval" until ')
    assert text.endswith(
        f" · no process is held meanwhile; answer it with %relay send {run_id} approval JSON"
    )
    draft = panel.locator('.jp-RelayRunEvents-event[data-key="draft"]').inner_text()
    assert "Refund 42 EUR on order C-3" in draft
    assert panel.locator(".jp-RelayPanel-error").count() == 0
    page.locator("#relay-panel").screenshot(path=str(ARTIFACTS / "waiting_side_panel.png"))
    page.close()
