"""Calls map to the node of their call site: helpers inlined twice, gathered calls, and
generated relays crashed at random points, checked against the ledger alone.

The run view, the side panel and ``overlay_run`` share one mapping (the live view is painted
by ``overlay_run`` from the run's record as it goes); the property test checks it against
what the child wrote in the ledger: the attempts in which each call site's body ran
(``step_start``) and reused its checkpoint (``step_reused``), and no other node touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay_notebook import commands
from relay_notebook.history import overlay_run
from relay_notebook.history.run_path import call_key, node_site
from relay_notebook.magics.runs import RunView
from relay_notebook.record.ledger import read_events
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.workspace import Workspace
from tests.relays import steps

TWICE = """\
from dbos import DBOS


@DBOS.step()
async def charge(amount):
    return amount


async def pay(amount):
    return await charge(amount)


@DBOS.workflow()
async def run(INPUT):
    first = await pay(1)
    if INPUT["twice"]:
        second = await pay(2)
    return first
"""

GATHERED = (
    "import asyncio\nimport sys\n\nfrom dbos import DBOS\n\n\n"
    + steps("fetch")
    + """
@DBOS.workflow()
async def run(INPUT):
    if INPUT["left"]:
        values = await asyncio.gather(fetch(1), fetch(2))
    else:
        values = await asyncio.gather(fetch(3), fetch(4))
    return [sum(values), sys.get_coroutine_origin_tracking_depth()]
"""
)


def _statuses(ws: Workspace, relay: str, run_id: str) -> dict[str, Any]:
    graph = overlay_run(commands.graph(ws, relay), commands.logs(ws, run_id))
    return {n.id: n.details.get("status") for n in graph.nodes}


def test_a_helper_inlined_twice_colours_only_the_call_that_ran(workspace: Workspace) -> None:
    """pay() is drawn twice; a run that pays once colours the first charge, greys the second."""
    workspace.save_draft("twice", TWICE)
    graph = commands.graph(workspace, "twice")
    charges = [n for n in graph.nodes if n.type == "step"]
    assert [n.details["site"] for n in charges] == [[15, 10], [17, 10]]
    outcome = commands.run(workspace, "twice", run_input={"twice": False}).wait(120)
    assert outcome.status == "succeeded"
    status = _statuses(workspace, "twice", outcome.run_id)
    assert status[charges[0].id] == "succeeded"
    assert status[charges[1].id] == "not_reached"
    both = commands.run(workspace, "twice", run_input={"twice": True}).wait(120)
    status = _statuses(workspace, "twice", both.run_id)
    assert status[charges[0].id] == status[charges[1].id] == "succeeded"


def test_gathered_calls_are_placed_on_the_branch_that_made_them(workspace: Workspace) -> None:
    """Calls run as tasks by asyncio.gather keep the site they were made at: the else
    branch's fetch nodes stay grey when the if branch ran. The child finds their sites
    without tracking any coroutine's origin (which cost every coroutine made)."""
    workspace.save_draft("gathered", GATHERED)
    outcome = commands.run(workspace, "gathered", run_input={"left": True}).wait(120)
    assert outcome.result == [3, 0]
    status = _statuses(workspace, "gathered", outcome.run_id)
    fetches = [n.id for n in commands.graph(workspace, "gathered").nodes if n.type == "step"]
    assert [status[f] for f in fetches] == ["succeeded", "succeeded", "not_reached", "not_reached"]


# -- generated relays ---------------------------------------------------------------------------

STEPS = """\
import asyncio

from dbos import DBOS


@DBOS.step()
async def add(x):
    return (x + 3) % 1000


@DBOS.step()
async def double(x):
    return (x * 2) % 1000


@DBOS.step()
async def risky(x):
    if x % 3 == 0:
        raise ValueError("a multiple of three")
    return x + 1


@DBOS.workflow()
async def run(INPUT):
    x = INPUT["x"]
"""

CALL = st.sampled_from(["add", "double"])


def _block(draw: Any, depth: int, indent: str) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["call", "try", "gather"] + (["if", "for"] if depth < 2 else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "call":
            lines.append(f"{indent}x = await {draw(CALL)}(x)")
        elif kind == "try":
            lines += [
                f"{indent}try:",
                f"{indent}    x = await risky(x)",
                f"{indent}except ValueError:",
                f"{indent}    x = await {draw(CALL)}(x)",
            ]
        elif kind == "gather":
            # one call of each step: same-step calls on one line are test_gathered_calls' case
            lines.append(f"{indent}x = sum(await asyncio.gather(add(x), double(x))) % 1000")
        elif kind == "if":
            lines.append(f"{indent}if x % 2 == 0:")
            lines += _block(draw, depth + 1, indent + "    ")
            lines.append(f"{indent}else:")
            lines += _block(draw, depth + 1, indent + "    ")
        else:
            lines.append(f"{indent}for _ in range({draw(st.integers(1, 3))}):")
            lines += _block(draw, depth + 1, indent + "    ")
    return lines


@st.composite
def relays(draw: Any) -> tuple[str, int]:
    body = _block(draw, 0, "    ")
    return STEPS + "\n".join(body) + '\n    return {"x": x}\n', draw(st.integers(0, 999))


def _expected_from_ledger(folder: Path, graph: Any) -> dict[str, dict[str, set[int]]]:
    """Per node, the attempts that ran and reused its calls, from the ledger alone."""
    nodes = {}
    for node in graph.nodes:
        key, site = call_key(node), node_site(node)
        if key is not None and site is not None:
            nodes[(key, site)] = node.id
    expected: dict[str, dict[str, set[int]]] = {}
    for event in read_events(folder / "dbos_events.jsonl"):
        which = {"step_start": "executed_in", "step_reused": "reused_in"}.get(event["kind"])
        if which is None:
            continue
        node_id = nodes[(event["step"], tuple(event["site"]))]
        entry = expected.setdefault(node_id, {"executed_in": set(), "reused_in": set()})
        entry[which].add(int(event["attempt"]))
    return expected


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(relay=relays(), data=st.data())
def test_generated_relays_crashed_anywhere_paint_what_the_ledger_says(
    workspace: Workspace, relay: tuple[str, int], data: Any
) -> None:
    """For generated relays (branches, loops, try, gather) crashed at a random call and
    recovered, the live view's last state equals overlay_run's, and each node's executed and
    reused attempts equal what the ledger recorded for its call site; other nodes are grey."""
    source, x = relay
    name = f"gen{abs(hash(source)) % 10**8}"
    workspace.save_draft(name, source)
    clean = commands.run(workspace, name, run_input={"x": x}).wait(120)
    assert clean.status == "succeeded", clean.error
    ledger = Path(commands.logs(workspace, clean.run_id).run.folder) / "dbos_events.jsonl"
    # during: any call whose body ran; after: one whose checkpoint was saved (not raised)
    when = data.draw(st.sampled_from(["after", "during"]))
    kind = "step_end" if when == "after" else "step_start"
    calls = [(e["step"], e["occurrence"]) for e in read_events(ledger) if e["kind"] == kind]
    step, occurrence = data.draw(st.sampled_from(calls))
    crash = f"{when}:{step}#{occurrence}"
    crashed = RunView.start(
        workspace, name, run_input={"x": x}, release=None, crash=crash, shell=None
    )
    assert crashed.wait(120).status == "interrupted"
    view = RunView.recover(workspace, crashed.monitor.run_id or "", shell=None)
    assert view.wait(120).status == "succeeded"
    live = view.monitor.bundle()[GRAPH_MIME]
    log = commands.logs(workspace, view.monitor.run_id or "")
    flow = commands.graph(workspace, name)
    overlay = overlay_run(flow, log).to_dict()
    assert [n["details"].get("status") for n in live["nodes"]] == [
        n["details"].get("status") for n in overlay["nodes"]
    ]
    expected = _expected_from_ledger(Path(log.run.folder), flow)
    for node in overlay["nodes"]:
        details = node["details"]
        if node["id"] in expected:
            want = expected[node["id"]]
            assert set(details["executed_in"]) == want["executed_in"], (crash, node["id"])
            assert set(details["reused_in"]) == want["reused_in"], (crash, node["id"])
        elif call_key(flow.node(node["id"])) is not None:
            assert details["status"] == "not_reached", (crash, node["id"], source)
