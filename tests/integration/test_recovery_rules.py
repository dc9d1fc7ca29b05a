"""The recovery rules, one table: the pure rules, the preview and a real recovery agree."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from test_runner import FIVE_STEPS, go

from agentworks.journal import Journal
from relay_notebook.errors import RelayError
from relay_notebook.history.preview import preview_recovery
from relay_notebook.record.bindings import bindings_changed
from relay_notebook.record.checkpoints import find_lost_checkpoints
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.messages import wait_ready
from relay_notebook.record.rules import Decision, Facts, Uncertain, decide
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner import parse_crash_spec, start_recovery, start_run
from relay_notebook.workspace import Manifest, Workspace
from relay_notebook.workspace.access import AccessPolicy

INPUT = {"ledger": "effects.log", "n": 3}
PLAIN = (
    "def add(a, b):\n    return a + b\n\n\n"
    "async def run(INPUT, ctx):\n"
    "    return {'v': await ctx.step('add', add, arguments={'a': 1, 'b': 2})}\n"
)


def _edit_record(folder: RunFolder, **fields: Any) -> None:
    meta = folder.read_meta()
    meta.update(fields)
    folder.write_meta(meta)


def _delete_database(ws: Workspace, folder: RunFolder) -> None:
    for suffix in ("", "-wal", "-shm"):
        folder.database.with_name(folder.database.name + suffix).unlink(missing_ok=True)


@dataclass(frozen=True)
class Case:
    #: the rules' code (``None``: recovery goes ahead)
    code: str | None
    #: what the message must say, in the user's terms
    says: str
    #: turns a run interrupted after square #2 into the case's state
    prepare: Callable[[Workspace, RunFolder], None] = lambda ws, folder: None
    crash: str | None = "after:square#2"
    durable: bool = True


CASES = {
    "finished": Case("finished", "returns it as it was", crash=None),
    "access revoked": Case(
        "access-revoked",
        "relay grant five",
        lambda ws, folder: AccessPolicy(ws.home).revoke("five"),
    ),
    "needs reconciliation": Case(
        "needs-reconciliation",
        "agent 'clerk' (key k-1)",
        lambda ws, folder: Journal(folder.journal).intent(
            "k-1", {"kind": "agent", "name": "clerk"}, 1
        ),
    ),
    "not durable": Case(
        "not-durable", "relay_durability: none", crash="during:step:add", durable=False
    ),
    "attempt budget spent": Case(
        "attempt-budget-exhausted",
        "used all 1 of its process attempts",
        lambda ws, folder: _edit_record(folder, max_attempts=1),
    ),
    "deadline passed": Case(
        "deadline-passed",
        "its deadline passed",
        lambda ws, folder: _edit_record(folder, deadline_ms=time.time() * 1000 - 1000),
    ),
    "checkpoints lost": Case("checkpoints-lost", "--accept-lost-checkpoints", _delete_database),
    "bindings changed": Case(
        "binding-changed",
        "the relay source (bound",
        lambda ws, folder: ws.save_draft("five", FIVE_STEPS + "\n# edited\n"),
    ),
    "waiting for a message": Case(
        "waiting",
        "relay send five-1 approval JSON",
        lambda ws, folder: _edit_record(
            folder,
            status="waiting",
            waiting={
                "kind": "message",
                "workflow_id": folder.run_id,
                "since_ms": time.time() * 1000,
                "topic": "approval",
                "until_ms": time.time() * 1000 + 3_600_000,
            },
        ),
    ),
    "go": Case(None, ""),
}


def _rules(ws: Workspace, folder: RunFolder) -> Decision:
    """The pure rules on the facts of ``folder`` as they are now (all checks, as under lock)."""
    record = RunRecord.load(folder)
    lost = find_lost_checkpoints(folder, record) if record.attempts else None
    now = time.time() * 1000
    return decide(
        Facts(
            record=record,
            granted=AccessPolicy(ws.home).is_granted(record.relay),
            now_ms=now,
            wait_ready=wait_ready(folder, record, None, now) if record.waiting else None,
            blocking=[Uncertain(c.key, c.describe()) for c in Journal(folder.journal).blocking()],
            changed=bindings_changed(ws, record),
            lost=lost,
        )
    )


def _recover(ws: Workspace, run_id: str) -> tuple[str, str | None, str | None]:
    """A real recovery: (status, code, message), whether it raised, held or ran."""
    try:
        outcome = go(start_recovery(ws, run_id))
    except RelayError as exc:
        return "refused", exc.code, exc.message
    error = outcome.error or {}
    return outcome.status, error.get("code"), error.get("message")


@pytest.mark.parametrize("name", list(CASES))
def test_rules_preview_and_recovery_agree(workspace: Workspace, name: str) -> None:
    """For each case the rules, the recovery preview and recover give one code and message."""
    case = CASES[name]
    if case.durable:
        draft = workspace.save_draft("five", FIVE_STEPS)
        run_input: Any = INPUT
    else:
        draft = workspace.save_draft("five", PLAIN, Manifest(relay_durability="none"))
        run_input = {}
    crash = parse_crash_spec(case.crash) if case.crash else None
    first = go(start_run(workspace, draft, run_input=run_input, crash=crash))
    assert first.status == ("succeeded" if case.crash is None else "interrupted")
    folder = find_run(workspace, first.run_id)
    case.prepare(workspace, folder)

    decision = _rules(workspace, folder)
    preview = preview_recovery(workspace, first.run_id)
    status, code, message = _recover(workspace, first.run_id)

    assert decision.code == case.code
    if case.code is None:
        assert decision.verdict == "go" and preview.outcome == "recover"
        assert preview.attempt == 2 and status == "succeeded"
        return
    assert decision.message is not None and case.says in decision.message
    assert preview.reason == {"code": case.code, "message": decision.message}
    assert preview.outcome == ("returns" if case.code == "finished" else "stops")
    if case.code == "finished":  # the run comes back as it was: no attempt, no error
        assert (status, code) == ("succeeded", None)
    else:
        assert (code, message) == (case.code, decision.message)
        held = {
            "access-revoked": "denied",
            "needs-reconciliation": "needs_reconciliation",
            "waiting": "waiting",
        }
        assert status == held.get(case.code, "refused")
    assert len(RunRecord.load(folder).attempts) == 1  # no attempt was used
