"""``--crash-each`` on real runs: a clean relay passes, planted faults are found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay_notebook.cli import main as cli_main
from relay_notebook.testing.harness import RelayHarness
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

FIVE = Path(__file__).parents[1] / "relays" / "five.py"
# the workflow body reads the clock: its result depends on when it (re)ran
CLOCKED = """import time
from dbos import DBOS


@DBOS.step()
def early():
    return "early"


@DBOS.workflow()
async def run(INPUT):
    first = early()
    return {"first": first, "second": round(time.time(), 1)}
"""
# the workflow body looks at a file a step writes, and lets it choose a branch: a recovery
# finds the file the crashed attempt left and takes the other one
STEERED = """import os
from dbos import DBOS


@DBOS.step()
def mark():
    with open("marked", "w") as f:
        f.write("x")
    return "marked"


@DBOS.step()
def fresh():
    return "fresh"


@DBOS.step()
def again():
    return "again"


@DBOS.workflow()
async def run(INPUT):
    seen = os.path.exists("marked")
    mark()
    branch = again() if seen else fresh()
    return {"branch": branch}
"""
# charge appends to a file and returns the total charged: running it twice charges twice
CHARGE = """from dbos import DBOS


@DBOS.step()
def charge(amount):
    with open("charges.log", "a") as f:
        f.write(f"{amount}\\n")
    with open("charges.log") as f:
        return sum(int(line) for line in f)


@DBOS.workflow()
async def run(INPUT):
    return {"charged": charge(INPUT["amount"])}
"""


@pytest.fixture
def harness(workspace: Workspace) -> RelayHarness:
    return RelayHarness(workspace)


def test_a_clean_relay_passes_every_crash_point(harness: RelayHarness) -> None:
    """five with n=1: after and during fetch#1 and add#1, each recovered to the same total;
    the during-points ran their body twice (listed, not a failure)."""
    harness.save("five", FIVE)
    report = harness.crash_each("five", {"n": 1})
    assert report.ok and report.clean_result == {"total": 0}
    assert [p.point for p in report.points] == [
        "after:fetch#1", "during:fetch#1", "after:add#1", "during:add#1",
    ]  # fmt: skip
    assert all(p.status == "succeeded" and p.same_result for p in report.points)
    assert report.repeated == ["fetch#1", "add#1"]


def test_time_read_in_the_workflow_body_is_found(harness: RelayHarness) -> None:
    """The body returns the clock it read: every recovered run's result differs."""
    harness.save("clocked", CLOCKED)
    report = harness.crash_each("clocked")
    assert not report.ok
    assert {p.point for p in report.differing} >= {"after:early#1"}


def test_io_in_the_workflow_body_steering_a_branch_is_found(harness: RelayHarness) -> None:
    """The clean run takes the fresh branch; a recovery after mark#1 finds the file the crashed
    attempt wrote and takes the other: that point's result is not the same."""
    harness.save("steered", STEERED)
    report = harness.crash_each("steered")
    assert report.clean_result == {"branch": "fresh"}
    differing = {p.point: p.result for p in report.differing}
    assert differing.get("after:mark#1") == {"branch": "again"}


def test_a_step_that_is_not_safe_to_repeat_is_found(harness: RelayHarness) -> None:
    """Killed during charge, the recovery charges again: the result differs at that point
    only, and charge#1 is listed among the bodies that ran twice."""
    harness.save("pay", CHARGE)
    report = harness.crash_each("pay", {"amount": 5})
    assert report.clean_result == {"charged": 5}
    assert [p.point for p in report.differing] == ["during:charge#1"]
    assert report.differing[0].result == {"charged": 10}
    assert report.repeated == ["charge#1"]


def test_the_cli_prints_json_and_exits_1_on_a_finding(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    RelayHarness(workspace).save("pay", CHARGE)
    argv = ["--home", str(workspace.home), "test", "pay", "--crash-each", "--json"]
    assert cli_main([*argv, "--input", '{"amount": 2}']) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["differing"] == ["during:charge#1"]
    assert doc["repeated"] == ["charge#1"]


def test_the_harness_declares_an_mcp_server_over_stdio(harness: RelayHarness) -> None:
    """``mcp_server`` copies a stdio MCP server into the workspace and declares it; a relay
    calling it runs, crashes after the call's checkpoint, and recovers without calling again."""
    servers = Path(__file__).parents[1] / "servers"
    harness.mcp_server("orders", servers / "mcp_orders.py", ORDERS_DB="orders.json")
    harness.save("ordering", relay_source("ordering"))
    first = harness.run("ordering", {"sku": "A"}, crash="after:order")
    assert first.status == "interrupted"
    done = harness.recover(first.run_id)
    assert done.status == "succeeded" and done.result == {
        "order": "ord-1",
        "count": 1,
        "attempts": 1,
    }
    assert done.reused == [1] and harness.executions(first.run_id)["order#1"] == 1
