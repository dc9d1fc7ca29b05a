"""DBOS programs, written as DBOS's documentation writes them, run as relays: admitted, drawn,
equal to the same program under bare DBOS, crashed at their steps and recovered.

Each program is run twice in its test: as a relay (the kit's child launches DBOS, then calls
``run``) and under bare DBOS in a subprocess of its own, on its own SQLite file (DBOS
configured and launched first, the program imported, ``run`` called with a workflow id), and
the two results must be equal. Crash points are given as a user gives them (``relay run
--crash``), so the flow graph must know them, and recovery goes through ``relay recover``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_runner import go

from relay_notebook import commands
from relay_notebook.commands import time_travel
from relay_notebook.history import overlay_run, read_run_log
from relay_notebook.magics.runs import RunView
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.runner.fork import ForkRequest
from relay_notebook.runner.messages import send_message
from relay_notebook.source.admission import check_source
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.layout import layout_graph
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.views.svg import caption, render_svg
from relay_notebook.workspace import Workspace

# -- the programs -----------------------------------------------------------------------------

SYNC = """\
from dbos import DBOS


@DBOS.step()
def fetch(n):
    return n * 2


@DBOS.step()
def total(values):
    return sum(values)


@DBOS.workflow()
def run(INPUT):
    values = [fetch(n) for n in range(INPUT["n"])]
    DBOS.set_event("progress", len(values))
    DBOS.sleep(0.1)
    return {"values": values, "total": total(values)}
"""

QUEUE = """\
from dbos import DBOS

# one child at a time, so the N-th call of a step is the N-th child's; polled every 0.1 s
queue = DBOS.register_queue("example_queue", worker_concurrency=1, polling_interval_sec=0.1)


@DBOS.step()
def process_task(task):
    return task * 10


@DBOS.step()
def finish(task, value):
    return value + task


@DBOS.workflow()
def process(task):
    value = process_task(task)
    return finish(task, value)


@DBOS.workflow()
def run(INPUT):
    handles = [queue.enqueue(process, task) for task in INPUT["tasks"]]
    return {"results": [handle.get_result() for handle in handles]}
"""

CHILDREN = """\
from dbos import DBOS

DBOS.register_queue("work", worker_concurrency=2)


@DBOS.step()
async def fetch(n):
    return n + 1


@DBOS.step()
async def double(n):
    return n * 2


@DBOS.workflow()
async def child(n):
    value = await fetch(n)
    return await double(value)


@DBOS.workflow()
async def run(INPUT):
    first = await child(INPUT["n"])
    handle = await DBOS.start_workflow_async(child, first)
    second = await handle.get_result()
    queued = await DBOS.enqueue_workflow_async("work", child, second)
    return {"values": [first, second, await queued.get_result()]}
"""

FAN_OUT = """\
import asyncio

from dbos import DBOS


@DBOS.step()
async def fetch_fast(x):
    return x + 1


@DBOS.step()
async def fetch_slow(x):
    await asyncio.sleep(0.05)
    return x + 2


def shout(text):
    return text.upper()


@DBOS.workflow()
async def run(INPUT):
    fast = fetch_fast(INPUT["x"])
    slow = fetch_slow(INPUT["x"])
    done, pending = await DBOS.asyncio_wait([fast, slow])
    both = await asyncio.gather(fetch_fast(10), fetch_slow(20))
    loud = await DBOS.run_step_async({"name": "shouting"}, shout, INPUT["word"])
    tasks = [asyncio.create_task(fetch_fast(i)) for i in range(3)]
    finished, _ = await asyncio.wait(tasks)
    return {
        "first": sorted(t.result() for t in done),
        "both": both,
        "loud": loud,
        "tasks": sorted(t.result() for t in finished),
    }
"""

# DBOS.run_step_async with its options and function given by keyword, as DBOS names them
KEYWORD_RUNNER = """\
from dbos import DBOS


def shout(text):
    return text.upper()


@DBOS.workflow()
async def run(INPUT):
    loud = await DBOS.run_step_async(
        dbos_step_options={"name": "shouting"}, func=shout, text=INPUT["word"]
    )
    return {"loud": loud}
"""

TRANSACTIONS = """\
import sqlalchemy as sa
from dbos import DBOS, SQLAlchemyDatasource

# a relative path: the relay's own folder (its run's execution folder)
ds = SQLAlchemyDatasource.create("sqlite:///app.sqlite")


@ds.transaction()
def create_table():
    ds.sql_session().execute(sa.text("CREATE TABLE IF NOT EXISTS greetings (name TEXT)"))


@ds.transaction(name="greet")
def insert_greeting(name):
    ds.sql_session().execute(sa.text("INSERT INTO greetings VALUES (:n)"), {"n": name})
    return name


@ds.transaction()
def count_greetings():
    return ds.sql_session().execute(sa.text("SELECT count(*) FROM greetings")).scalar()


@DBOS.step()
def shout(name):
    return name.upper()


@DBOS.workflow()
def run(INPUT):
    create_table()
    for name in INPUT["names"]:
        insert_greeting(shout(name))
    return {"count": count_greetings()}
"""

APPROVAL = """\
from dbos import DBOS


@DBOS.step()
def prepare(order):
    return {"order": order, "amount": 40}


@DBOS.step()
def pay(bill, note):
    return {"paid": bill["amount"], "note": note}


@DBOS.workflow()
def run(INPUT):
    bill = prepare(INPUT["order"])
    answer = DBOS.recv("approval", timeout_seconds=60)
    return pay(bill, answer["note"])
"""

# -- bare DBOS --------------------------------------------------------------------------------

BARE = textwrap.dedent(
    """\
    import asyncio, importlib.util, inspect, json, os, sys
    from dbos import DBOS, SetWorkflowID

    program, run_input = sys.argv[1], json.loads(sys.argv[2])
    DBOS(config={"name": "bare-dbos", "system_database_url": "sqlite:///bare.sqlite",
                 "log_level": "WARNING"})
    # DBOS 3.4 wants datasources made before its launch and queues registered after it
    queues = "DBOS.register_queue" in open(program).read()
    if queues:
        DBOS.launch()
    spec = importlib.util.spec_from_file_location("program", program)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not queues:
        DBOS.launch()
    with SetWorkflowID("bare-1"):
        if inspect.iscoroutinefunction(module.run):
            result = asyncio.run(module.run(run_input))
        else:
            result = module.run(run_input)
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)
    """
)


def bare_dbos(tmp_path: Path, source: str, run_input: Any) -> Any:
    """The program's result under bare DBOS: its own process, folder and SQLite file."""
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "program.py").write_text(source)
    (folder / "bare.py").write_text(BARE)
    proc = subprocess.run(
        [sys.executable, "bare.py", "program.py", json.dumps(run_input)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- helpers ----------------------------------------------------------------------------------


def admitted(source: str) -> None:
    """The program passes admission with no warning at all."""
    assert check_source(source) == [], check_source(source)


def nodes(source: str, kind: str) -> list[str]:
    """The labels of the flow graph's nodes of ``kind``, in drawing order."""
    return [n.label for n in build_flow_graph(source).nodes if n.type == kind]


def bodies_run(ws: Workspace, run_id: str, step: str) -> int:
    """How many times a body of ``step`` started, over every attempt of the run."""
    events = read_events(find_run(ws, run_id).events)
    return sum(1 for e in events if e.get("kind") == "step_start" and e.get("step") == step)


def crash_then_recover(ws: Workspace, relay: str, run_input: Any, crash: str) -> Any:
    """``relay run RELAY --crash CRASH`` then ``relay recover``: the recovered outcome."""
    first = go(commands.run(ws, relay, run_input=run_input, crash=crash))
    assert first.status == "interrupted", first.error
    events = read_events(find_run(ws, first.run_id).events)
    assert any(e.get("kind") == "crash_injected" for e in events)
    return go(commands.recover(ws, first.run_id))


# -- sync workflows ---------------------------------------------------------------------------


def test_a_sync_workflow_is_admitted_drawn_and_runs_as_under_bare_dbos(
    workspace: Workspace, tmp_path: Path
) -> None:
    """`@DBOS.workflow() def run` with sync steps, set_event and sleep: DBOS's result."""
    admitted(SYNC)
    assert nodes(SYNC, "step") == ["fetch", "total"]
    assert nodes(SYNC, "event") == ["event progress"] and nodes(SYNC, "sleep") == ["sleep 0.1 s"]
    workspace.save_draft("sync", SYNC)
    out = go(commands.run(workspace, "sync", run_input={"n": 3}))
    assert out.status == "succeeded", out.error
    assert out.result == bare_dbos(tmp_path, SYNC, {"n": 3}) == {"values": [0, 2, 4], "total": 6}


def test_a_sync_workflow_crashed_after_a_step_recovers_from_its_checkpoints(
    workspace: Workspace,
) -> None:
    """After fetch#2's checkpoint the process dies; recovery reuses both fetches."""
    workspace.save_draft("sync", SYNC)
    final = crash_then_recover(workspace, "sync", {"n": 3}, "after:fetch#2")
    assert final.status == "succeeded" and final.result == {"values": [0, 2, 4], "total": 6}
    assert final.reused[:2] == [1, 2]
    assert bodies_run(workspace, final.run_id, "fetch") == 3  # none ran twice


# -- queues and child workflows ---------------------------------------------------------------


def test_a_module_level_queue_fans_out_child_workflows_as_under_bare_dbos(
    workspace: Workspace, tmp_path: Path
) -> None:
    """`queue = DBOS.register_queue(...)` at the top, children enqueued: drawn, run, equal."""
    admitted(QUEUE)
    graph = build_flow_graph(QUEUE)
    (child,) = [n for n in graph.nodes if n.type == "workflow"]
    assert (child.label, child.details["via"]) == ("process", "queue.enqueue")
    steps = [n for n in graph.nodes if n.type == "step"]
    assert [n.label for n in steps] == ["process_task", "finish"]
    assert {n.details["in_workflow"] for n in steps} == {child.id}
    assert not [n for n in graph.nodes if n.type == "unresolved"]
    workspace.save_draft("fan", QUEUE)
    out = go(commands.run(workspace, "fan", run_input={"tasks": [1, 2, 3]}))
    assert out.status == "succeeded", out.error
    assert out.result == bare_dbos(tmp_path, QUEUE, {"tasks": [1, 2, 3]})
    assert out.result == {"results": [11, 22, 33]}
    painted = overlay_run(graph, read_run_log(workspace, out.run_id))
    assert [(n.label, n.details["status"]) for n in painted.nodes if n.type == "step"] == [
        ("process_task ×3", "succeeded"),  # the children's calls, placed on the child's body
        ("finish ×3", "succeeded"),
    ]
    # a fork from a queued child's call forks that child from it (DBOS's fork of the child,
    # the run's workflow from after the enqueue, pointed at the forked child): the first child
    # and the second's calls before it are copied, the rest run fresh, and the result is equal
    forked = go(time_travel.fork(workspace, out.run_id, ForkRequest("process_task#2")))
    assert forked.status == "succeeded" and forked.result == out.result, forked.error
    shown = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home), "logs",
         forked.run_id],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    rows = [line.split(None, 3) for line in shown]
    starts = [row[3] for row in rows if len(row) == 4 and row[1] == "process"]
    assert starts == [
        f"workflow; copied from {out.run_id}",  # the first child, as it ran
        f"workflow; copied from {out.run_id}",  # pointed at the forked second
        "workflow; executed in 1",  # the third child, fresh
    ], shown
    assert f"       child workflow {forked.run_id}-2 (process): DBOS SUCCESS, 2 calls" in shown
    again = go(time_travel.fork(workspace, out.run_id, ForkRequest("process#2")))
    assert again.status == "succeeded" and again.result == out.result, again.error


def test_a_crash_in_a_queued_childs_step_is_recovered_from_the_childrens_checkpoints(
    workspace: Workspace,
) -> None:
    """--crash after:process_task#2 is accepted, fires in a child, and recovery finishes
    every child from its checkpoints: no step body of any child runs twice."""
    workspace.save_draft("fan", QUEUE)
    final = crash_then_recover(workspace, "fan", {"tasks": [1, 2, 3]}, "after:process_task#2")
    assert final.status == "succeeded" and final.result == {"results": [11, 22, 33]}
    log = read_run_log(workspace, final.run_id)
    assert len(log.children) == 3
    child_steps = [s for c in log.children for s in c.steps]
    assert sorted(s.name for s in child_steps) == ["finish"] * 3 + ["process_task"] * 3
    assert all(len(s.executed_in) == 1 for s in child_steps)
    second = next(c for c in log.children if c.workflow_id.endswith("-2"))
    assert [(s.name, s.executed_in, s.reused_in) for s in second.steps] == [
        ("process_task", (1,), (2,)),  # the crash came after its checkpoint
        ("finish", (2,), ()),
    ]
    assert bodies_run(workspace, final.run_id, "process_task") == 3


def test_awaited_started_and_enqueued_children_match_bare_dbos_and_recover(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A child awaited, one started and one enqueued (async): each drawn with its own steps;
    a crash during a child's second `double` is recovered to DBOS's result."""
    admitted(CHILDREN)
    graph = build_flow_graph(CHILDREN)
    children = [n for n in graph.nodes if n.type == "workflow"]
    assert [n.details.get("via") for n in children] == [
        None,
        "DBOS.start_workflow_async",
        "DBOS.enqueue_workflow_async",
    ]
    steps = [(n.label, n.details["in_workflow"]) for n in graph.nodes if n.type == "step"]
    assert steps == [(s, c.id) for c in children for s in ("fetch", "double")]
    expected = bare_dbos(tmp_path, CHILDREN, {"n": 1})
    assert expected == {"values": [4, 10, 22]}
    workspace.save_draft("kids", CHILDREN)
    clean = go(commands.run(workspace, "kids", run_input={"n": 1}))
    assert clean.result == expected
    painted = overlay_run(graph, read_run_log(workspace, clean.run_id))
    assert {n.details["status"] for n in painted.nodes} == {"succeeded"}  # every child's too
    final = crash_then_recover(workspace, "kids", {"n": 1}, "during:double#2")
    assert final.status == "succeeded" and final.result == expected
    assert bodies_run(workspace, final.run_id, "fetch") == 3
    assert bodies_run(workspace, final.run_id, "double") == 4  # the one killed mid-way, again


NESTED = """\
from dbos import DBOS


@DBOS.step()
async def leaf(x):
    return x + 1


@DBOS.workflow()
async def grandchild(x):
    return await leaf(x)


@DBOS.step()
async def mid_step(x):
    return x * 2


@DBOS.workflow()
async def child(x):
    return await grandchild(await mid_step(x))


@DBOS.workflow()
async def run(INPUT):
    return {"v": await child(INPUT["x"])}
"""


def test_a_grandchilds_calls_are_placed_and_reused_after_a_crash_in_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A child workflow that starts its own child: crashed right after the grandchild's step,
    recovered, the grandchild's checkpoint is reused in attempt 2 as the ledger's replay says,
    and the run graph places that call on its node (ran in 1, reused), as the child's."""
    admitted(NESTED)
    expected = bare_dbos(tmp_path, NESTED, {"x": 1})
    workspace.save_draft("nest", NESTED)
    final = crash_then_recover(workspace, "nest", {"x": 1}, "after:leaf")
    assert final.status == "succeeded" and final.result == expected == {"v": 3}
    assert bodies_run(workspace, final.run_id, "leaf") == 1
    log = commands.logs(workspace, final.run_id)
    calls = {s.name: s for child in log.children for s in child.steps}
    assert (calls["leaf"].executed_in, calls["leaf"].reused_in) == ((1,), (2,))
    assert (calls["mid_step"].executed_in, calls["mid_step"].reused_in) == ((1,), (2,))
    graph = {n["id"]: n for n in commands.run_detail(workspace, final.run_id)["graph"]["nodes"]}
    for node in ("step-leaf", "step-mid_step", "workflow-grandchild"):
        assert graph[node]["details"]["status"] == "reused", (node, graph[node]["details"])
    # placed on its node: the attempt that ran it and the one that reused it
    assert graph["step-leaf"]["attempts"] == [1]
    assert graph["step-leaf"]["details"]["reused_in"] == [2]
    # the notebook's view of the run paints it the same
    view = RunView.of_run(workspace, final.run_id, shell=None)
    view.monitor.refresh()
    live = {n["id"]: n for n in view.monitor.bundle()[GRAPH_MIME]["nodes"]}
    leaf = live["step-leaf"]
    assert leaf["details"]["status"] == "reused" and leaf["attempts"] == [1]


# -- run_step, asyncio_wait, gather, asyncio.wait ---------------------------------------------


def test_run_step_and_fan_outs_are_drawn_in_parallel_without_warnings(
    workspace: Workspace, tmp_path: Path
) -> None:
    """DBOS.asyncio_wait of two coroutines made earlier, gather, asyncio.wait of tasks and
    run_step_async: parallel nodes, a step named as DBOS names it, no missing-await."""
    admitted(FAN_OUT)
    graph = build_flow_graph(FAN_OUT)
    assert nodes(FAN_OUT, "parallel") == ["wait", "gather", "wait"]
    fans = [n.id for n in graph.nodes if n.type == "parallel"]
    out_of = {f: sorted(e.target for e in graph.edges if e.source == f) for f in fans}
    assert out_of[fans[0]] == ["step-fetch_fast", "step-fetch_slow"]
    assert out_of[fans[1]] == ["step-fetch_fast-2", "step-fetch_slow-2"]
    shouting = graph.node("step-shouting")
    assert shouting.details["via"] == "DBOS.run_step_async"
    inp = {"x": 1, "word": "hi"}
    expected = bare_dbos(tmp_path, FAN_OUT, inp)
    workspace.save_draft("fans", FAN_OUT)
    assert go(commands.run(workspace, "fans", run_input=inp)).result == expected
    final = crash_then_recover(workspace, "fans", inp, "after:shouting")
    assert final.status == "succeeded" and final.result == expected
    assert bodies_run(workspace, final.run_id, "shouting") == 1


def test_run_step_async_given_its_function_by_keyword_runs_as_a_step_as_under_bare_dbos(
    workspace: Workspace, tmp_path: Path
) -> None:
    """`DBOS.run_step_async(dbos_step_options=..., func=...)`: DBOS's result, run as the relay's
    step (its events, its crash point, reused after a crash)."""
    inp = {"word": "hi"}
    expected = bare_dbos(tmp_path, KEYWORD_RUNNER, inp)
    assert expected == {"loud": "HI"}
    workspace.save_draft("keywords", KEYWORD_RUNNER)
    assert go(commands.run(workspace, "keywords", run_input=inp)).result == expected
    final = crash_then_recover(workspace, "keywords", inp, "after:shouting")
    assert final.status == "succeeded" and final.result == expected
    assert bodies_run(workspace, final.run_id, "shouting") == 1


# -- transactions -----------------------------------------------------------------------------


def test_datasource_transactions_are_drawn_run_and_roll_back_with_a_crash(
    workspace: Workspace, tmp_path: Path
) -> None:
    """`@ds.transaction()` functions are transaction nodes (committed with their checkpoint);
    a crash during one rolls it back, and recovery commits it once."""
    admitted(TRANSACTIONS)
    graph = build_flow_graph(TRANSACTIONS)
    tx = {n.label: n for n in graph.nodes if n.details.get("transaction") == "ds"}
    assert sorted(tx) == ["count_greetings", "create_table", "greet"]
    assert {n.details["guarantee"]["kind"] for n in tx.values()} == {"recorded_once"}
    assert "commits together with its checkpoint" in tx["greet"].details["guarantee"]["text"]
    laid = layout_graph(graph)
    svg = render_svg(laid)
    assert {caption(n) for n in laid.nodes if n.label in tx} == {
        f"TRANSACTION · L{tx[name].line}" for name in tx
    }
    assert all(f"TRANSACTION · L{n.line}" in svg for n in tx.values())
    inp = {"names": ["ann", "bob"]}
    expected = bare_dbos(tmp_path, TRANSACTIONS, inp)
    assert expected == {"count": 2}
    workspace.save_draft("greeter", TRANSACTIONS)
    assert go(commands.run(workspace, "greeter", run_input=inp)).result == expected
    final = crash_then_recover(workspace, "greeter", inp, "during:greet#2")
    assert final.status == "succeeded" and final.result == expected  # rolled back, then once
    assert bodies_run(workspace, final.run_id, "greet") == 3


# -- a crash point past a wait ----------------------------------------------------------------


def test_a_crash_point_past_a_wait_fires_in_the_attempt_that_resumes_the_run(
    workspace: Workspace,
) -> None:
    """--crash after:pay on a run that goes waiting in recv first: the resumed attempt crashes
    there, and recovery pays once with the message's note."""
    workspace.wait_grace_s = 0.5
    workspace.save_draft("approval", APPROVAL)
    first = go(commands.run(workspace, "approval", run_input={"order": "A-1"}, crash="after:pay"))
    assert first.status == "waiting", first.error
    delivery = send_message(workspace, first.run_id, "approval", {"note": "ok"})
    assert delivery.handle is not None
    resumed = go(delivery.handle)
    assert resumed.status == "interrupted", resumed.error
    events = read_events(find_run(workspace, first.run_id).events)
    crashed = [e for e in events if e.get("kind") == "crash_injected"]
    assert [(e["step"], e["attempt"]) for e in crashed] == [("pay", 2)]
    final = go(commands.recover(workspace, first.run_id))
    assert final.status == "succeeded" and final.result == {"paid": 40, "note": "ok"}
    assert bodies_run(workspace, first.run_id, "pay") == 1


@pytest.mark.parametrize(
    ("source", "run_input", "points"),
    [
        (SYNC, {"n": 2}, ["fetch#1", "fetch#2", "total#1"]),
        (QUEUE, {"tasks": [1]}, ["process_task#1", "finish#1"]),
    ],
    ids=["sync", "queue"],
)
def test_crash_each_crashes_every_step_of_the_program_and_children_and_recovers(
    workspace: Workspace, source: str, run_input: Any, points: list[str]
) -> None:
    """`relay test --crash-each`: every step, a child workflow's too, crashed after and during;
    every recovered run gives the clean run's result."""
    from relay_notebook.commands.crash_each import crash_each

    workspace.save_draft("prog", source)
    report = crash_each(workspace, "prog", run_input)
    assert [p.point for p in report.points] == [
        f"{when}:{call}" for call in points for when in ("after", "during")
    ]
    assert report.ok, [(p.point, p.status, p.note) for p in report.differing]
    assert all(p.status == "succeeded" for p in report.points)


@pytest.mark.parametrize("source", [SYNC, QUEUE, CHILDREN, FAN_OUT, TRANSACTIONS, APPROVAL])
def test_every_program_is_admitted_without_a_diagnostic(source: str) -> None:
    """Admission and lint find nothing to say about programs written as DBOS documents them."""
    admitted(source)
