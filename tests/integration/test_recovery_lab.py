"""The recovery-lab scenarios with real process exits, a real order service and a real vault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.history import read_run_log
from relay_notebook.runner import RunOutcome
from relay_notebook.runner.ledger import read_events
from relay_notebook.workspace import Manifest, Workspace
from tests.servers.order_service import OrderBook, order_service

TOKEN = "tok-s3cret-9f8e7d"

LAB = textwrap.dedent(
    '''
    import asyncio
    import json
    import urllib.request

    from dbos import DBOS
    from agentworks import admit, agent, tool, vault


    def post(service, body):
        request = urllib.request.Request(
            service + "/orders",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     "Authorization": "Bearer " + vault("ORDER_TOKEN")},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)


    @DBOS.step()
    async def plan(order):
        return {"sku": order["sku"], "quantity": order["quantity"], "key": order["key"]}


    @DBOS.step()
    async def price(p, pause):
        await asyncio.sleep(pause)  # room for a test to revoke access mid-run
        return {"total": p["quantity"] * 25}


    @DBOS.step()
    async def place(service, p):
        await admit("place an order")
        return post(service, {"sku": p["sku"], "quantity": p["quantity"],
                              "idempotency_key": p["key"]})


    @DBOS.step()
    async def clerk(service, p):
        @tool
        def place_order(sku: str, quantity: int, idempotency_key: str) -> dict:
            """Place an order with the order service."""
            return post(service, {"sku": sku, "quantity": quantity,
                                  "idempotency_key": idempotency_key})

        return await agent(name="clerk", user_message=json.dumps(p), tools=[place_order],
                           output_schema={"type": "object"})


    @DBOS.workflow()
    async def run(INPUT):
        p = await plan(INPUT)
        pr = await price(p, INPUT.get("pause", 0))
        if INPUT.get("via") == "agent":
            order = await clerk(INPUT["service"], p)
        else:
            order = await place(INPUT["service"], p)
        return {"order": order, "total": pr["total"]}
    '''
)
SCRIPT = {
    "clerk": [
        {
            "tool_calls": [
                {
                    "name": "place_order",
                    "arguments": {"sku": "A-1", "quantity": 2, "idempotency_key": "k-1"},
                }
            ]
        },
        {"content": {"order_id": "ord-1", "sku": "A-1", "quantity": 2}},
    ]
}


@pytest.fixture
def lab(workspace: Workspace) -> Iterator[tuple[Workspace, dict[str, Any], OrderBook]]:
    """The lab relay, its order service, and the service token in the vault."""
    workspace.save_draft("lab", LAB, Manifest(model="scripted:fixtures.json"))
    (workspace.relay_dir("lab") / "fixtures.json").write_text(json.dumps(SCRIPT))
    commands.vault_set(workspace, "ORDER_TOKEN", TOKEN)
    with order_service(TOKEN) as (url, book):
        yield workspace, {"service": url, "sku": "A-1", "quantity": 2, "key": "k-1"}, book


def run(ws: Workspace, inp: dict[str, Any], crash: str | None = None) -> RunOutcome:
    outcome: RunOutcome = commands.run(ws, "lab", run_input=inp, crash=crash).wait(120)
    return outcome


def recover(ws: Workspace, run_id: str) -> RunOutcome:
    outcome: RunOutcome = commands.recover(ws, run_id).wait(120)
    return outcome


def assert_no_secret_on_disk(ws: Workspace) -> None:
    """No file under the relay's folders (DBOS database included) holds the token."""
    for path in ws.relay_dir("lab").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), f"secret found in {path}"


def test_crash_after_a_checkpoint(lab: Any) -> None:
    """Two checkpoints are reused; the service sees one attempt and makes one order."""
    ws, inp, book = lab
    first = run(ws, inp, crash="after:price")
    assert first.status == "interrupted" and book.attempts == []
    second = recover(ws, first.run_id)
    assert second.status == "succeeded" and second.reused == [1, 2]
    assert second.result == {
        "order": {"order_id": "ord-1", "sku": "A-1", "quantity": 2},
        "total": 50,
    }
    assert len(book.attempts) == 1 and len(book.orders) == 1
    assert_no_secret_on_disk(ws)


def test_crash_during_a_safe_action(lab: Any) -> None:
    """The service is retried with the same idempotency key: two attempts, one order."""
    ws, inp, book = lab
    first = run(ws, inp, crash="during:place")
    assert first.status == "interrupted" and len(book.attempts) == 1
    second = recover(ws, first.run_id)
    assert second.status == "succeeded"
    assert len(book.attempts) == 2 and len(book.orders) == 1
    assert [a["idempotency_key"] for a in book.attempts] == ["k-1", "k-1"]
    place = read_run_log(ws, first.run_id).steps[2]
    assert place["name"] == "place" and place["executed_in"] == [1, 2]
    assert_no_secret_on_disk(ws)


def test_crash_during_an_uncertain_call_stops_for_reconciliation(lab: Any) -> None:
    """Recovery stops without repeating the service; reconcile supplies the outcome."""
    ws, inp, book = lab
    first = run(ws, {**inp, "via": "agent"}, crash="during:agent:clerk")
    assert first.status == "interrupted" and len(book.attempts) == 1
    second = recover(ws, first.run_id)
    assert second.status == "needs_reconciliation" and second.exit_code == 4
    assert "clerk" in second.error["message"] and "relay reconcile" in second.error["message"]
    assert len(book.attempts) == 1
    # held recoveries do not use up attempts
    again = recover(ws, first.run_id)
    assert again.status == "needs_reconciliation"
    assert len(read_run_log(ws, first.run_id).attempts) <= 2
    home = ["--home", str(ws.home)]
    cli = [sys.executable, "-m", "relay_notebook.cli", *home]
    listing = subprocess.run([*cli, "reconcile", first.run_id], capture_output=True, text=True)
    assert "agent 'clerk'" in listing.stdout
    resolved = subprocess.run(
        [*cli, "reconcile", first.run_id, "--result", json.dumps(book.orders["k-1"])],
        capture_output=True,
        text=True,
    )
    assert resolved.returncode == 0, resolved.stderr
    third = subprocess.run(
        [*cli, "recover", first.run_id, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert third.returncode == 0, third.stderr
    out = json.loads(third.stdout)
    assert out["status"] == "succeeded" and out["result"]["order"]["order_id"] == "ord-1"
    assert len(book.attempts) == 1 and len(book.orders) == 1
    assert_no_secret_on_disk(ws)


def test_revoke_after_a_crash_denies_recovery_until_granted(lab: Any) -> None:
    """A revoked relay's recovery is denied without using an attempt; after grant it finishes."""
    ws, inp, book = lab
    first = run(ws, inp, crash="after:plan")
    commands.revoke(ws, "lab")
    denied = recover(ws, first.run_id)
    assert denied.status == "denied" and denied.exit_code == 1
    assert "relay grant lab" in denied.error["message"]
    assert book.attempts == []
    commands.grant(ws, "lab")
    done = recover(ws, first.run_id)
    assert done.status == "succeeded" and done.attempt == 2
    assert len(book.orders) == 1
    assert_no_secret_on_disk(ws)


def test_revoking_during_a_run_stops_it_at_the_next_admission(lab: Any) -> None:
    """admit() of a relay revoked mid-run stops the attempt as denied; after grant it finishes."""
    ws, inp, book = lab
    handle = commands.run(ws, "lab", run_input={**inp, "pause": 2})
    events = ws.relay_dir("lab") / "runs" / "iteration-1-hook" / "dbos_events.jsonl"
    for _ in range(600):  # poll until price's body is sleeping
        if any(e["kind"] == "step_start" and e["step"] == "price" for e in read_events(events)):
            break
        time.sleep(0.05)
    commands.revoke(ws, "lab")
    denied = handle.wait(120)
    assert denied.status == "denied" and "relay grant lab" in denied.error["message"]
    assert book.attempts == []
    commands.grant(ws, "lab")
    done = recover(ws, denied.run_id)
    assert done.status == "succeeded" and done.reused == [1, 2]
    assert len(book.attempts) == 1 and len(book.orders) == 1


def test_complete_without_a_crash(lab: Any) -> None:
    """The ordinary path: one attempt, one service call, one order, no secret on disk."""
    ws, inp, book = lab
    out = run(ws, inp)
    assert out.status == "succeeded" and out.attempt == 1
    assert len(book.attempts) == 1 and len(book.orders) == 1
    assert_no_secret_on_disk(ws)


def test_agent_path_without_a_crash_records_a_receipt(lab: Any) -> None:
    """The agent's tool call reaches the service, and its receipt lands in execution/call-N."""
    ws, inp, book = lab
    out = run(ws, {**inp, "via": "agent"})
    assert out.status == "succeeded" and len(book.orders) == 1
    folder = ws.relay_dir("lab") / "runs" / "iteration-1-hook"
    receipt = json.loads((folder / "execution" / "call-1" / "receipt.json").read_text())
    assert receipt["agent"] == "clerk" and receipt["model"] == "scripted:fixtures.json"
    assert [c["tool"] for c in receipt["tool_calls"]] == ["place_order"]
    assert receipt["tool_calls"][0]["result"]["order_id"] == "ord-1"
    trace = json.loads((folder / "relay_trace.json").read_text())
    assert any(c["kind"] == "receipt" and c["name"] == "clerk" for c in trace["calls"])
    assert_no_secret_on_disk(ws)


LEAKY = textwrap.dedent(
    """
    from dbos import DBOS
    from agentworks import vault

    @DBOS.step()
    async def leak():
        return {"token": vault("ORDER_TOKEN")}

    @DBOS.workflow()
    async def run(INPUT):
        print("using", vault("ORDER_TOKEN"))
        return await leak()
    """
)


def test_a_step_returning_a_secret_is_refused_and_nothing_is_persisted(
    workspace: Workspace,
) -> None:
    """A step result carrying a vault value fails the run; no file holds the value."""
    commands.vault_set(workspace, "ORDER_TOKEN", TOKEN)
    workspace.save_draft("lab", LEAKY)
    out = commands.run(workspace, "lab").wait(120)
    assert out.status == "failed"
    assert "ORDER_TOKEN" in out.error["message"] and TOKEN not in json.dumps(out.to_dict())
    assert_no_secret_on_disk(workspace)
