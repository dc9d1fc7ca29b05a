"""Receipts of a run's platform calls (agent, MCP, legacy ``ctx.step``, journaled tools).

The call journal keys every platform call by where it sits in the workflow
(``WORKFLOW/STEP/N``), which links it to the step that made it; the ledger's ``receipt`` events
add an agent call's model, turns and tool calls, and ``call_reused`` events say in which
attempts a journaled result was returned instead of calling again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from agentworks.journal import Journal
from agentworks.redact import Redactor
from relay_notebook.history.ledger_scan import LedgerScan
from relay_notebook.history.log_records import Receipt
from relay_notebook.history.outputs import json_preview
from relay_notebook.record.ledger_events import Event

__all__ = ["read_receipts", "split_key"]


def split_key(key: str) -> tuple[str | None, int | None, int | None, str | None]:
    """``run-1/3/2`` → (``run-1``, 3, 2, None); a journaled tool call adds its tool name."""
    tool = None
    if "/tool:" in key:
        key, rest = key.split("/tool:", 1)
        tool = rest.rsplit(":", 1)[0]
    parts = key.rsplit("/", 2)
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None, None, None, tool
    return parts[0], int(parts[1]), int(parts[2]), tool


def _match_by_order(journal: Path, events: list[Event]) -> dict[str, Event]:
    """Receipt events written without their call's key, matched to the journal's agent
    intents of the same attempt and agent name, in order (calls are serialized)."""
    intents: dict[tuple[Any, Any], list[str]] = {}
    for entry in Journal(journal).entries():
        call = entry.get("call") or {}
        if entry.get("kind") == "intent" and call.get("kind") == "agent":
            intents.setdefault((entry.get("attempt"), call.get("name")), []).append(entry["key"])
    found: dict[str, Event] = {}
    for event in events:
        queue = intents.get((event.get("attempt"), event.get("name")))
        if queue:
            found[queue.pop(0)] = event
    return found


def read_receipts(
    journal: Path, scan: LedgerScan, redactor: Redactor | None, *, durable: bool = True
) -> list[Receipt]:
    """Every platform call of the run, in the order the journal first saw it.

    Agent receipts of runs without a journal (``relay_durability: none``) are listed too,
    without a step.
    """
    if durable and not journal.exists():
        return []  # a durable run journals every platform call before making it
    receipt_events = scan.select("receipt")
    events = {key: e for e in receipt_events if (key := e.get("key"))}
    unkeyed = [e for e in receipt_events if not e.get("key")]
    if unkeyed:
        events |= _match_by_order(journal, unkeyed)
    matched = {id(e) for e in events.values()}
    unjournaled = [e for e in unkeyed if id(e) not in matched]
    reused: dict[str, list[int]] = {}
    for e in scan.select("call_reused"):
        reused.setdefault(str(e.get("key")), []).append(int(e["attempt"]))
    out: list[Receipt] = []
    for state in Journal(journal).states().values():
        call = state.call or {}
        workflow_id, step_id, n, tool = split_key(state.key)
        event = events.get(state.key)
        receipt = Receipt(
            key=state.key,
            workflow_id=workflow_id,
            step_id=step_id,
            call=n,
            kind="tool" if tool is not None else call.get("kind"),
            name=tool if tool is not None else call.get("name"),
            state=state.state,
            blocking=state.blocking,
            attempt=state.attempt,
            replay_safe=bool(call.get("replay_safe", False)),
            reused_in=tuple(sorted(set(reused.get(state.key, [])))),
            result_preview=json_preview(state.result, redactor),
        )
        if event is not None:
            receipt = _with_event(receipt, event)
        elif call.get("model"):
            receipt = replace(receipt, model=call["model"])
        out.append(receipt)
    for event in unjournaled:
        receipt = Receipt(
            key=None,
            workflow_id=None,
            step_id=None,
            call=None,
            kind=event.get("call_kind"),
            name=event.get("name"),
            state="failed" if event.get("error") else "done",
            blocking=False,
            attempt=event.get("attempt"),
            replay_safe=False,
            reused_in=(),
            result_preview=None,
        )
        out.append(_with_event(receipt, event))
    return out


def _with_event(receipt: Receipt, event: Event) -> Receipt:
    """``receipt`` with what its ``receipt`` event adds: model, turns, tool calls, duration,
    call folder and error."""
    return replace(
        receipt,
        receipted=True,
        model=event.get("model"),
        turns=event.get("turns"),
        tool_calls=event.get("tool_calls"),
        duration_ms=event.get("duration_ms"),
        call_dir=event.get("call_dir"),
        error=event.get("error"),
    )
