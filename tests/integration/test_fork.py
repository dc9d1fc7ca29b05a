"""Forks of real runs: copied checkpoints whose bodies do not run again, edited inputs and
step outputs, a failed run finished on fixed code, incompatible code refused, forks from a
loop's second call and from an except path, crash and recovery of a fork, a fork of a fork.

Every relay here notes each body it runs in ``execution/effects.txt`` (a side effect per
run folder), which is how "did not run again" is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_notebook import commands
from relay_notebook.runner.crash import parse_crash_spec
from relay_notebook.runner.fork import ForkError, ForkRequest
from relay_notebook.runner.runs import start_fork
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

SHIPPING = relay_source("shipping")
ORDER = relay_source("order")
BIG = {"items": [{"sku": "a", "qty": 1, "unit": 50}, {"sku": "b", "qty": 1, "unit": 70}]}


def effects(ws: Workspace, run_id: str) -> list[str]:
    folder = Path(commands.logs(ws, run_id).run.folder)
    path = folder / "execution" / "effects.txt"
    return path.read_text().split() if path.exists() else []


def steps(ws: Workspace, run_id: str) -> list[tuple[str, list[int], str | None]]:
    return [(s.name, list(s.executed_in), s.copied_from) for s in commands.logs(ws, run_id).steps]


@pytest.fixture
def failed(workspace: Workspace) -> str:
    """A run of shipping that failed at its third step (check: 12 is over the limit 10)."""
    workspace.save_draft("shipping", SHIPPING)
    outcome = commands.run(workspace, "shipping", run_input={"n": 6}).wait(120)
    assert outcome.status == "failed"
    assert "total 12 is over the limit of 10" in outcome.error["message"]
    return outcome.run_id


def test_a_fork_onto_fixed_code_finishes_a_failed_run_without_repaying(
    workspace: Workspace, failed: str
) -> None:
    """Fixed, the draft forked from check#1 copies fetch and price (their bodies do not run),
    runs check and ship fresh, and succeeds; the parent stays failed."""
    workspace.save_draft("shipping", SHIPPING.replace("LIMIT = 10", "LIMIT = 100"))
    fork = start_fork(workspace, failed, ForkRequest("check#1", draft=True)).wait(120)
    assert fork.status == "succeeded" and fork.result == {"shipped": 12}
    assert effects(workspace, fork.run_id) == ["check", "ship"]
    assert steps(workspace, fork.run_id) == [
        ("fetch", [], failed),
        ("price", [], failed),
        ("check", [1], None),
        ("ship", [1], None),
    ]
    log = commands.logs(workspace, fork.run_id)
    assert log.run.fork["parent"] == failed and log.run.fork["from"] == "check#1"
    assert log.run.fork["code"] == "the draft"
    assert commands.logs(workspace, failed).run.status == "failed"


def test_an_edited_step_output_flows_into_the_later_steps(
    workspace: Workspace, failed: str
) -> None:
    """--set price#1=8 replaces the copied output: check sees 8, passes the old limit, and
    the run ships 8; the edit is recorded on the fork and its step."""
    fork = start_fork(workspace, failed, ForkRequest("check", sets={"price#1": 8})).wait(120)
    assert fork.status == "succeeded" and fork.result == {"shipped": 8}
    log = commands.logs(workspace, fork.run_id)
    assert log.run.fork["edits"] == {"input": False, "outputs": ["price#1"]}
    assert [s.edited for s in log.steps] == [False, True, False, False]


def test_an_edited_input_reaches_the_calls_that_run_fresh(
    workspace: Workspace, failed: str
) -> None:
    """--input {"n": 3} forked from fetch#1 copies nothing and runs every step on n = 3."""
    fork = start_fork(
        workspace, failed, ForkRequest("fetch", run_input={"n": 3}, input_given=True)
    ).wait(120)
    assert fork.status == "succeeded" and fork.result == {"shipped": 6}
    assert effects(workspace, fork.run_id) == ["fetch", "price", "check", "ship"]
    assert commands.logs(workspace, fork.run_id).run.input == {"n": 3}


def test_a_fork_onto_code_that_no_longer_calls_a_copied_step_is_refused(
    workspace: Workspace, failed: str
) -> None:
    """A draft that renamed fetch cannot take fetch's copied checkpoint: refused, naming it."""
    workspace.save_draft("shipping", SHIPPING.replace("fetch", "load"))
    with pytest.raises(ForkError, match=r"the copied call fetch \(function 1\)") as caught:
        start_fork(workspace, failed, ForkRequest("check", draft=True))
    assert caught.value.code == "fork-refused"


def test_a_call_the_parent_never_made_is_refused_with_the_calls_it_made(
    workspace: Workspace, failed: str
) -> None:
    """--from ship#1 (never reached) and price#2 (one call only) name the recorded calls."""
    with pytest.raises(ForkError, match=r"fetch#1, price#1, check#1"):
        start_fork(workspace, failed, ForkRequest("price#2"))


def test_forks_from_a_loops_second_call_and_from_an_except_path(workspace: Workspace) -> None:
    """From pack#2 the fork copies price and pack#1 only; from notify#2 (the except path the
    parent took) it copies everything before it."""
    workspace.save_draft("order", ORDER)
    parent = commands.run(workspace, "order", run_input={**BIG, "note": "boom"}).wait(120)
    assert parent.status == "succeeded" and parent.result["sent"] == "fallback"
    loop = start_fork(workspace, parent.run_id, ForkRequest("pack#2")).wait(120)
    assert loop.status == "succeeded" and loop.result == parent.result
    names = [(n, c is not None) for n, _, c in steps(workspace, loop.run_id)]
    assert names[:3] == [("price", True), ("pack", True), ("pack", False)]
    handler = start_fork(workspace, parent.run_id, ForkRequest("notify#2")).wait(120)
    assert handler.status == "succeeded"
    assert [c is not None for _, _, c in steps(workspace, handler.run_id)] == [
        True, True, True, True, True, False,
    ]  # fmt: skip


def test_a_fork_crashes_and_recovers_and_can_be_forked_again(
    workspace: Workspace, failed: str
) -> None:
    """A fork crashed after check is recovered with its copied and checkpointed steps reused
    (bodies run once), and a fork of that fork copies from it."""
    workspace.save_draft("shipping", SHIPPING.replace("LIMIT = 10", "LIMIT = 100"))
    crashed = start_fork(
        workspace, failed, ForkRequest("check", draft=True), crash=parse_crash_spec("after:check")
    ).wait(120)
    assert crashed.status == "interrupted"
    recovered = commands.recover(workspace, crashed.run_id).wait(120)
    assert recovered.status == "succeeded" and recovered.result == {"shipped": 12}
    assert effects(workspace, crashed.run_id) == ["check", "ship"]
    again = start_fork(workspace, crashed.run_id, ForkRequest("ship")).wait(120)
    assert again.status == "succeeded"
    assert effects(workspace, again.run_id) == ["ship"]
    assert [c for _, _, c in steps(workspace, again.run_id)][:3] == [crashed.run_id] * 3


def test_a_fork_on_postgresql_lives_in_the_same_database(
    workspace: Workspace, database_url: str
) -> None:
    """On PostgreSQL a failed run forked onto the fixed draft finishes in the same database,
    as its own DBOS application; copied bodies do not run; the parent is untouched."""
    from relay_notebook.runner import start_run
    from relay_notebook.runner.backend import app_name_for_run, connect, resolve_backend

    backend = resolve_backend(database_url)
    workspace.save_draft("shipping", SHIPPING)
    draft = workspace.load_draft("shipping")
    parent = start_run(workspace, draft, run_input={"n": 6}, backend=backend).wait(120)
    assert parent.status == "failed"
    workspace.save_draft("shipping", SHIPPING.replace("LIMIT = 10", "LIMIT = 100"))
    fork = start_fork(
        workspace, parent.run_id, ForkRequest("check", draft=True), backend=backend
    ).wait(120)
    assert fork.status == "succeeded" and fork.result == {"shipped": 12}
    assert effects(workspace, fork.run_id) == ["check", "ship"]
    assert [c for _, _, c in steps(workspace, fork.run_id)] == [parent.run_id] * 2 + [None] * 2
    with connect(backend) as conn:
        rows = dict(
            conn.execute(
                "SELECT workflow_uuid, application_name FROM dbos.workflow_status "
                "WHERE workflow_uuid IN (%s, %s)",
                (parent.run_id, fork.run_id),
            ).fetchall()
        )
    assert rows == {
        parent.run_id: app_name_for_run(parent.run_id),
        fork.run_id: app_name_for_run(fork.run_id),
    }
    assert commands.logs(workspace, parent.run_id).run.status == "failed"


def test_lineage_and_diff_show_forks_and_what_changed(workspace: Workspace, failed: str) -> None:
    """The lineage tree puts an edited fork and its own fork under the failed run; the diff
    of the parent and the fork names the edited output and the calls that ran differently."""
    from relay_notebook.history.lineage import diff_runs, lineage, lineage_text

    first = start_fork(workspace, failed, ForkRequest("check", sets={"price#1": 8})).wait(120)
    second = start_fork(workspace, first.run_id, ForkRequest("ship")).wait(120)
    tree = lineage(workspace, second.run_id)
    assert tree.run_id == failed
    assert [c.run_id for c in tree.children] == [first.run_id]
    assert [c.run_id for c in tree.children[0].children] == [second.run_id]
    assert lineage_text(tree).splitlines() == [
        f"{failed}  failed",
        f"└─ {first.run_id}  succeeded  from check · the parent's code · edited price#1",
        f"   └─ {second.run_id}  succeeded  from ship · the parent's code",
    ]
    rows = {r["call"]: r for r in diff_runs(workspace, failed, first.run_id)}
    assert rows["fetch#1"]["differs"] == []
    assert rows["price#1"]["differs"] == ["output"]
    assert (rows["price#1"]["output_preview_a"], rows["price#1"]["output_preview_b"]) == ("12", "8")
    assert "status" in rows["check#1"]["differs"] and "output" in rows["check#1"]["differs"]
    assert rows["ship#1"]["differs"] == [f"only in {first.run_id}"]


CHILD = """\
from pathlib import Path

from dbos import DBOS

from agentworks import run_dir


def note(what):
    with open(Path(run_dir) / "effects.txt", "a", encoding="utf-8") as fh:
        fh.write(what + "\\n")


@DBOS.step()
async def inc(x):
    note("inc")
    return x + 1


@DBOS.workflow()
async def twice(x):
    return await inc(await inc(x))


@DBOS.step()
async def scale(x):
    note("scale")
    return x * 10


@DBOS.workflow()
async def run(INPUT):
    y = await twice(INPUT["x"])
    return await scale(y)
"""


def test_forks_before_and_at_a_child_workflows_call(workspace: Workspace) -> None:
    """Forked from scale#1 the child workflow's call is copied (its steps do not run again);
    forked from the child's own call it runs fresh as a new child of the fork."""
    workspace.save_draft("child", CHILD)
    parent = commands.run(workspace, "child", run_input={"x": 1}).wait(120)
    assert parent.status == "succeeded" and parent.result == 30
    after = start_fork(workspace, parent.run_id, ForkRequest("scale")).wait(120)
    assert after.status == "succeeded" and after.result == 30
    assert effects(workspace, after.run_id) == ["scale"]
    at = start_fork(workspace, parent.run_id, ForkRequest("twice", sets={})).wait(120)
    assert at.status == "succeeded" and at.result == 30
    assert effects(workspace, at.run_id) == ["inc", "inc", "scale"]
