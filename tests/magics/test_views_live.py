"""The live run view (painted from the run's record), its buttons' kernel channel, throttling,
and the recovery lab widget."""

from __future__ import annotations

import threading
import time
from typing import Any

from relay_notebook import commands
from relay_notebook.history import overlay_run
from relay_notebook.magics.lab import RecoveryLab
from relay_notebook.magics.runs import WATCHER, RunView, ViewChannel
from relay_notebook.views.live import Throttle
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relay_command import relay_command
from tests.relays import relay_source

ORDER = relay_source("order")
BIG = {"items": [{"sku": "a", "qty": 1, "unit": 50}, {"sku": "b", "qty": 1, "unit": 70}]}


class RecordingComm:
    """The kernel end of a view's comm, keeping what the kernel sends."""

    def __init__(self, sent: list[dict[str, Any]]) -> None:
        self.sent = sent

    def on_msg(self, handler: Any) -> None:
        self.handler = handler

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)


def order_view(workspace: Workspace, **kwargs: Any) -> RunView:
    workspace.save_draft("order", ORDER)
    view = RunView.start(workspace, "order", shell=None, release=None, **kwargs)
    view.wait(120)
    return view


def statuses(view: RunView) -> dict[str, str]:
    return {n["id"]: n["details"].get("status") for n in view.monitor.bundle()[GRAPH_MIME]["nodes"]}


def test_the_live_view_paints_what_the_record_says(workspace: Workspace) -> None:
    """A run crashed after pack#2 and recovered: the view's header and nodes are the run's
    record (attempt, counts, the untaken branch), and equal the logs' overlay of it."""
    crashed = order_view(workspace, run_input=BIG, crash="after:pack#2")
    header = crashed.monitor.bundle()[GRAPH_MIME]["run"]
    assert header["run_id"] == "order-1" and header["status"] == "interrupted"
    assert header["next"] == "recover it with %relay recover order-1"
    assert header["reason"] == "crashed on purpose after pack#2 (--crash)"
    recovered = RunView.recover(workspace, "order-1", shell=None)
    recovered.wait(120)
    doc = recovered.monitor.bundle()[GRAPH_MIME]
    assert doc["run"]["status"] == "succeeded" and doc["run"]["attempt"] == 2
    assert (doc["run"]["executed"], doc["run"]["reused"]) == (2, 3)
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert nodes["step-pack"]["details"]["summary"] == "2 of 2 reused"
    assert nodes["step-ship"]["details"]["status"] == "succeeded"  # total 120: express
    assert nodes["step-ship-2"]["details"]["status"] == "not_reached"
    assert nodes["step-notify-2"]["details"]["status"] == "not_reached"  # nothing raised
    log = commands.logs(workspace, "order-1")
    overlay = {
        n.id: n.details.get("status")
        for n in overlay_run(commands.graph(workspace, "order"), log).nodes
    }
    assert statuses(recovered) == overlay
    text = recovered.monitor.bundle()["text/plain"]
    assert text.startswith("run order-1: succeeded · attempt 2 of 3 · 2 executed, 3 reused")


def test_a_failed_run_names_the_exception_and_its_line(workspace: Workspace) -> None:
    """The header of a failed run carries the relay's exception, its code and relay.py line."""
    view = order_view(workspace, run_input={"items": []})
    run = view.monitor.bundle()[GRAPH_MIME]["run"]
    line = ORDER.splitlines().index('        raise ValueError("order has no items")') + 1
    assert run["error"] == {
        "code": "relay-raised",
        "message": "ValueError: order has no items",
        "line": line,
    }
    assert run["next"] == "see its logs with %relay logs order-1"
    assert statuses(view)["output"] == "failed"


def test_recovering_a_finished_run_says_so(workspace: Workspace) -> None:
    """Recovering a succeeded run redraws it as it was, with a note, not an empty graph."""
    order_view(workspace, run_input=BIG)
    again = RunView.recover(workspace, "order-1", shell=None)
    again.wait(120)
    run = again.monitor.bundle()[GRAPH_MIME]["run"]
    assert run["status"] == "succeeded"
    assert run["note"] == "the run had already succeeded: nothing was left to recover"
    assert statuses(again)["step-ship"] == "succeeded"


def test_buttons_reach_the_kernel_through_the_view_channel(workspace: Workspace) -> None:
    """A view's "crash during" and "recover" (comm messages) start runs and stream their
    views back, the last one marked final."""
    order_view(workspace, run_input=BIG)
    sent: list[dict[str, Any]] = []

    channel = ViewChannel(RecordingComm(sent), lambda: workspace, None)
    channel.handle(
        {"content": {"data": {"action": "run", "run_id": "order-1", "crash": "during:ship"}}}
    )
    channel.views[-1].wait(120)
    final = [m for m in sent if m.get("final")]
    assert final and final[-1]["bundle"][GRAPH_MIME]["run"]["run_id"] == "order-2"
    assert final[-1]["bundle"][GRAPH_MIME]["run"]["status"] == "interrupted"
    assert final[-1]["bundle"][GRAPH_MIME]["run"]["note"] == (
        "started with this view's button (--crash during:ship, order-1's input)"
    )
    sent.clear()
    channel.handle({"content": {"data": {"action": "recover", "run_id": "order-2"}}})
    channel.views[-1].wait(120)
    last = [m for m in sent if m.get("final")][-1]["bundle"][GRAPH_MIME]["run"]
    assert (last["status"], last["attempt"], last["reused"]) == ("succeeded", 2, 3)
    channel.handle({"content": {"data": {"action": "delete"}}})
    assert sent[-1] == {
        "type": "error",
        "message": "unknown view action 'delete'; expected 'run', 'recover', 'fork', 'send' or "
        "'workspace'",
    }


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
        wait_until(
            lambda: not any(b.disabled for b in lab._buttons), what="the lab's buttons to enable"
        )
        assert "recovery-lab-2" in lab.report.value
    finally:
        lab.lab.service.stop()


def test_mcp_calls_colour_their_node(with_orders_server: Workspace) -> None:
    """An MCP call made in the workflow body lands on the flow graph's MCP node."""
    ws = with_orders_server
    ws.save_draft(
        "m",
        "from dbos import DBOS\nfrom agentworks import mcp\n\n@DBOS.workflow()\n"
        "async def run(INPUT):\n"
        "    return await mcp(server='orders', tool='list_orders', arguments={})\n",
    )
    view = RunView.start(ws, "m", run_input={}, release=None, crash=None, shell=None)
    assert view.wait(120).status == "succeeded"
    (node,) = [n for n in view.monitor.bundle()[GRAPH_MIME]["nodes"] if n["type"] == "mcp"]
    assert node["details"]["status"] == "succeeded"
    assert node["details"]["executed_in"] == [1]


def test_fork_from_a_node_through_the_view_channel(workspace: Workspace) -> None:
    """A view's "fork from pack#2" starts a fork whose view streams back: price and pack#1
    copied from the parent, the rest executed, the header naming the parent."""
    order_view(workspace, run_input=BIG)
    sent: list[dict[str, Any]] = []

    channel = ViewChannel(RecordingComm(sent), lambda: workspace, None)
    channel.handle({"content": {"data": {"action": "fork", "run_id": "order-1", "from": "pack#2"}}})
    channel.views[-1].wait(120)
    doc = [m for m in sent if m.get("final")][-1]["bundle"][GRAPH_MIME]
    assert doc["run"]["run_id"] == "order-2" and doc["run"]["status"] == "succeeded"
    assert doc["run"]["fork"]["parent"] == "order-1" and doc["run"]["fork"]["copied"] == 2
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert nodes["step-price"]["details"]["status"] == "copied"
    assert nodes["step-pack"]["details"]["summary"] == "1 of 2 copied from order-1"
    assert doc["run"]["note"] == "forked from order-1 at pack#2 with this view's button"


def test_the_side_panel_learns_the_kernels_workspace(workspace: Workspace) -> None:
    """The panel asks a notebook's kernel which workspace it uses (to offer showing it)."""
    sent: list[dict[str, Any]] = []
    ViewChannel(RecordingComm(sent), lambda: workspace, None).handle(
        {"content": {"data": {"action": "workspace"}}}
    )
    assert sent == [{"type": "workspace", "home": str(workspace.home)}]


def test_the_view_channel_answers_a_waiting_run_and_follows_it(workspace: Workspace) -> None:
    """The approval run ends its attempt waiting; the view's "approve" (a send on the comm)
    delivers {"approved": true, "note"} and the view follows the resumed run to succeeded."""
    workspace.save_draft("approval", relay_source("approval"))
    first = RunView.start(workspace, "approval", shell=None, release=None, run_input={})
    outcome = first.wait(120)
    assert outcome.status == "waiting"
    run = first.monitor.bundle()[GRAPH_MIME]["run"]
    text = run["waiting"]["text"]
    assert text.startswith('waiting for a message on topic "approval" until ')
    assert text.endswith(" · no process is held meanwhile")
    assert run["next"] == "answer it with %relay send approval-1 approval JSON"
    assert statuses(first)["wait-L20"] == "waiting"
    assert [e["key"] for e in run["events"]["events"]] == ["draft"]
    sent: list[dict[str, Any]] = []
    channel = ViewChannel(RecordingComm(sent), lambda: workspace, None)
    message = {"approved": True, "note": "fine"}
    channel.handle(
        {"content": {"data": {"action": "send", "run_id": "approval-1", "topic": "approval",
                              "message": message}}}
    )  # fmt: skip
    assert not [m for m in sent if m.get("type") == "error"], sent
    wait_until(lambda: channel.views[-1].finished.is_set(), timeout=120, what="the resumed run")
    final = wait_until(lambda: [m for m in sent if m.get("final")], what="a final view")
    doc = final[-1]["bundle"][GRAPH_MIME]
    assert doc["run"]["status"] == "succeeded"
    assert statuses_of(doc)["wait-L20"] == "succeeded"
    assert commands.logs(workspace, "approval-1").run.status == "succeeded"
    channel.handle({"content": {"data": {"action": "send", "run_id": "approval-1"}}})
    assert sent[-1]["type"] == "error" and "named no topic" in sent[-1]["message"]


def statuses_of(doc: dict[str, Any]) -> dict[str, str]:
    return {n["id"]: n["details"].get("status") for n in doc["nodes"]}


SCORER = relay_source("scorer")
#: the scorer's draft once edited: the loop calls grade, which no run of the old draft called
GRADER = SCORER.replace("def score(x):", "def grade(x):").replace(
    "total += score(x)", "\n        total += grade(x)"
)


def test_an_old_run_is_drawn_on_the_code_it_ran_after_the_draft_changed(
    workspace: Workspace,
) -> None:
    """A finished run reopened after its draft changed (the loop now calls grade) shows score ×3
    as the ledger says, no unplaced-call footnote, and says the draft changed since."""
    workspace.save_draft("scorer", SCORER)
    first = RunView.start(workspace, "scorer", shell=None, release=None, run_input={})
    assert first.wait(120).status == "succeeded"
    workspace.save_draft("scorer", GRADER)
    view = RunView.recover(workspace, "scorer-1", shell=None)
    view.wait(120)
    doc = view.monitor.bundle()[GRAPH_MIME]
    calls = [s.name for s in commands.logs(workspace, "scorer-1").steps]
    assert calls == ["score", "score", "score"]
    nodes = {n["details"].get("name", n["label"]): n for n in doc["nodes"] if n["type"] == "step"}
    assert set(nodes) == {"score"}  # never the draft's grade
    assert nodes["score"]["details"]["count"] == 3 and nodes["score"]["label"] == "score ×3"
    # its call site in the code the run ran (the edit moved the draft's loop a line down)
    assert nodes["score"]["line"] == SCORER.splitlines().index("        total += score(x)") + 1
    assert not any("cannot follow" in note for note in doc.get("notes", []))
    # "run again" runs the draft as it is now: the header's crash picker offers its steps
    assert doc["run"]["code"] == {
        "kind": "draft", "changed": True, "kept": True, "draft_steps": ["grade"],
    }  # fmt: skip
    assert doc["run"]["drawn"].startswith("drawn on the code this run ran; the draft has changed")
    assert "%relay check scorer --replay scorer-1" in doc["run"]["drawn"]
    assert "the draft has changed since" in view.monitor.bundle()["text/plain"].splitlines()[0]
    detail = commands.run_detail(workspace, "scorer-1")["graph"]
    assert {n["label"] for n in detail["nodes"] if n["type"] == "step"} == {"score ×3"}
    assert "%relay check scorer --replay scorer-1" in detail["run"]["drawn"]


def test_run_again_from_a_releases_run_runs_that_release(workspace: Workspace) -> None:
    """A release's run, run again from its view's button after the draft changed, runs the
    same release (its record names it, its steps are the release's), not the draft."""
    workspace.save_draft("scorer", SCORER)
    commands.publish(workspace, "scorer")
    workspace.save_draft("scorer", GRADER)
    first = RunView.start(workspace, "scorer", shell=None, release="v1", run_input={"xs": [5]})
    assert first.wait(120).status == "succeeded"
    channel = ViewChannel(RecordingComm([]), lambda: workspace, None)
    channel.handle({"content": {"data": {"action": "run", "run_id": "scorer-1"}}})
    assert channel.views[-1].wait(120).status == "succeeded"
    again = commands.logs(workspace, "scorer-2")
    assert again.run.release is not None and again.run.release["version"] == 1
    assert (again.run.input, [s.name for s in again.steps]) == ({"xs": [5]}, ["score"])


def test_a_run_of_the_draft_as_it_is_says_nothing_about_its_code(workspace: Workspace) -> None:
    """A run whose draft has not changed since carries no 'drawn on' line."""
    workspace.save_draft("scorer", SCORER)
    view = RunView.start(workspace, "scorer", shell=None, release=None, run_input={"xs": [4]})
    view.wait(120)
    run = view.monitor.bundle()[GRAPH_MIME]["run"]
    assert "code" not in run and "drawn" not in run


APPROVAL = relay_source("approval")


def test_a_waiting_view_answered_from_a_terminal_turns_into_what_happened(
    workspace: Workspace,
) -> None:
    """A view of approval-1 left waiting follows the run once `relay send` in a terminal
    answers it: its header turns succeeded with the record's counts, its last push is final,
    and a button's late approve is refused in notebook words with the view as it is now."""
    workspace.save_draft("approval", APPROVAL)
    sent: list[tuple[dict[str, Any], bool]] = []
    view = RunView.start(
        workspace, "approval", shell=None, release=None, run_input={"order": "T-1"},
        sinks=[lambda bundle, final: sent.append((bundle, final))],
    )  # fmt: skip
    assert view.wait(120).status == "waiting"
    assert view.monitor.bundle()[GRAPH_MIME]["run"]["status"] == "waiting"
    assert WATCHER.watching(view)
    done = relay_command(workspace.home, "send", "approval-1", "approval", '{"approved": true}')
    assert done.returncode == 0, done.stderr
    wait_until(
        lambda: view.monitor.bundle()[GRAPH_MIME]["run"]["status"] == "succeeded",
        timeout=30,
        what="the waiting view to show the run succeeded",
    )
    log = commands.logs(workspace, "approval-1")
    run = view.monitor.bundle()[GRAPH_MIME]["run"]
    assert run["attempt"] == len(log.attempts) and "next" not in run
    assert sent[-1][1] and sent[-1][0][GRAPH_MIME]["run"]["status"] == "succeeded"
    wait_until(lambda: not WATCHER.watching(view), what="the watcher to let the view go")
    replies: list[dict[str, Any]] = []
    channel = ViewChannel(RecordingComm(replies), lambda: workspace, shell=None)
    channel.handle(
        {"content": {"data": {"action": "send", "run_id": "approval-1", "topic": "approval",
                              "message": {"approved": True}}}}
    )  # fmt: skip
    (error,) = replies
    assert error["type"] == "error" and "[" not in error["message"]
    assert error["message"].startswith("Not sent: run approval-1 is no longer waiting")
    assert "relay run" not in error["message"].replace("%relay", "")
    assert error["bundle"][GRAPH_MIME]["run"]["status"] == "succeeded"


CLERK = """from dbos import DBOS
from agentworks import agent


@DBOS.step()
async def clerk(text):
    return await agent(name="clerk", user_message=text)


@DBOS.workflow()
async def run(INPUT):
    return await clerk(INPUT.get("text", "order A-1"))
"""


RAISER = """from dbos import DBOS


@DBOS.step()
def check(x):
    if x > 1:
        raise ValueError("too big")
    return x


@DBOS.workflow()
def run(INPUT):
    for x in [1, 2]:
        check(x)
"""


def _node(view: RunView, node_id: str) -> dict[str, Any]:
    doc = view.monitor.bundle()[GRAPH_MIME]
    return next(n for n in doc["nodes"] if n["id"] == node_id)


def test_the_call_running_when_the_process_died_is_marked_and_recovery_says_so(
    workspace: Workspace,
) -> None:
    """A crash during pack#1 marks pack's node interrupted, badged "stopped here" (never
    greyed as not reached); recovered, the header says it came back from attempt 1's crash."""
    crashed = order_view(workspace, run_input=BIG, crash="during:pack")
    log = commands.logs(workspace, "order-1")
    assert [s.name for s in log.steps if s.status == "interrupted"] == ["pack"]
    pack = _node(crashed, "step-pack")
    assert pack["status"] == "interrupted" and pack["details"]["stopped"] == "interrupted"
    assert (
        '<g class="relay-badge relay-badge--interrupted">'
        in crashed.monitor.bundle()["image/svg+xml"]
        and ">stopped here</text>" in crashed.monitor.bundle()["image/svg+xml"]
    )
    recovered = RunView.recover(workspace, "order-1", shell=None)
    assert recovered.wait(120).status == "succeeded"
    run = recovered.monitor.bundle()[GRAPH_MIME]["run"]
    assert run["recovered"] == "recovered from attempt 1's crash"
    assert "stopped" not in _node(recovered, "step-pack")["details"]
    first_line = recovered.monitor.bundle()["text/plain"].splitlines()[0]
    assert "recovered from attempt 1's crash" in first_line


def test_the_call_that_raised_is_marked(workspace: Workspace) -> None:
    """A failed run marks the node of the call whose exception failed it, "raised here"."""
    workspace.save_draft("checker", RAISER)
    view = RunView.start(workspace, "checker", shell=None, release=None, run_input={})
    assert view.wait(120).status == "failed"
    failed = [s.name for s in commands.logs(workspace, "checker-1").steps if s.status == "error"]
    assert failed == ["check"]
    check = _node(view, "step-check")
    assert check["status"] == "failed" and check["details"]["stopped"] == "raised"
    assert ">raised here</text>" in view.monitor.bundle()["image/svg+xml"]


def test_an_uncertain_call_holds_the_header_at_reconcile(workspace: Workspace) -> None:
    """A crash during agent:clerk: the recovered view says needs reconciliation, names the
    call, tells to %relay reconcile, and marks the agent's node uncertain."""
    from relay_notebook.workspace import Manifest

    workspace.save_draft("shop", CLERK, Manifest(model="scripted:fixtures.json"))
    (workspace.relay_dir("shop") / "fixtures.json").write_text('{"clerk": [{"content": "ok"}]}')
    first = RunView.start(
        workspace, "shop", shell=None, release=None, run_input={}, crash="during:agent:clerk"
    )
    assert first.wait(120).status == "interrupted"
    view = RunView.recover(workspace, "shop-1", shell=None)
    assert view.wait(120).status == "needs_reconciliation"
    run = view.monitor.bundle()[GRAPH_MIME]["run"]
    assert run["status"] == "needs_reconciliation"
    assert run["uncertain"][0]["call"] == "agent 'clerk'"
    assert "agent 'clerk' was left uncertain" in run["reason"]
    assert run["next"].startswith("see the uncertain call with %relay reconcile shop-1")
    agent = _node(view, "agent-clerk")
    assert agent["status"] == "uncertain" and agent["details"]["stopped"] == "uncertain"
    assert _node(view, "step-clerk")["details"]["stopped"] == "interrupted"
    assert "recover it with" not in view.monitor.bundle()["text/plain"].splitlines()[0]
