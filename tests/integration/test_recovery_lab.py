"""The recovery-lab scenarios with real process exits, a real order service and a real vault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from relay_notebook import commands
from relay_notebook.commands.lab import LAB_RELAY, Lab, OrderService
from relay_notebook.history import read_run_log
from relay_notebook.record.ledger import read_events
from relay_notebook.workspace import Workspace
from tests.integration.test_secret_leaks import scan_postgres
from tests.polling import wait_until


@pytest.fixture(params=["sqlite", "postgresql"])
def lab(workspace: Workspace, request: pytest.FixtureRequest) -> Iterator[Lab]:
    """The lab relay in a fresh workspace, with its own order service; every scenario runs with
    per-run SQLite files and again with a PostgreSQL system database (its database_url)."""
    if request.param == "postgresql":
        url = request.getfixturevalue("database_url")
        workspace = Workspace(workspace.home, database_url=url)
    service = OrderService(token="tok-s3cret-9f8e7d")
    try:
        yield Lab(workspace, service)
    finally:
        service.stop()


def assert_no_secret_on_disk(lab: Lab) -> None:
    """No file under the relay's folders (DBOS database included) holds the token, nor any
    row of the PostgreSQL system database when the runs keep their state there."""
    token = lab.service.book.token.encode()
    for path in lab.workspace.relay_dir(LAB_RELAY).rglob("*"):
        if path.is_file():
            assert token not in path.read_bytes(), f"secret found in {path}"
    url = lab.workspace.database_url
    if url:
        assert scan_postgres(url, {"token": token}) == []


def test_crash_after_a_checkpoint(lab: Lab) -> None:
    """Two checkpoints are reused; the service sees one attempt and makes one order."""
    first = lab.start("after-checkpoint")
    assert first.status == "interrupted" and lab.service.book.attempts == []
    second = lab.recover(first.run_id)
    assert second.status == "succeeded" and second.reused == [1, 2]
    assert second.result["order"]["order_id"] == "ord-1" and second.result["total"] == 50
    report = lab.report(first.run_id)
    assert report["attempts"] == ["interrupted", "succeeded"]
    assert report["reused"] == ["plan", "price"]
    assert (report["service_attempts"], report["orders"]) == (1, 1)
    assert_no_secret_on_disk(lab)


def test_crash_during_a_safe_action(lab: Lab) -> None:
    """The service is retried with the same idempotency key: two attempts, one order."""
    first = lab.start("safe-action")
    assert first.status == "interrupted" and len(lab.service.book.attempts) == 1
    second = lab.recover(first.run_id)
    assert second.status == "succeeded"
    report = lab.report(first.run_id)
    assert (report["service_attempts"], report["orders"]) == (2, 1)
    place = read_run_log(lab.workspace, first.run_id).steps[2]
    assert place.name == "place" and list(place.executed_in) == [1, 2]
    assert_no_secret_on_disk(lab)


def test_crash_during_an_uncertain_call_stops_for_reconciliation(lab: Lab) -> None:
    """Recovery stops without repeating the service; reconcile supplies the outcome."""
    first = lab.start("uncertain-action")
    assert first.status == "interrupted" and len(lab.service.book.attempts) == 1
    second = lab.recover(first.run_id)
    assert second.status == "needs_reconciliation" and second.exit_code == 4
    assert "clerk" in second.error["message"] and "relay reconcile" in second.error["message"]
    assert lab.recover(first.run_id).status == "needs_reconciliation"  # held: no attempt used
    assert len(read_run_log(lab.workspace, first.run_id).attempts) == 1
    cli = [sys.executable, "-m", "relay_notebook.cli", "--home", str(lab.workspace.home)]
    listing = subprocess.run([*cli, "reconcile", first.run_id], capture_output=True, text=True)
    assert "agent 'clerk'" in listing.stdout
    order = next(iter(lab.service.book.orders.values()))
    resolved = subprocess.run(
        [*cli, "reconcile", first.run_id, "--result", json.dumps(order)],
        capture_output=True,
        text=True,
    )
    assert resolved.returncode == 0, resolved.stderr
    third = subprocess.run(
        [*cli, "recover", first.run_id, "--json"], capture_output=True, text=True, env=os.environ
    )
    assert third.returncode == 0, third.stderr
    out = json.loads(third.stdout)
    assert out["status"] == "succeeded" and out["result"]["order"]["order_id"] == "ord-1"
    report = lab.report(first.run_id)
    assert (report["service_attempts"], report["orders"]) == (1, 1)
    assert_no_secret_on_disk(lab)


def test_revoke_after_a_crash_denies_recovery_until_granted(lab: Lab) -> None:
    """A revoked relay's recovery is denied without using an attempt; after grant it finishes."""
    first = lab.start("revoke")  # the scenario revokes access after the crash
    denied = lab.recover(first.run_id)
    assert denied.status == "denied" and denied.exit_code == 1
    assert f"relay grant {LAB_RELAY}" in denied.error["message"]
    assert lab.service.book.attempts == []
    lab.grant()
    done = lab.recover(first.run_id)
    assert done.status == "succeeded" and done.attempt == 2
    assert lab.report(first.run_id)["orders"] == 1
    assert_no_secret_on_disk(lab)


def test_revoking_during_a_run_stops_it_at_the_next_admission(lab: Lab) -> None:
    """admit() of a relay revoked mid-run stops the attempt as denied; after grant it finishes."""
    ws = lab.workspace
    handle = commands.run(
        ws,
        LAB_RELAY,
        run_input={
            "service": lab.service.url,
            "sku": "A-1",
            "quantity": 2,
            "key": "k-9",
            "pause": 2,
        },
    )
    events = ws.relay_dir(LAB_RELAY) / "runs" / "iteration-1-hook" / "dbos_events.jsonl"
    wait_until(  # price's body is sleeping
        lambda: any(
            e["kind"] == "step_start" and e["step"] == "price" for e in read_events(events)
        ),
        timeout=30,
        what="price's body to start",
    )
    lab.revoke()
    denied = handle.wait(120)
    assert denied.status == "denied" and f"relay grant {LAB_RELAY}" in denied.error["message"]
    assert lab.service.book.attempts == []
    lab.grant()
    done = lab.recover(denied.run_id)
    assert done.status == "succeeded" and done.reused == [1, 2]
    assert lab.service.attempts_for("k-9") == 1


def test_complete_without_a_crash(lab: Lab) -> None:
    """The ordinary path: one attempt, one service call, one order, no secret on disk."""
    out = lab.start("no-crash")
    assert out.status == "succeeded" and out.attempt == 1
    report = lab.report(out.run_id)
    assert (report["service_attempts"], report["orders"], report["reused"]) == (1, 1, [])
    assert_no_secret_on_disk(lab)


def test_agent_path_records_a_receipt(lab: Lab) -> None:
    """The agent's tool call reaches the service, and its receipt lands in execution/call-N."""
    first = lab.start("uncertain-action")
    lab.reconcile_from_service(first.run_id)
    assert lab.recover(first.run_id).status == "succeeded"
    folder = lab.workspace.relay_dir(LAB_RELAY) / "runs" / "iteration-1-hook"
    receipt = json.loads((folder / "execution" / "call-1" / "receipt.json").read_text())
    assert receipt["agent"] == "clerk" and receipt["model"] == "scripted:clerk.json"
    assert [c["tool"] for c in receipt["tool_calls"]] == ["place_order"]
    assert receipt["tool_calls"][0]["result"]["order_id"] == "ord-1"
    assert any("agent clerk" in r for r in lab.report(first.run_id)["receipts"])


LEAKY = textwrap.dedent(
    """
    from dbos import DBOS
    from agentworks import vault

    @DBOS.step()
    async def leak():
        return {"token": vault("LAB_ORDER_TOKEN")}

    @DBOS.workflow()
    async def run(INPUT):
        print("using", vault("LAB_ORDER_TOKEN"))
        return await leak()
    """
)


def test_a_step_returning_a_secret_is_refused_and_nothing_is_persisted(lab: Lab) -> None:
    """A step result carrying a vault value fails the run; no file holds the value."""
    lab.workspace.save_draft(LAB_RELAY, LEAKY)
    out = commands.run(lab.workspace, LAB_RELAY).wait(120)
    assert out.status == "failed"
    assert "LAB_ORDER_TOKEN" in out.error["message"]
    assert lab.service.book.token not in json.dumps(out.to_dict())
    assert_no_secret_on_disk(lab)
