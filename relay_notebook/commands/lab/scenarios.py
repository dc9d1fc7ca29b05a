"""The lab relay and its five scenarios: crash after a checkpoint, during a safe action, during
an uncertain action, revoke after a crash, and no crash."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from relay_notebook import commands
from relay_notebook.commands.lab.service import OrderService
from relay_notebook.runner import RunOutcome
from relay_notebook.workspace import Manifest, Workspace

__all__ = ["LAB_RELAY", "LAB_SOURCE", "SCENARIOS", "TOKEN_NAME", "Lab", "Scenario"]

LAB_RELAY = "recovery-lab"
TOKEN_NAME = "LAB_ORDER_TOKEN"

LAB_SOURCE = '''"""The recovery lab's relay: plan, price, then place an order."""
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
                 "Authorization": "Bearer " + vault("LAB_ORDER_TOKEN")},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


@DBOS.step()
async def plan(order):
    return {"sku": order["sku"], "quantity": order["quantity"], "key": order["key"]}


@DBOS.step()
async def price(p, pause):
    await asyncio.sleep(pause)  # room to revoke access while a run is going
    return {"total": p["quantity"] * 25}


@DBOS.step()
async def place(service, p):
    """A safe action: the service deduplicates the idempotency key."""
    await admit("place an order")
    return post(service, {"sku": p["sku"], "quantity": p["quantity"],
                          "idempotency_key": p["key"]})


@DBOS.step()
async def clerk(service, p):
    """An uncertain action: an agent whose tool places the order."""
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


def lab_script(key: str) -> dict[str, Any]:
    """The scripted clerk: one tool call placing the order, then the order as JSON."""
    return {
        "clerk": [
            {
                "tool_calls": [
                    {
                        "name": "place_order",
                        "arguments": {"sku": "A-1", "quantity": 2, "idempotency_key": key},
                    }
                ]
            },
            {"content": {"order_id": "ord-1", "sku": "A-1", "quantity": 2}},
        ]
    }


@dataclass(frozen=True)
class Scenario:
    """One canonical scenario: how the first attempt ends, and what recovery should show."""

    key: str
    title: str
    crash: str | None
    via: str = "service"
    revoke: bool = False
    expect: str = ""


SCENARIOS = {
    s.key: s
    for s in [
        Scenario(
            "after-checkpoint",
            "Crash after a checkpoint",
            "after:price",
            expect="two reused checkpoints, one service attempt, one order",
        ),
        Scenario(
            "safe-action",
            "Crash during a safe action",
            "during:place",
            expect="the service is retried with the same idempotency key: two attempts, one order",
        ),
        Scenario(
            "uncertain-action",
            "Crash during an uncertain action",
            "during:agent:clerk",
            via="agent",
            expect="recovery stops for reconciliation without repeating the service",
        ),
        Scenario(
            "revoke",
            "Revoke access after a crash",
            "after:plan",
            revoke=True,
            expect="recovery is denied until access is granted again",
        ),
        Scenario(
            "no-crash",
            "Complete without a crash",
            None,
            expect="one attempt, one service attempt, one order",
        ),
    ]
}


class Lab:
    """The lab relay in a workspace, its order service, and the runs of each scenario."""

    def __init__(self, workspace: Workspace, service: OrderService | None = None) -> None:
        self.workspace = workspace
        self.service = service or OrderService(token="lab-token-" + workspace.home.name)
        self._runs = 0
        self.install()

    def install(self) -> None:
        """Save the lab relay (and its scripted clerk), and the service token in the vault."""
        manifest = Manifest(
            model="scripted:clerk.json", network={"allow": [self.service.endpoint]}
        )  # the lab's service is on this machine's loopback: the relay declares it
        self.workspace.save_draft(LAB_RELAY, LAB_SOURCE, manifest)
        commands.vault_set(self.workspace, TOKEN_NAME, self.service.book.token)

    def start(self, scenario: str, *, pause: float = 0) -> RunOutcome:
        """Start a new run of ``scenario`` and wait for its first attempt to end."""
        s = SCENARIOS[scenario]
        self._runs += 1
        key = f"{scenario}-{len(commands.runs(self.workspace, LAB_RELAY)) + 1}"
        (self.workspace.relay_dir(LAB_RELAY) / "clerk.json").write_text(
            json.dumps(lab_script(key)), encoding="utf-8"
        )
        run_input = {
            "service": self.service.url,
            "sku": "A-1",
            "quantity": 2,
            "key": key,
            "via": s.via,
            "pause": pause,
        }
        outcome: RunOutcome = commands.run(
            self.workspace, LAB_RELAY, run_input=run_input, crash=s.crash
        ).wait()
        if s.revoke and outcome.status == "interrupted":
            commands.revoke(self.workspace, LAB_RELAY)
        return outcome

    def recover(self, run_id: str) -> RunOutcome:
        """The next attempt of ``run_id`` (held outcomes come back without one)."""
        outcome: RunOutcome = commands.recover(self.workspace, run_id).wait()
        return outcome

    def grant(self) -> None:
        commands.grant(self.workspace, LAB_RELAY)

    def revoke(self) -> None:
        commands.revoke(self.workspace, LAB_RELAY)

    def reconcile_from_service(self, run_id: str) -> None:
        """Settle the uncertain clerk call with the order the service actually holds."""
        key = commands.logs(self.workspace, run_id).run.input["key"]
        order = self.service.book.orders.get(key)
        if order is None:
            commands.reconcile(self.workspace, run_id, retry=True)
        else:
            commands.reconcile(self.workspace, run_id, result=order)

    def report(self, run_id: str) -> dict[str, Any]:
        """What the lab shows: attempts, reused checkpoints, service attempts, orders."""
        log = commands.logs(self.workspace, run_id)
        key = log.run.input["key"]
        reused = sorted({s.name for s in log.steps if s.reused_in})
        return {
            "run_id": run_id,
            "status": log.run.status,
            "attempts": [a.status for a in log.attempts],
            "reused": reused,
            "service_attempts": self.service.attempts_for(key),
            "orders": 1 if key in self.service.book.orders else 0,
            "receipts": [c for c in _receipts(self.workspace, run_id)],
        }


def _receipts(workspace: Workspace, run_id: str) -> list[str]:
    from relay_notebook.runner import find_run

    folder = find_run(workspace, run_id)
    try:
        trace = json.loads(folder.trace.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return [
        f"{c.get('call_kind')} {c.get('name')}: {c.get('turns')} turns, model {c.get('model')}"
        for c in trace.get("calls", [])
        if c.get("kind") == "receipt"
    ]
