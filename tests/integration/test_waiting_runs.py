"""Waiting runs on real processes: a run blocked in DBOS.recv or DBOS.sleep costs no process.

Each test drives real children on DBOS (the run's SQLite file, or PostgreSQL), reads the run's
record and DBOS's own rows, and checks what a user would rely on: the run says ``waiting`` and
what for, no process is left, a message resumes it and its value reaches the relay, a crash
after the message loses nothing, timers resume through ``relay wake`` and the worker pool, a
message is delivered once per key, and waiting counts against neither budget nor deadline.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_runner import go

from relay_notebook import commands
from relay_notebook.cli import main as cli_main
from relay_notebook.errors import RunNotWaitingError
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner import parse_crash_spec, start_recovery, start_run
from relay_notebook.runner.backend import Backend, resolve_backend
from relay_notebook.runner.messages import send_message
from relay_notebook.runner.wake import due_runs, wake_due
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.procs import alive
from tests.relays import relay_source

GRACE_S = 0.5


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, workspace: Workspace) -> tuple[Workspace, Backend | None]:
    """The workspace (a short grace before a waiting attempt leaves) and the runs' database."""
    workspace.wait_grace_s = GRACE_S
    if request.param == "sqlite":
        return workspace, None
    return workspace, resolve_backend(request.getfixturevalue("database_url"))


def _notifications(ws: Workspace, run_id: str, backend: Backend | None) -> list[tuple[Any, ...]]:
    """DBOS's rows of the messages sent to the run: (message_uuid, topic, consumed)."""
    sql = "SELECT message_uuid, topic, consumed FROM {t} WHERE destination_uuid = {p}"
    if backend is None:
        path = find_run(ws, run_id).database
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            rows = conn.execute(sql.format(t="notifications", p="?"), (run_id,)).fetchall()
        return [(u, t, bool(c)) for u, t, c in rows]
    assert backend.url is not None
    with psycopg.connect(backend.url) as pg:
        return [
            tuple(r)
            for r in pg.execute(sql.format(t="dbos.notifications", p="%s"), (run_id,)).fetchall()
        ]


def _waiting_run(ws: Workspace, backend: Backend | None, relay: str, run_input: Any) -> str:
    draft = ws.save_draft(relay, relay_source(relay))
    out = go(start_run(ws, draft, run_input=run_input, backend=backend))
    assert out.status == "waiting", out.error
    return out.run_id


def test_a_waiting_run_has_no_process_and_a_message_resumes_it(where: Any) -> None:
    """The run says what it waits for, holds no process; ``send`` resumes it with the value."""
    ws, backend = where
    run_id = _waiting_run(ws, backend, "refund", {"order": "B-7"})
    record = RunRecord.load(find_run(ws, run_id))
    assert record.status == "waiting" and record.waiting is not None
    assert (record.waiting.kind, record.waiting.topic) == ("message", "approval")
    assert record.waiting.until_ms is not None and record.waiting.until_ms > time.time() * 1000
    assert record.error is not None and record.error["code"] == "waiting"
    assert "relay send refund-1 approval JSON" in record.error["message"]
    assert not alive(record.attempts[0].pid)  # the attempt ended: nothing holds the wait

    delivery = send_message(ws, run_id, "approval", {"approved": True, "note": "ok by Ann"})
    assert not delivery.duplicate and delivery.handle is not None
    final = go(delivery.handle)
    assert final.status == "succeeded"
    assert final.result == {"status": "paid", "paid": 40, "note": "ok by Ann"}
    record = RunRecord.load(find_run(ws, run_id))
    assert [a.status for a in record.attempts] == ["waiting", "succeeded"]
    assert record.waiting is None and record.budget_used == 1
    assert [c for _, _, c in _notifications(ws, run_id, backend)] == [True]  # consumed once

    with pytest.raises(RunNotWaitingError, match="succeeded; nothing will read a message"):
        send_message(ws, run_id, "approval", {"approved": False})
    assert len(_notifications(ws, run_id, backend)) == 1  # nothing was delivered


def test_a_rejection_ends_the_run_by_the_relays_own_logic(where: Any) -> None:
    ws, backend = where
    run_id = _waiting_run(ws, backend, "refund", {"order": "C-1"})
    delivery = send_message(ws, run_id, "approval", {"approved": False})
    assert delivery.handle is not None
    assert go(delivery.handle).result == {"status": "rejected", "order": "C-1"}


def test_a_crash_after_the_message_arrived_loses_nothing(where: Any) -> None:
    """SIGKILL the resumed attempt inside the step after recv: recovery replays the recorded
    message (DBOS consumed it with the recv's checkpoint) and pays with its note."""
    ws, backend = where
    run_id = _waiting_run(ws, backend, "refund", {"order": "D-4", "pause": 3})
    delivery = send_message(ws, run_id, "approval", {"approved": True, "note": "keep me"})
    handle = delivery.handle
    assert handle is not None
    folder = find_run(ws, run_id)

    def paying() -> bool:
        return any(
            e.get("kind") == "step_start" and str(e.get("step", "")).endswith("pay")
            for e in read_events(folder.events)
        )

    wait_until(paying, timeout=60, what="the resumed attempt to start pay")
    handle.kill()
    assert go(handle).status == "interrupted"
    final = go(start_recovery(ws, run_id, backend=backend))
    assert final.status == "succeeded"
    assert final.result == {"status": "paid", "paid": 40, "note": "keep me"}
    assert [c for _, _, c in _notifications(ws, run_id, backend)] == [True]  # consumed once
    record = RunRecord.load(folder)
    assert [a.status for a in record.attempts] == ["waiting", "interrupted", "succeeded"]


def test_the_recv_timeout_path_resumes_when_due(where: Any) -> None:
    """``recv(timeout)`` with no message: the run waits until its timer, then ``wake`` resumes
    it and the relay sees ``None``."""
    ws, backend = where
    run_id = _waiting_run(ws, backend, "refund", {"order": "E-2", "timeout": 2})
    record = RunRecord.load(find_run(ws, run_id))
    assert record.waiting is not None and record.waiting.until_ms is not None
    assert due_runs(ws, backend) == []  # not due yet
    assert wake_due(ws, backend=backend) == []
    wait_until(
        lambda: time.time() * 1000 >= record.waiting.until_ms,  # type: ignore[union-attr]
        timeout=10,
        what="the timer",
    )
    assert due_runs(ws, backend) == [run_id]
    handles = wake_due(ws, backend=backend)
    assert [h.run_id for h in handles] == [run_id]
    assert go(handles[0]).result == {"status": "timed out", "order": "E-2"}
    assert wake_due(ws, backend=backend) == []  # finished: nothing to wake again


def test_relay_wake_resumes_a_due_durable_sleep(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """``DBOS.sleep`` longer than the grace ends the attempt; ``relay wake`` (cron) resumes it
    once due, replaying the steps before the sleep from checkpoints."""
    workspace.wait_grace_s = GRACE_S
    run_id = _waiting_run(workspace, None, "snooze", {"seconds": 2})
    record = RunRecord.load(find_run(workspace, run_id))
    assert record.waiting is not None and record.waiting.kind == "sleep"
    assert "durable sleep" in str(record.error)
    home = str(workspace.home)
    assert cli_main(["--home", home, "wake"]) == 0
    assert "no waiting run is due" in capsys.readouterr().err
    wait_until(lambda: due_runs(workspace) == [run_id], timeout=10, what="the sleep to be due")
    assert cli_main(["--home", home, "wake"]) == 0
    assert f"run {run_id}: succeeded (attempt 2)" in capsys.readouterr().out
    log = commands.logs(workspace, run_id)
    assert log.run.status == "succeeded"
    assert [a.status for a in log.attempts] == ["waiting", "succeeded"]
    reused = {s.name for s in log.steps if s.reused_in}
    assert any(name.endswith("check_in") for name in reused)


def test_any_relay_command_wakes_due_runs_in_the_background(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the SQLite default nothing else runs: ``relay runs`` starts a detached ``relay
    wake`` that resumes the due run, and returns without waiting for it."""
    workspace.wait_grace_s = GRACE_S
    run_id = _waiting_run(workspace, None, "snooze", {"seconds": 1})
    wait_until(lambda: due_runs(workspace) == [run_id], timeout=10, what="the sleep to be due")
    assert cli_main(["--home", str(workspace.home), "runs", "snooze"]) == 0
    folder = find_run(workspace, run_id)
    wait_until(lambda: RunRecord.load(folder).status == "succeeded", timeout=60, what="the wake")
    assert len(RunRecord.load(folder).attempts) == 2


def test_two_concurrent_sends_resume_the_run_once(where: Any) -> None:
    """Two senders at once: both messages are delivered, one attempt resumes the run (the run
    lock), and the second message waits unconsumed for a later recv."""
    ws, backend = where
    run_id = _waiting_run(ws, backend, "refund", {"order": "F-9"})
    barrier = threading.Barrier(2)
    deliveries: list[Any] = []

    def sender(note: str) -> None:
        barrier.wait()
        deliveries.append(send_message(ws, run_id, "approval", {"approved": True, "note": note}))

    threads = [threading.Thread(target=sender, args=(n,)) for n in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    resumed = [d.handle for d in deliveries if d.handle is not None]
    assert len(deliveries) == 2 and len(resumed) == 1
    final = go(resumed[0])
    assert final.status == "succeeded" and final.result["note"] in ("one", "two")
    record = RunRecord.load(find_run(ws, run_id))
    assert [a.status for a in record.attempts] == ["waiting", "succeeded"]
    assert sorted(c for _, _, c in _notifications(ws, run_id, backend)) == [False, True]


def test_a_duplicate_delivery_is_delivered_once(where: Any) -> None:
    ws, backend = where
    run_id = _waiting_run(ws, backend, "gate", {"gates": 2})
    first = send_message(ws, run_id, "go", 5, idempotency_key="order-5")
    assert not first.duplicate and first.handle is not None
    assert go(first.handle).status == "waiting"  # the second gate
    again = send_message(ws, run_id, "go", 5, idempotency_key="order-5")
    assert again.duplicate and again.handle is None
    rows = _notifications(ws, run_id, backend)
    assert [u for u, _, _ in rows] == [f"order-5::{run_id}"]
    last = send_message(ws, run_id, "go", 7, idempotency_key="order-7")
    assert last.handle is not None
    assert go(last.handle).result == {"total": 12, "gates": 2}
    # a retry after the run finished gets the same answer, not a refusal
    assert send_message(ws, run_id, "go", 7, idempotency_key="order-7").duplicate


def test_waiting_counts_against_neither_the_budget_nor_the_deadline(workspace: Workspace) -> None:
    """Four waits in a run whose budget is 3 attempts and whose deadline is 10 s, answered
    after the deadline: it still succeeds, since only executing counts (the five attempts
    execute for well under 10 s even on a loaded machine; with 4 s they once did not)."""
    workspace.wait_grace_s = 0.3
    draft = workspace.save_draft("gate", relay_source("gate"))
    out = go(start_run(workspace, draft, run_input={"gates": 4}, deadline_s=10))
    assert out.status == "waiting"
    folder = find_run(workspace, out.run_id)
    created = RunRecord.load(folder)
    wait_until(
        lambda: time.time() * 1000 > created.deadline_ms + 500, timeout=30, what="the deadline"
    )
    for n in range(1, 5):
        delivery = send_message(workspace, out.run_id, "go", n)
        assert delivery.handle is not None, delivery
        outcome = go(delivery.handle)
        assert outcome.status == ("succeeded" if n == 4 else "waiting"), outcome.error
    assert outcome.result == {"total": 10, "gates": 4}
    record = RunRecord.load(folder)
    assert len(record.attempts) == 5 and record.budget_used == 1
    assert record.budget_used <= record.max_attempts < len(record.attempts)
    now = time.time() * 1000
    assert now > record.deadline_ms  # it finished past its first deadline...
    assert record.waited_ms(now) > 2000  # ...which moved on by the time it waited
    assert record.deadline_at(now) == record.deadline_ms + record.waited_ms(now)


def test_recover_on_a_waiting_run_says_how_to_answer_it(workspace: Workspace) -> None:
    workspace.wait_grace_s = GRACE_S
    run_id = _waiting_run(workspace, None, "refund", {})
    held = go(start_recovery(workspace, run_id))
    assert held.status == "waiting" and held.error is not None
    assert held.error["code"] == "waiting"
    assert f"relay send {run_id} approval JSON" in held.error["message"]
    assert len(RunRecord.load(find_run(workspace, run_id)).attempts) == 1  # no attempt used


def test_the_worker_pool_resumes_a_due_sleep(
    workspace: Workspace, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a worker runs the queued run to its sleep, the attempt ends waiting, and
    when the timer is due a worker puts the run back on the queue and finishes it."""
    monkeypatch.setenv("RELAY_WAIT_GRACE", str(GRACE_S))
    log = open(tmp_path / "w1.log", "wb")  # noqa: SIM115 - kept by the process
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home),
            "--database-url", database_url, "worker", "--id", "w1", "--lease", "1.5",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        workspace.save_draft("snooze", relay_source("snooze"))
        queued = commands.enqueue(
            workspace, "snooze", run_input={"seconds": 3}, backend=resolve_backend(database_url)
        )
        folder = find_run(workspace, queued.run_id)
        wait_until(
            lambda: RunRecord.load(folder).status in ("waiting", "succeeded"),
            timeout=90,
            what="the first attempt to reach the sleep",
        )
        assert RunRecord.load(folder).status == "waiting"
        wait_until(
            lambda: RunRecord.load(folder).status == "succeeded",
            timeout=90,
            what="a worker to resume the due run",
        )
        record = RunRecord.load(folder)
        assert [a.status for a in record.attempts] == ["waiting", "succeeded"]
        assert all(a.executor_id == "w1" for a in record.attempts)
        assert f"{queued.run_id} is due; queued to resume" in (tmp_path / "w1.log").read_text()
    finally:
        worker.kill()
        worker.wait()


def test_relay_wait_follows_a_run_through_its_waits(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """``relay wait RUN`` blocks until the run finishes, resuming it itself when its timer is
    due (a terminal has no kernel to do it); ``--timeout`` gives up with exit 5."""
    workspace.wait_grace_s = GRACE_S
    run_id = _waiting_run(workspace, None, "snooze", {"seconds": 2})
    home = str(workspace.home)
    assert cli_main(["--home", home, "wait", run_id, "--timeout", "0.2"]) == 5
    assert f"run {run_id} is still waiting (for a durable sleep)" in capsys.readouterr().err
    assert cli_main(["--home", home, "wait", run_id]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id}: succeeded (attempt 2)" in out and '"out": true' in out


def test_a_message_to_a_run_without_a_workflow_is_refused(workspace: Workspace) -> None:
    """An interrupted run whose database lost its workflow (or never had one) gets one coded
    refusal, no internal error, and no empty database is created for it."""
    draft = workspace.save_draft("refund", relay_source("refund"))
    out = go(start_run(workspace, draft, crash=parse_crash_spec("during:draft")))
    assert out.status == "interrupted"
    folder = find_run(workspace, out.run_id)
    for path in folder.database.parent.glob(folder.database.name + "*"):
        path.unlink()
    with pytest.raises(RunNotWaitingError, match=r"has no DBOS workflow.*relay recover refund-1"):
        send_message(workspace, out.run_id, "approval", {"approved": True})
    assert not folder.database.exists()
