"""Run history on real runs: records, DataFrames, timelines, run graphs and recovery previews."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from jsonschema import Draft202012Validator

from relay_notebook import commands
from relay_notebook.errors import InvalidInputError
from relay_notebook.history import (
    RunLog,
    build_run_graph,
    list_runs,
    overlay_run,
    preview_recovery,
    read_run_log,
)
from relay_notebook.history.run_summary import run_header
from relay_notebook.runner import RunOutcome
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.views.records import run_log_text
from relay_notebook.views.tables import (
    ATTEMPT_COLUMNS,
    EVENT_COLUMNS,
    RUN_COLUMNS,
    STEP_COLUMNS,
    attempts_dataframe,
    events_dataframe,
    receipts_dataframe,
    runs_dataframe,
    steps_dataframe,
)
from relay_notebook.views.timeline import TRACE_NAMES, timeline_figure
from relay_notebook.workspace import Manifest, Workspace
from tests.polling import wait_until

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "relay_notebook/schemas/relay-graph-v1.schema.json").read_text()
)
VALIDATOR = Draft202012Validator(SCHEMA)

MIXED = textwrap.dedent(
    """
    from dataclasses import dataclass
    from dbos import DBOS
    from agentworks import agent

    _tries = {"n": 0}


    @dataclass
    class Invoice:
        amount: int


    @DBOS.step(name="extract_invoice")
    async def extract_invoice(text):
        return await agent(name="extract", system_prompt="Extract invoice fields as JSON.",
                           user_message=text, output_schema={"type": "object"})


    @DBOS.step()
    async def review(invoice):
        return dict(invoice, reviewed=True)


    @DBOS.step()
    async def double(x):
        return 2 * x


    @DBOS.step(retries_allowed=True, max_attempts=3, interval_seconds=0.01, backoff_rate=1.0)
    async def flaky(x):
        _tries["n"] += 1
        if _tries["n"] < 3:
            raise ConnectionError("service down")
        return x


    @DBOS.step()
    async def as_record(amount):
        return Invoice(amount)


    @DBOS.workflow()
    async def child(x):
        return await double(x)


    @DBOS.workflow()
    async def run(INPUT):
        invoice = await extract_invoice(INPUT["text"])
        if invoice["amount"] > 1000:
            invoice = await review(invoice)
        out = []
        for x in INPUT["xs"]:
            out.append(await double(x))
        await flaky(1)
        record = await as_record(invoice["amount"])
        from_child = await child(5)
        note = await agent(name="final", user_message="done?")
        return {"out": out, "child": from_child, "note": note, "amount": record.amount}
    """
)
INPUT = {"text": "invoice 7", "xs": [1, 2, 3]}

LOOP = textwrap.dedent(
    """
    from dbos import DBOS


    @DBOS.step()
    async def double(x):
        return 2 * x


    @DBOS.workflow()
    async def run(INPUT):
        return {"out": [await double(x) for x in INPUT["xs"]]}
    """
)

WAITS = textwrap.dedent(
    """
    import asyncio
    import os
    from dbos import DBOS


    @DBOS.step()
    async def first():
        return "ready"


    @DBOS.step()
    async def wait_for_go():
        for _ in range(6000):  # a minute at most: the test writes "go" into execution/
            if os.path.exists("go"):
                return True
            await asyncio.sleep(0.01)
        return False


    @DBOS.workflow()
    async def run(INPUT):
        return {"first": await first(), "go": await wait_for_go()}
    """
)


def setup_mixed(ws: Workspace, amount: int = 1200) -> None:
    """The mixed relay with scripted agents: extract answers ``amount``, final answers ok."""
    ws.save_draft("mixed", MIXED, Manifest(model="scripted:fixtures.json"))
    script = {"extract": [{"content": {"amount": amount}}], "final": [{"content": "ok"}]}
    (ws.relay_dir("mixed") / "fixtures.json").write_text(json.dumps(script))


def go_run(ws: Workspace, relay: str, run_input: Any, crash: str | None = None) -> RunOutcome:
    out: RunOutcome = commands.run(ws, relay, run_input=run_input, crash=crash).wait(120)
    return out


def recover(ws: Workspace, run_id: str) -> RunOutcome:
    out: RunOutcome = commands.recover(ws, run_id).wait(120)
    return out


@pytest.fixture(scope="module")
def recovered(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The mixed relay crashed after its second loop iteration, then recovered (run mixed-1)."""
    ws = Workspace(tmp_path_factory.mktemp("history") / "relays")
    setup_mixed(ws)
    first = go_run(ws, "mixed", INPUT, crash="after:double#2")
    assert first.status == "interrupted", first.error
    second = recover(ws, first.run_id)
    assert second.status == "succeeded", second.error
    return ws


def folder_hashes(folder: Path) -> dict[str, str]:
    """Every file under a run folder (DBOS database, WAL and shared memory included) by hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def relay_cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def read_everything(ws: Workspace, run_id: str) -> RunLog:
    """Every reader there is: records, events, frames, timeline, graphs, preview, the CLI."""
    log = read_run_log(ws, run_id)
    json.dumps(log.to_dict())
    steps_dataframe(log, outputs=True)
    events_dataframe(log)
    timeline_figure(log)
    build_run_graph(log)
    overlay_run(build_flow_graph(ws.load_draft(log.run.relay).source), log)
    preview_recovery(ws, run_id)
    list_runs(ws)
    assert relay_cli(ws, "logs", run_id, "--json").returncode == 0
    return log


def test_records_match_what_happened_attempt_by_attempt(recovered: Workspace) -> None:
    """Each call says in which attempts its body ran and its checkpoint was reused."""
    log = read_run_log(recovered, "mixed-1")
    assert log.run.status == "succeeded" and log.run.dbos_status == "SUCCESS"
    assert [(a.attempt, a.status, list(a.executed), list(a.reused)) for a in log.attempts] == [
        (1, "interrupted", [1, 2, 3, 4], []),
        (2, "succeeded", [5, 6, 7, 8, 9, 10], [1, 2, 3, 4]),
    ]
    assert [
        (s.function_id, s.name, s.kind, s.occurrence, list(s.executed_in), list(s.reused_in))
        for s in log.steps
    ] == [
        (1, "extract_invoice", "step", 1, [1], [2]),
        (2, "review", "step", 1, [1], [2]),
        (3, "double", "step", 1, [1], [2]),
        (4, "double", "step", 2, [1], [2]),
        (5, "double", "step", 3, [2], []),
        (6, "flaky", "step", 1, [2], []),
        (7, "as_record", "step", 1, [2], []),
        (8, "child", "workflow", 1, [2], []),
        (9, "DBOS.getResult", "dbos", 1, [2], []),
        (10, "agent:final", "agent", 1, [2], []),
    ]
    assert all(s.status == "checkpointed" for s in log.all_steps())


def test_a_retried_step_shows_each_failed_try(recovered: Workspace) -> None:
    """The retried step lists its two failed tries with their error, then succeeds."""
    flaky = next(s for s in read_run_log(recovered, "mixed-1").steps if s.name == "flaky")
    assert [(r.attempt, r.step_attempt, r.error_type, r.error) for r in flaky.retries] == [
        (2, 1, "ConnectionError", "service down"),
        (2, 2, "ConnectionError", "service down"),
    ]
    assert flaky.output_preview == "1"


def test_a_child_workflow_has_its_own_steps(recovered: Workspace) -> None:
    """The child workflow is listed with the call that started it and the step it ran."""
    log = read_run_log(recovered, "mixed-1")
    (child,) = log.children
    assert (child.workflow_id, child.name, child.status, child.parent_function_id) == (
        "mixed-1-8",
        "child",
        "SUCCESS",
        8,
    )
    assert [(s.function_id, s.name, list(s.executed_in)) for s in child.steps] == [
        (1, "double", [2])
    ]
    assert child.steps[0].output_preview == "10"


def test_agent_receipts_link_to_the_step_that_made_them(recovered: Workspace) -> None:
    """The agent call inside a step and the one in the workflow each link to their step."""
    log = read_run_log(recovered, "mixed-1")
    assert [
        (r.kind, r.name, r.step_id, r.state, r.attempt, r.model, r.turns) for r in log.receipts
    ] == [
        ("agent", "extract", 1, "done", 1, "scripted:fixtures.json", 1),
        ("agent", "final", 10, "done", 2, "scripted:fixtures.json", 1),
    ]
    extract = log.steps[0]
    assert [r.name for r in log.receipts_of(extract)] == ["extract"]
    assert log.receipts[0].result_preview == '{"amount": 1200}'


def test_outputs_are_previewed_without_importing_the_relay(recovered: Workspace) -> None:
    """Plain values are shown; a value of a relay class is named, never unpickled."""
    steps = {s.name: s for s in read_run_log(recovered, "mixed-1").steps}
    assert steps["extract_invoice"].output_preview == '{"amount": 1200}'
    assert steps["review"].output_preview == '{"amount": 1200, "reviewed": true}'
    assert steps["as_record"].output_preview == "<relay.Invoice>"
    assert "relay" not in sys.modules


def test_events_are_the_whole_ledger_in_order(recovered: Workspace) -> None:
    """The events are every ledger line of the run, numbered from 1 without gaps."""
    log = read_run_log(recovered, "mixed-1")
    events = log.events
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["kind"] for e in events]
    assert kinds.count("attempt_start") == 2 and kinds.count("crash_injected") == 1
    assert [e["step"] for e in log.events_of("step_reused")] == [
        "extract_invoice",
        "review",
        "double",
        "double",
    ]


def test_dataframes_have_the_documented_columns(recovered: Workspace) -> None:
    """Steps, attempts, events, receipts and runs load into pandas with stable columns."""
    log = read_run_log(recovered, "mixed-1")
    steps = steps_dataframe(log)
    assert tuple(steps.columns) == STEP_COLUMNS
    assert len(steps) == 11 and list(steps["workflow_id"]).count("mixed-1-8") == 1
    assert steps["reused"].sum() == 4 and steps["retries"].sum() == 2
    assert list(steps.loc[steps["name"] == "double", "attempt"]) == [1, 1, 2, 2]
    assert steps["started_at"].dt.tz is not None
    with_outputs = steps_dataframe(log, children=False, outputs=True)
    assert len(with_outputs) == 10 and with_outputs["output_preview"].iloc[0] == '{"amount": 1200}'
    attempts = attempts_dataframe(log)
    assert tuple(attempts.columns) == ATTEMPT_COLUMNS
    assert attempts["crash"].iloc[0] == "after:double#2" and attempts["crash"].isna().iloc[1]
    events = events_dataframe(log)
    assert tuple(events.columns) == EVENT_COLUMNS and len(events) == len(log.events)
    assert list(receipts_dataframe(log)["name"]) == ["extract", "final"]
    runs = runs_dataframe(list_runs(recovered))
    assert tuple(runs.columns) == RUN_COLUMNS and list(runs["status"]) == ["succeeded"]


def test_the_timeline_shows_attempts_reuse_retries_and_the_crash(recovered: Workspace) -> None:
    """One row per attempt; 11 bodies, 4 reused calls, 2 failed tries and 1 crash are drawn."""
    log = read_run_log(recovered, "mixed-1")
    figure = timeline_figure(log)
    assert type(figure) is go.Figure
    assert [t.name for t in figure.data] == list(TRACE_NAMES)
    assert [t.uid for t in figure.data] == [
        "relay-attempts",
        "relay-executed",
        "relay-reused",
        "relay-failed-tries",
        "relay-crashes",
    ]
    counts = {t.name: len(t.x) for t in figure.data}
    assert counts == {"attempts": 2, "executed": 11, "reused": 4, "failed tries": 2, "crashes": 1}
    assert set(figure.data[2].y) == {"attempt 2 · succeeded"}
    assert figure.to_json() == timeline_figure(read_run_log(recovered, "mixed-1")).to_json()


def test_the_run_graph_has_one_node_per_call(recovered: Workspace) -> None:
    """Loop iterations are separate nodes, reused calls are badged, the schema accepts it."""
    graph = build_run_graph(read_run_log(recovered, "mixed-1"))
    doc = graph.to_dict()
    VALIDATOR.validate(doc)
    assert doc["kind"] == "run"
    calls = [(n["label"], n["status"], n.get("reused", False), n["attempts"]) for n in doc["nodes"]]
    assert calls[0][0] == "input" and calls[-1][:2] == ("output", "succeeded")
    assert calls[1:-1] == [
        ("extract_invoice", "reused", True, [1]),
        ("review", "reused", True, [1]),
        ("double #1", "reused", True, [1]),
        ("double #2", "reused", True, [1]),
        ("double #3", "succeeded", False, [2]),
        ("flaky", "succeeded", False, [2]),
        ("as_record", "succeeded", False, [2]),
        ("child", "succeeded", False, [2]),
        ("double", "succeeded", False, [2]),
        ("final", "succeeded", False, [2]),
    ]
    assert all(e["taken"] for e in doc["edges"])
    assert doc["nodes"][1]["details"]["reused"] is True  # what the SVG renderer reads


def test_the_overlay_marks_the_branch_and_the_loop_count(recovered: Workspace) -> None:
    """On the flow graph: the amount > 1000 branch taken, three iterations, all reached."""
    log = read_run_log(recovered, "mixed-1")
    flow = build_flow_graph(recovered.load_draft("mixed").source, relay="mixed")
    doc = overlay_run(flow, log).to_dict()
    VALIDATOR.validate(doc)
    nodes = {n["id"]: n for n in doc["nodes"]}
    decision = next(n for n in doc["nodes"] if n["type"] == "decision")
    loop = next(n for n in doc["nodes"] if n["type"] == "loop")
    taken = {(e["from"], e["to"]): e["taken"] for e in doc["edges"]}
    assert decision["details"]["taken"] == ['invoice["amount"] > 1000']
    assert taken[(decision["id"], "step-review")] is True
    assert taken[(decision["id"], loop["id"])] is False
    assert loop["count"] == 3
    assert (nodes["step-double"]["count"], nodes["step-double"]["attempts"]) == (3, [1, 2])
    assert nodes["step-double"]["reused"] is True and nodes["step-review"]["status"] == "reused"
    assert nodes["agent-extract"]["status"] == "reused"  # the agent call inside the step
    assert {n["status"] for n in doc["nodes"]} <= {"succeeded", "reused"}
    assert "notes" not in doc


def test_the_overlay_shows_the_other_branch_not_reached(workspace: Workspace) -> None:
    """A small invoice skips the review: its node is not reached and the else edge is taken."""
    setup_mixed(workspace, amount=50)
    out = go_run(workspace, "mixed", {"text": "x", "xs": [4]})
    assert out.status == "succeeded", out.error
    flow = build_flow_graph(workspace.load_draft("mixed").source, relay="mixed")
    doc = overlay_run(flow, read_run_log(workspace, out.run_id)).to_dict()
    VALIDATOR.validate(doc)
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert (nodes["step-review"]["status"], nodes["step-review"]["count"]) == ("not_reached", 0)
    decision = next(n for n in doc["nodes"] if n["type"] == "decision")
    assert decision["details"]["taken"] == ["else"]
    assert next(n for n in doc["nodes"] if n["type"] == "loop")["count"] == 1
    assert nodes["output"]["status"] == "succeeded"


@pytest.mark.parametrize("wal", ["left by the child", "checkpointed away"])
def test_reading_never_changes_a_run(recovered: Workspace, tmp_path: Path, wal: str) -> None:
    """Every file of the run folder, DBOS's database, WAL and -shm included, stays identical."""
    ws = recovered
    folder = ws.relay_dir("mixed") / "runs/iteration-1-hook"
    if wal == "checkpointed away":
        ws = Workspace(tmp_path / "relays")
        setup_mixed(ws)
        assert go_run(ws, "mixed", INPUT).status == "succeeded"
        folder = ws.relay_dir("mixed") / "runs/iteration-1-hook"
        conn = sqlite3.connect(folder / ".relay_dbos/dbos.sqlite")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()  # the last connection to close removes the WAL
        assert not (folder / ".relay_dbos/dbos.sqlite-wal").exists()
    else:
        assert (folder / ".relay_dbos/dbos.sqlite-wal").stat().st_size > 0
    before = folder_hashes(folder)
    read_everything(ws, "mixed-1")
    assert folder_hashes(folder) == before


def test_reading_an_interrupted_run_changes_nothing(workspace: Workspace) -> None:
    """A crashed attempt's WAL and shared memory are read without a byte changing."""
    setup_mixed(workspace)
    first = go_run(workspace, "mixed", INPUT, crash="after:double#1")
    assert first.status == "interrupted"
    folder = workspace.relay_dir("mixed") / "runs/iteration-1-hook"
    before = folder_hashes(folder)
    log = read_everything(workspace, first.run_id)
    assert folder_hashes(folder) == before
    assert [s.name for s in log.steps] == ["extract_invoice", "review", "double"]
    assert recover(workspace, first.run_id).status == "succeeded"


def test_a_running_run_can_be_read(workspace: Workspace) -> None:
    """While a step waits, the records show it running and the run goes on undisturbed."""
    workspace.save_draft("waits", WAITS)
    handle = commands.run(workspace, "waits")

    def waiting() -> RunLog | None:
        log = read_run_log(workspace, handle.run_id)
        names = [(s.name, s.status) for s in log.steps]
        return log if ("wait_for_go", "running") in names else None

    log = wait_until(waiting, what="the second step to start")
    assert log.run.live is True and log.run.status == "running"
    assert [(s.name, s.status, list(s.executed_in)) for s in log.steps] == [
        ("first", "checkpointed", [1]),
        ("wait_for_go", "running", [1]),
    ]
    assert "running (attempt 1 going)" in run_log_text(log)
    assert len(steps_dataframe(log)) == 2
    preview = preview_recovery(workspace, handle.run_id)
    assert preview.outcome == "stops" and preview.reason and preview.reason["code"] == "run-locked"
    flow = build_flow_graph(workspace.load_draft("waits").source, relay="waits")
    nodes = {n["id"]: n for n in overlay_run(flow, log).to_dict()["nodes"]}
    assert nodes["step-wait_for_go"]["status"] == "running"
    assert nodes["output"]["status"] == "pending"
    (handle.folder.execution / "go").write_text("")
    out = handle.wait(120)
    assert out.status == "succeeded" and out.result == {"first": "ready", "go": True}
    done = read_run_log(workspace, handle.run_id)
    assert [s.status for s in done.steps] == ["checkpointed", "checkpointed"]
    assert done.run.live is False


def test_the_preview_names_reused_steps_and_the_one_to_run_again(workspace: Workspace) -> None:
    """After a crash inside a step, the preview reuses its predecessor and reruns it."""
    workspace.save_draft("loop", LOOP)
    first = go_run(workspace, "loop", {"xs": [1, 2, 3]}, crash="during:double#2")
    assert first.status == "interrupted"
    preview = preview_recovery(workspace, first.run_id)
    assert (preview.outcome, preview.attempt, preview.blocking) == ("recover", 2, [])
    assert [(c["name"], c["occurrence"]) for c in preview.reused] == [("double", 1)]
    assert [(c["name"], c["function_id"], c["started_in"]) for c in preview.rerun] == [
        ("double", 2, [1])
    ]
    interrupted = read_run_log(workspace, first.run_id).steps[1]
    assert (interrupted.status, list(interrupted.executed_in)) == ("interrupted", [1])
    assert recover(workspace, first.run_id).status == "succeeded"
    log = read_run_log(workspace, first.run_id)
    assert [(list(s.executed_in), list(s.reused_in)) for s in log.steps] == [
        ([1], [2]),
        ([1, 2], []),
        ([2], []),
    ]


def test_the_preview_names_the_uncertain_call_that_stops_recovery(workspace: Workspace) -> None:
    """A crash inside an agent call: the preview says recovery stops for that call."""
    setup_mixed(workspace)
    first = go_run(workspace, "mixed", INPUT, crash="during:agent:extract")
    assert first.status == "interrupted"
    preview = preview_recovery(workspace, first.run_id)
    assert preview.outcome == "stops" and preview.reason is not None
    assert preview.reason["code"] == "needs-reconciliation"
    assert [(b["call"], b["step"], b["key"]) for b in preview.blocking] == [
        ("agent 'extract'", "extract_invoice", "mixed-1/1/1")
    ]
    assert [c["name"] for c in preview.rerun] == ["extract_invoice"]
    receipt = read_run_log(workspace, first.run_id).receipts[0]
    assert (receipt.state, receipt.blocking) == ("pending", True)
    proc = relay_cli(workspace, "logs", first.run_id, "--json")
    doc = json.loads(proc.stdout)
    assert doc["preview"]["blocking"][0]["call"] == "agent 'extract'"
    assert {"events", "receipts", "children", "steps", "attempts"} <= set(doc)
    held = recover(workspace, first.run_id)
    assert held.status == "needs_reconciliation"  # what the preview said


def test_runs_can_be_filtered(workspace: Workspace) -> None:
    """Runs filter by relay, status, release (draft, version or hash) and creation time."""
    workspace.save_draft("loop", LOOP)
    a = go_run(workspace, "loop", {"xs": [1]})
    b = go_run(workspace, "loop", {"xs": [1, 2]}, crash="after:double#1")
    published = commands.publish(workspace, "loop")
    c: RunOutcome = commands.run(workspace, "loop", run_input={"xs": [3]}, release="v1").wait(120)
    assert (a.status, b.status, c.status) == ("succeeded", "interrupted", "succeeded")

    def ids(**filters: Any) -> list[str]:
        return [r.run_id for r in list_runs(workspace, **filters)]

    assert ids() == ["loop-1", "loop-2", "loop-3"]
    assert ids(relay="loop", status="interrupted") == ["loop-2"]
    assert ids(status=["succeeded", "failed"]) == ["loop-1", "loop-3"]
    assert ids(release="draft") == ["loop-1", "loop-2"]
    assert ids(release="v1") == ids(release=published.release.hash[:8]) == ["loop-3"]
    first, second, third = list_runs(workspace)
    assert ids(since=third.created_at) == ["loop-3"]
    between = datetime.fromtimestamp((first.created_at + second.created_at) / 2000)
    assert ids(until=between) == ["loop-1"] and ids(since=between) == ["loop-2", "loop-3"]
    with pytest.raises(InvalidInputError, match="Unknown run status 'sucess'"):
        list_runs(workspace, status="sucess")


BRANCHY = textwrap.dedent(
    """
    import asyncio
    from dbos import DBOS


    @DBOS.step()
    async def a(x):
        return x


    @DBOS.step()
    async def b(x):
        if x == 1:
            raise ValueError("no")
        return x


    @DBOS.workflow()
    async def run(INPUT):
        pair = await asyncio.gather(a(1), b(2))
        n = 0
        while INPUT["n"] > n:
            await a(3)
            n += 1
            if n == 2:
                break
        try:
            await b(1)
        except ValueError:
            await a(9)
        return {"pair": pair}
    """
)


def test_the_overlay_follows_gather_break_and_except(workspace: Workspace) -> None:
    """Gathered siblings, a loop left by break and an except handler are each drawn as run."""
    workspace.save_draft("branchy", BRANCHY)
    out = go_run(workspace, "branchy", {"n": 5})
    assert out.status == "succeeded", out.error
    flow = build_flow_graph(workspace.load_draft("branchy").source, relay="branchy")
    doc = overlay_run(flow, read_run_log(workspace, out.run_id)).to_dict()
    VALIDATOR.validate(doc)
    drawn = {
        n["id"] if n["type"] in ("step", "input", "output") else n["type"]: (
            n["status"],
            n["count"],
        )
        for n in doc["nodes"]
    }
    assert drawn == {
        "input": ("succeeded", 1),
        "parallel": ("succeeded", 1),
        "step-a": ("succeeded", 1),
        "step-b": ("succeeded", 1),
        "loop": ("succeeded", 2),
        "step-a-2": ("succeeded", 2),
        "decision": ("succeeded", 2),
        "try": ("succeeded", 1),
        "step-b-2": ("failed", 1),
        "step-a-3": ("succeeded", 1),
        "output": ("succeeded", 1),
    }
    types = {n["id"]: n["type"] for n in doc["nodes"]}
    untaken = [(types[e["from"]], types[e["to"]]) for e in doc["edges"] if not e["taken"]]
    assert untaken == [("loop", "try"), ("step", "output")]  # left by break; b(1) raised


DIES = textwrap.dedent(
    """
    import os, sys
    from dbos import DBOS

    @DBOS.step()
    async def leave():
        print("RuntimeError: the lab's power went out", file=sys.stderr, flush=True)
        os._exit(3)

    @DBOS.workflow()
    async def run(INPUT):
        return await leave()
    """
)


def test_an_attempt_that_died_says_its_last_words_in_the_header(workspace: Workspace) -> None:
    """A process that exits on its own (not a --crash) is interrupted; the header's reason
    gives its exit code and the last line it wrote to stderr, so the view says why."""
    workspace.save_draft("dies", DIES)
    out = go_run(workspace, "dies", None)
    assert out.status == "interrupted", out.error
    header = run_header(read_run_log(workspace, out.run_id))
    assert header["reason"] == (
        "its process exited with code 3 before the run finished; "
        "its last words: RuntimeError: the lab's power went out"
    ), header
