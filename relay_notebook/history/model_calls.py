"""Tokens and cost of a run's model calls, with what a recovery or a fork did not pay.

Each ``model_call`` ledger event (``agentworks.frameworks``) is one model request whose body
ran: a payment, in the attempt that wrote it, of the tokens the framework reported. A call
whose checkpoint a later attempt reused was not paid again: that attempt *saved* the tokens of
the payment that made the checkpoint (the last one for the call). A fork's copied calls were
paid by its parent: their tokens, read from the parent's ledger, are saved by the fork. A body
that ran in an attempt which died before the checkpoint was saved was paid and then paid again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from relay_notebook.history.log_records import Receipt, StepCall
from relay_notebook.history.receipts import split_key
from relay_notebook.history.steps import StepTable
from relay_notebook.record.ledger_events import Event
from relay_notebook.workspace.prices import PriceTable

__all__ = [
    "ModelCallCost",
    "RunUsage",
    "TokenTotal",
    "call_usage_text",
    "listed_usage",
    "mark_tool_calls",
    "run_usage",
]


@dataclass(frozen=True)
class TokenTotal:
    """Tokens and their cost (``cost`` counts priced calls only; ``unpriced`` the others)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0

    def plus(self, call: ModelCallCost) -> TokenTotal:
        return TokenTotal(
            self.calls + 1,
            self.input_tokens + (call.input_tokens or 0),
            self.output_tokens + (call.output_tokens or 0),
            self.cost + (call.cost or 0.0),
            self.unpriced + (call.cost is None),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": round(self.cost, 8),
            "unpriced": self.unpriced,
        }


@dataclass(frozen=True)
class ModelCallCost:
    """One payment for a model call (``attempt``), or a call a fork copied (``copied_from``)."""

    step: str
    workflow_id: str | None
    step_id: int | None
    kind: str
    framework: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    attempt: int | None
    #: this payment made the call's checkpoint (False: its attempt died before saving it)
    checkpointed: bool = True
    reused_in: tuple[int, ...] = ()
    copied_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "workflow_id": self.workflow_id,
            "step_id": self.step_id,
            "kind": self.kind,
            "framework": self.framework,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
            "attempt": self.attempt,
            "checkpointed": self.checkpointed,
            "reused_in": list(self.reused_in),
            "copied_from": self.copied_from,
        }


@dataclass(frozen=True)
class RunUsage:
    """A run's model calls: every payment, totals paid and saved, per attempt and per run."""

    calls: tuple[ModelCallCost, ...]
    prices: PriceTable
    paid: TokenTotal = TokenTotal()
    saved: TokenTotal = TokenTotal()
    by_attempt: dict[int, tuple[TokenTotal, TokenTotal]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "currency": self.prices.currency,
            "prices": self.prices.to_dict(),
            "paid": self.paid.to_dict(),
            "saved": self.saved.to_dict(),
            "attempts": {
                str(a): {"paid": p.to_dict(), "saved": s.to_dict()}
                for a, (p, s) in sorted(self.by_attempt.items())
            },
            "calls": [c.to_dict() for c in self.calls],
        }


def _payment(event: Event, prices: PriceTable) -> ModelCallCost:
    model = event.get("model")
    input_tokens, output_tokens = event.get("input_tokens"), event.get("output_tokens")
    return ModelCallCost(
        step=str(event.get("step")),
        workflow_id=event.get("workflow_id"),
        step_id=event.get("step_id"),
        kind=str(event.get("call_kind") or "model"),
        framework=event.get("framework"),
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=prices.cost(model, input_tokens, output_tokens),
        attempt=int(event["attempt"]),
    )


def _agent_payments(
    receipt_events: Sequence[Event], receipts: Sequence[Receipt], prices: PriceTable
) -> list[ModelCallCost]:
    """``agentworks.agent`` calls that reported tokens: one payment per call made, reused in
    the attempts that took its journaled result instead (``call_reused``)."""
    reused = {r.key: r.reused_in for r in receipts if r.key is not None}
    out = []
    for e in receipt_events:
        if e.get("input_tokens") is None and e.get("output_tokens") is None:
            continue
        key = e.get("key")
        workflow_id, step_id, _, _ = split_key(key) if key else (None, None, None, None)
        paid = replace(_payment(e, prices), step=f"agent:{e.get('name')}", kind="agent")
        again = reused.get(key, ()) if key else ()
        out.append(
            replace(
                paid, framework="agentworks", workflow_id=workflow_id, step_id=step_id,
                reused_in=again,
            )
        )  # fmt: skip
    return out


def run_usage(
    run_id: str,
    events: Sequence[Event],
    steps: Iterable[StepCall],
    prices: PriceTable,
    parent_events: Sequence[Event] = (),
    receipt_events: Sequence[Event] = (),
    receipts: Sequence[Receipt] = (),
    copied_children: Mapping[str, str] | None = None,
) -> RunUsage:
    """The usage of run ``run_id`` from its ``model_call`` events and step calls (a fork's
    copied calls priced from its parent's ``parent_events``, those of a child it forked, named
    in ``copied_children`` by the parent's child it was forked from), and its
    ``agentworks.agent`` calls' receipts."""
    payments = [_payment(e, prices) for e in events if e.get("call_kind", "model") == "model"]
    last: dict[tuple[str | None, int | None], int] = {}
    for i, p in enumerate(payments):
        last[(p.workflow_id, p.step_id)] = i
    by_key: dict[tuple[str | None, int | None], StepCall] = {
        (s.workflow_id, s.function_id): s for s in steps
    }
    calls: list[ModelCallCost] = []
    for i, p in enumerate(payments):
        step = by_key.get((p.workflow_id, p.step_id))
        made = last[(p.workflow_id, p.step_id)] == i and step is not None
        reused = step.reused_in if made and step is not None else ()
        calls.append(replace(p, checkpointed=made, reused_in=tuple(reused)))
    parent_models = [p for p in (_payment(e, prices) for e in parent_events) if p.kind == "model"]
    parent = {(p.step_id, p.step): p for p in parent_models}
    in_children = {(p.workflow_id, p.step_id, p.step): p for p in parent_models}
    children = copied_children or {}
    for s in by_key.values():
        if s.copied_from and s.workflow_id in children:
            paid = in_children.get((children[s.workflow_id], s.function_id, s.name))
            if paid is not None:
                calls.append(replace(paid, workflow_id=s.workflow_id, attempt=None,
                                     copied_from=s.copied_from))  # fmt: skip
        elif s.copied_from and s.workflow_id == run_id:
            paid = parent.get((s.function_id, s.name))
            if paid is not None:
                calls.append(
                    replace(paid, workflow_id=run_id, attempt=None, copied_from=s.copied_from)
                )
    calls += _agent_payments(receipt_events, receipts, prices)
    total_paid, total_saved = TokenTotal(), TokenTotal()
    by_attempt: dict[int, tuple[TokenTotal, TokenTotal]] = {}
    empty = (TokenTotal(), TokenTotal())
    for c in calls:
        if c.attempt is not None:
            paid_in, saved_in_attempt = by_attempt.get(c.attempt, empty)
            by_attempt[c.attempt] = (paid_in.plus(c), saved_in_attempt)
            total_paid = total_paid.plus(c)
        saved_in = list(c.reused_in) if c.copied_from is None else [1]
        for a in saved_in:
            paid_in, saved_in_attempt = by_attempt.get(a, empty)
            by_attempt[a] = (paid_in, saved_in_attempt.plus(c))
            total_saved = total_saved.plus(c)
    return RunUsage(tuple(calls), prices, total_paid, total_saved, by_attempt)


def mark_tool_calls(table: StepTable, events: Iterable[Event]) -> None:
    """Give kind ``tool`` to the steps that are tool calls: a step of a workflow whose model
    calls were offered a tool of its name (the tool is a ``@DBOS.step`` function)."""
    tools: dict[str | None, set[str]] = {}
    for e in events:
        offered = e.get("tools")
        if offered:
            tools.setdefault(e.get("workflow_id"), set()).update(offered)
    if not tools:
        return
    cols = table.columns
    for i, (wf, name) in enumerate(zip(cols["workflow_id"], cols["name"], strict=True)):
        if cols["kind"][i] == "step" and name.rsplit(".", 1)[-1] in tools.get(wf, ()):
            cols["kind"][i] = "tool"


def listed_usage(
    run_id: str,
    events: Sequence[Event],
    reused: Iterable[tuple[int, Iterable[int]]],
    prices: PriceTable,
    copied: tuple[str, Iterable[int], Sequence[Event]] | None = None,
    copied_child: tuple[str, Iterable[int]] | None = None,
) -> tuple[TokenTotal, TokenTotal]:
    """(paid, not paid) for ``relay runs``, from the ledger's ``model_call`` events and each
    attempt's reused root calls as run.json lists them, and for a fork the calls it ``copied``
    (its parent's id, the copied function ids from run.json, the parent's ``model_call``
    events) and those of the child it forked (``copied_child``: the parent's child workflow,
    the copied function ids), as ``relay logs`` prices them. No database read: a child
    workflow's reuse shows in ``relay logs`` only."""
    payments = [_payment(e, prices) for e in events if e.get("call_kind", "model") == "model"]
    paid, saved = TokenTotal(), TokenTotal()
    if copied is not None:
        parent_id, ids, parent_events = copied
        wanted = {(parent_id, fid) for fid in ids}
        if copied_child is not None:
            wanted |= {(copied_child[0], fid) for fid in copied_child[1]}
        kept = {  # the parent's last payment of each copied call: the one its checkpoint holds
            (p.workflow_id, p.step_id): p
            for p in (_payment(e, prices) for e in parent_events)
            if p.kind == "model" and (p.workflow_id, p.step_id) in wanted
        }
        for p in kept.values():
            saved = saved.plus(p)
    made: dict[int | None, ModelCallCost] = {}
    for p in payments:
        paid = paid.plus(p)
        if p.workflow_id == run_id:
            made[p.step_id] = p
    for _, ids in reused:
        for fid in ids:
            if fid in made:
                saved = saved.plus(made[fid])
    return paid, saved


def cost_text(total: TokenTotal, currency: str) -> str:
    """``1 call, 51 in + 5 out tokens, 0.000123 USD`` (cost left out when nothing is priced)."""
    calls = f"{total.calls} call" + ("" if total.calls == 1 else "s")
    text = f"{calls}, {total.input_tokens} in + {total.output_tokens} out tokens"
    if total.calls > total.unpriced:
        text += f", {total.cost:.6f} {currency}"
    if total.unpriced:
        text += f" ({total.unpriced} unpriced)"
    return text


def usage_summary(usage: RunUsage) -> str:
    """The run's model calls in one line: what it paid, and what it did not pay because
    calls were reused by a recovery or copied by a fork (the run view's header)."""
    currency = usage.prices.currency
    counted = [c for c in usage.calls if (c.input_tokens, c.output_tokens) != (None, None)]
    if not counted:  # e.g. the scripted provider: no tokens to add up, nothing to price
        made = f"{usage.paid.calls} made"
        kept = f", {usage.saved.calls} reused or copied" if usage.saved.calls else ""
        return f"model calls: {made}{kept}; the provider reported no token counts"
    line = f"model calls: paid {cost_text(usage.paid, currency)}"
    if usage.saved.calls:
        line += f"; not paid (reused or copied) {cost_text(usage.saved, currency)}"
    return line


def call_usage_text(usage: RunUsage, workflow_id: str, step_id: int) -> str | None:
    """One call's model tokens for its node details: ``gpt-4o · 51 in + 5 out tokens,
    0.000123 USD``, then what it was paid and not paid (``paid 2×``: its body ran in an attempt
    that died before the checkpoint; ``not paid again in attempt 2``: reused; ``copied from
    RUN, not paid``). None for a call that made no model request."""
    mine = [c for c in usage.calls if (c.workflow_id, c.step_id) == (workflow_id, step_id)]
    if not mine:
        return None
    kept = next((c for c in mine if c.checkpointed), mine[-1])
    head = f"{kept.model} · " if kept.model else ""
    if (kept.input_tokens, kept.output_tokens) == (None, None):
        text = f"{head}the provider reported no token counts"
    else:
        text = f"{head}{kept.input_tokens or 0} in + {kept.output_tokens or 0} out tokens"
        if kept.cost is not None:
            text += f", {kept.cost:.6f} {usage.prices.currency}"
    if kept.copied_from is not None:
        return f"{text}; copied from {kept.copied_from}, not paid"
    paid = sum(1 for c in mine if c.attempt is not None)
    if paid > 1:
        text += f"; paid {paid}×"
    if kept.reused_in:
        attempts = ", ".join(str(a) for a in kept.reused_in)
        plural = "s" if len(kept.reused_in) > 1 else ""
        text += f"; not paid again in attempt{plural} {attempts}"
    return text
