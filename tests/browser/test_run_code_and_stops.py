"""A past run drawn on its own code, where a run stopped, and views that follow their run, in
real JupyterLab, read as a person reads them and checked against the run's record.

A notebook runs ``tests/relays/scorer.py`` (a loop calling ``score``), then changes the draft
so the loop calls ``grade`` and reopens the old run with ``%relay recover``; crashes an agent
call and recovers the run into reconciliation; and leaves a run of ``tests/relays/approval.py``
waiting, live, to be answered with ``relay send`` from a terminal. Screenshots go to
``tests/browser/artifacts/`` (and to ``docs/images/`` with ``RELAY_DOC_IMAGES=1``).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.record.folders import find_run, list_run_folders
from relay_notebook.workspace import Workspace
from tests.browser.lab_files import notebook_run, reopen_notebook, run_view
from tests.relay_command import relay_command

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
DOCS = REPO / "docs" / "images"
RELAYS = REPO / "tests" / "relays"
SCORER = (RELAYS / "scorer.py").read_text(encoding="utf-8")
#: the scorer's draft once edited: the loop calls grade instead of score
GRADER = SCORER.replace("def score(x):", "def grade(x):").replace(
    "total += score(x)", "\n        total += grade(x)"
)
APPROVAL = (RELAYS / "approval.py").read_text(encoding="utf-8")
CLERK = """from dbos import DBOS
from agentworks import agent


@DBOS.step()
async def clerk(text):
    return await agent(name="clerk", model="scripted:clerk.json", user_message=text)


@DBOS.workflow()
async def run(INPUT):
    return await clerk("order A-1")
"""
LabServer = Any

CELLS = [
    "%load_ext relay_notebook",
    "%%relay scorer --no-graph\n" + SCORER,
    "%relay run scorer --wait",
    "%%relay scorer --no-graph\n" + GRADER,
    "%relay recover scorer-1 --wait",
    "%%relay shop --no-graph\n" + CLERK,
    "import os, pathlib\n"
    "pathlib.Path(os.environ['RELAY_HOME'], 'shop', 'clerk.json').write_text("
    '\'{"clerk": [{"content": "ordered"}]}\')',
    "%relay run shop --crash during:agent:clerk --wait",
    "%relay recover shop-1 --wait",
    "%%relay approval --no-graph\n" + APPROVAL,
    '%relay run approval --input \'{"order": "T-9"}\'',
]
WAITING = '.jp-RelayRunHeader[data-run-id="approval-1"][data-status="waiting"]'


def _node(view: Any, node_id: str) -> Any:
    return view.locator(f'g.relay-node[data-node-id="{node_id}"]')


def _status(node: Any) -> str | None:
    found = re.search(r"relay-node--status-(\w+)", node.get_attribute("class") or "")
    return found.group(1) if found else None


def _shot(view: Any, name: str) -> None:
    """``view`` alone, into the artifacts (and docs/images/ with ``RELAY_DOC_IMAGES=1``)."""
    view.scroll_into_view_if_needed()
    view.screenshot(path=str(ARTIFACTS / name))
    if os.environ.get("RELAY_DOC_IMAGES") == "1":
        shutil.copyfile(ARTIFACTS / name, DOCS / name)


@pytest.fixture(scope="module")
def page(browser_context: Any, lab: LabServer) -> Iterator[Any]:
    """stops.ipynb opened in Lab and run all: scorer-1 reopened after its draft changed,
    shop-1 held for reconciliation, approval-1 waiting."""
    with notebook_run(browser_context, lab, "stops.ipynb", CELLS, WAITING) as opened:
        yield opened


def test_an_old_run_is_drawn_on_the_code_it_ran(page: Any, lab: LabServer) -> None:
    """scorer-1, reopened after the draft's loop changed to grade, shows score ×3 as its
    ledger has it, no grade node, no unplaced-call footnote, and says the draft changed."""
    view = run_view(page, 4)
    header = view.locator('.jp-RelayRunHeader[data-run-id="scorer-1"]')
    header.locator('xpath=self::*[@data-status="succeeded"]').wait_for(timeout=60_000)
    log = commands.logs(Workspace(lab.home), "scorer-1")
    assert [s.name for s in log.steps] == ["score", "score", "score"]
    score = _node(view, "step-score")
    assert "score ×3" in (score.text_content() or "") and _status(score) == "succeeded"
    assert _node(view, "step-grade").count() == 0
    assert view.locator(".jp-RelayGraph-notes li").count() == 0
    drawn = header.locator(".jp-RelayRunHeader-drawn").inner_text()
    assert drawn.startswith("drawn on the code this run ran; the draft has changed since")
    assert "%relay check scorer --replay scorer-1" in drawn
    line = SCORER.splitlines().index("        total += score(x)") + 1
    # its call site's line in the code it ran, not in the draft
    assert f"L{line}" in (score.text_content() or "")
    _shot(view, "run_view_old_code.png")


def test_an_old_runs_crash_test_runs_the_draft_now_at_its_steps(page: Any, lab: LabServer) -> None:
    """scorer-1's header, drawn on score, offers crash tests at the current draft's steps
    (grade, what "run again" runs), says so, and crash after grade#1 from it interrupts a new
    run right after grade's first checkpoint, as that run's record says."""
    view = run_view(page, 4)
    header = view.locator('.jp-RelayRunHeader[data-run-id="scorer-1"]')
    picker = header.locator(".jp-RelayRunHeader-step")
    draft = Workspace(lab.home).load_draft("scorer")
    assert "def grade(x):" in draft.source
    assert picker.locator("option").all_inner_texts() == ["grade"]
    assert header.locator(".jp-RelayRunHeader-on").inner_text() == "on the current draft:"
    crash = header.get_by_role("button", name="crash after")
    assert "the current draft, changed since this run" in (crash.get_attribute("title") or "")
    picker.select_option("grade")
    crash.click()
    page.wait_for_selector(
        '.jp-RelayRunHeader[data-run-id="scorer-2"][data-status="interrupted"]', timeout=120_000
    )
    log = commands.logs(Workspace(lab.home), "scorer-2")
    assert [s.name for s in log.steps] == ["grade"]
    assert log.run.input == commands.logs(Workspace(lab.home), "scorer-1").run.input
    assert "crashed on purpose after grade" in view.locator(".jp-RelayRunHeader").inner_text()


def test_an_uncertain_call_says_reconcile(page: Any, lab: LabServer) -> None:
    """shop-1, crashed inside agent:clerk and recovered: the header says needs
    reconciliation, names the uncertain call and %relay reconcile (never "recover it"), the
    agent's node is uncertain and the step's is where the process died, as the preview says."""
    view = run_view(page, 8)
    header = view.locator('.jp-RelayRunHeader[data-run-id="shop-1"]')
    header.locator('xpath=self::*[@data-status="needs_reconciliation"]').wait_for(timeout=60_000)
    preview = commands.preview(Workspace(lab.home), "shop-1")
    assert [b["call"] for b in preview.blocking] == ["agent 'clerk'"]
    text = header.inner_text()
    assert "needs reconciliation" in text
    assert "agent 'clerk' was left uncertain" in text
    assert "%relay reconcile shop-1" in header.locator(".jp-RelayRunHeader-next").inner_text()
    assert "recover it with" not in text
    agent = _node(view, "agent-clerk")
    assert _status(agent) == "uncertain"
    assert agent.locator(".relay-badge--uncertain").text_content() == "uncertain"
    step = _node(view, "step-clerk")
    assert _status(step) == "interrupted"
    assert step.locator(".relay-badge--interrupted").text_content() == "stopped here"
    recover = header.get_by_role("button", name="recover")
    assert recover.is_disabled() and "reconcile" in (recover.get_attribute("title") or "")
    _shot(view, "run_view_reconcile.png")


def test_a_waiting_view_follows_an_answer_from_a_terminal(page: Any, lab: LabServer) -> None:
    """approval-1's live view, left waiting, turns succeeded with the record's result once
    `relay send` in a terminal answers it; its answer buttons go away."""
    view = run_view(page, 10)
    header = view.locator('.jp-RelayRunHeader[data-run-id="approval-1"]')
    assert header.get_by_role("button", name="approve").is_enabled()
    waiting = header.locator(".jp-RelayRunHeader-waiting").inner_text()
    assert waiting.startswith('waiting for a message on topic "approval" until ')
    assert waiting.endswith(" · no process is held meanwhile")
    _shot(view, "run_view_waiting.png")
    done = relay_command(
        lab.home, "send", "approval-1", "approval", '{"approved": true, "note": "from a terminal"}'
    )
    assert done.returncode == 0, done.stderr
    try:
        view.locator('.jp-RelayRunHeader[data-status="succeeded"]').wait_for(timeout=60_000)
    except Exception:
        _shot(view, "run_view_follow_failed.png")
        raise
    ws = Workspace(lab.home)
    assert find_run(ws, "approval-1").read_result() == {"paid": 42, "note": "from a terminal"}
    log = commands.logs(ws, "approval-1")
    assert f"attempt {len(log.attempts)} · 1 of 3 counted" in header.inner_text()
    assert view.locator(".jp-RelayRunHeader-answer").count() == 0
    assert _status(_node(view, "step-act_on")) == "succeeded"
    _shot(view, "run_view_followed.png")


def test_buttons_work_once_load_ext_ran_in_a_new_kernel(
    page: Any, browser_context: Any, lab: LabServer
) -> None:
    """The saved notebook reopened on a new kernel: "run again" before %load_ext says to run
    it; once %load_ext ran (no page reload) the same button starts a run the view follows to
    succeeded, drawn on its own code (grade ×3, the draft it ran)."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.context.model.dirty === false"
    )
    fresh = reopen_notebook(browser_context, lab, "stops.ipynb")
    view = run_view(fresh, 4)
    view.scroll_into_view_if_needed()
    view.get_by_role("button", name="run again").click()
    message = view.locator(".jp-RelayRunHeader-message")
    fresh.wait_for_function(
        "el => el.textContent.includes('%load_ext relay_notebook')",
        arg=message.element_handle(),
        timeout=30_000,
    )
    fresh.evaluate(
        """() => {
            const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = 0;
            window.jupyterapp.commands.execute('notebook:run-cell');
        }"""
    )
    fresh.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets[0].model"
        ".executionCount !== null"
    )
    started = f"scorer-{len(list_run_folders(Workspace(lab.home), 'scorer')) + 1}"
    view.get_by_role("button", name="run again").click()
    header = view.locator(".jp-RelayRunHeader")
    try:
        view.locator(
            f'.jp-RelayRunHeader[data-run-id="{started}"][data-status="succeeded"]'
        ).wait_for(timeout=120_000)
    except Exception:
        _shot(view, "run_view_load_ext_failed.png")
        raise
    log = commands.logs(Workspace(lab.home), started)
    assert [s.name for s in log.steps] == ["grade", "grade", "grade"]
    assert "grade ×3" in (_node(view, "step-grade").text_content() or "")
    assert "drawn" not in header.inner_text()
    view.screenshot(path=str(ARTIFACTS / "run_view_after_load_ext.png"))
    fresh.close()
