"""Payloads up to their documented limits, under both confinements, and database errors.

A message (256 KiB), a run input (1 MiB), an event as large as the largest message and a
fork's edited step output (held to the input's 1 MiB) travel through DBOS in a confined child:
forked from the warm parent under Landlock, or spawned under bubblewrap. SQLite needs a
temporary file for such rows, and only the attempt's own ``child/tmp`` is writable there.
A database that refuses a statement is reported in one line with a stable code, never with
the SQL text SQLAlchemy puts in its errors.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from typing import Any

import pytest

from relay_notebook.cli import main as cli_main
from relay_notebook.errors import InvalidInputError, RunDatabaseError, codes
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner import RunOutcome, start_run
from relay_notebook.runner.messages import MAX_MESSAGE_BYTES, send_message
from relay_notebook.runner.run_input import MAX_INPUT_BYTES
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

#: what a statement in an error would show (SQLAlchemy prints "[SQL: ...]" and its parameters)
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b|\[SQL|\[parameters")


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _sized(size: int, **fields: Any) -> dict[str, Any]:
    """A JSON object of exactly ``size`` bytes (compact UTF-8, as the kit counts), with a
    few two-byte characters so bytes and characters differ."""
    value = {**fields, "pad": "é" * 8}
    value["pad"] += "x" * (size - _json_bytes(value))
    assert _json_bytes(value) == size
    return value


def _digest(value: Any) -> dict[str, Any]:
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _wait(handle: Any) -> RunOutcome:
    outcome: RunOutcome = handle.wait(120)
    return outcome


def _waiting(ws: Workspace, run_input: Any) -> str:
    """A run of the payloads relay, waiting for its message with no process."""
    ws.wait_grace_s = 0.5
    draft = ws.save_draft("payloads", relay_source("payloads"))
    out = _wait(start_run(ws, draft, run_input=run_input))
    assert out.status == "waiting", out.error
    return out.run_id


def _event(ws: Workspace, run_id: str, key: str) -> Any:
    """The latest value of the run's event ``key``, read with DBOS's own client."""
    from dbos import DBOSClient

    path = find_run(ws, run_id).database.resolve()
    client = DBOSClient(system_database_url=f"sqlite:///{path}")
    try:
        return client.get_event(run_id, key, timeout_seconds=0)
    finally:
        client.destroy()


def _confined_by(ws: Workspace, run_id: str) -> str | None:
    """The mechanism that confined the run's last attempt, as run.json records it."""
    attempt = find_run(ws, run_id).read_meta()["attempts"][-1]
    return str(attempt["confinement"]["mechanism"]) if attempt.get("confined") else None


def test_a_message_at_its_limit_resumes_a_waiting_run_and_is_published_as_an_event(
    confined: tuple[str, Workspace],
) -> None:
    """A 256 KiB message resumes a waiting run, which receives it whole and publishes it as an
    event read back whole; a byte more is refused before anything is delivered."""
    mechanism, ws = confined
    run_id = _waiting(ws, {})
    with pytest.raises(InvalidInputError, match=r"262,145 bytes of JSON; the limit is 262,144"):
        send_message(ws, run_id, "payload", _sized(MAX_MESSAGE_BYTES + 1))
    message = _sized(MAX_MESSAGE_BYTES, note="approved")
    delivery = send_message(ws, run_id, "payload", message)
    assert delivery.handle is not None
    final = _wait(delivery.handle)
    assert final.status == "succeeded", final.error
    assert final.result["message"] == _digest(message)
    assert _event(ws, run_id, "echo") == message
    assert _confined_by(ws, run_id) == mechanism


def test_an_input_at_its_limit_reaches_the_resumed_attempt(
    confined: tuple[str, Workspace],
) -> None:
    """A 1 MiB run input is kept by DBOS and reaches the attempt that a message resumes."""
    mechanism, ws = confined
    run_input = _sized(MAX_INPUT_BYTES)
    run_id = _waiting(ws, run_input)
    delivery = send_message(ws, run_id, "payload", {"ok": True})
    assert delivery.handle is not None
    final = _wait(delivery.handle)
    assert final.status == "succeeded", final.error
    assert final.result["input"] == _digest(run_input)
    assert [a.status for a in RunRecord.load(find_run(ws, run_id)).attempts] == [
        "waiting",
        "succeeded",
    ]
    assert _confined_by(ws, run_id) == mechanism


def test_a_fork_edit_at_the_input_limit_reaches_the_calls_that_run_fresh(
    confined: tuple[str, Workspace],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``relay fork RUN --from finish#1 --set fetch#1=V`` with a 1 MiB V: the fork's fresh
    call receives V whole, replaying the copied message from its checkpoint."""
    mechanism, ws = confined
    run_id = _waiting(ws, {})
    delivery = send_message(ws, run_id, "payload", {"ok": True})
    assert delivery.handle is not None and _wait(delivery.handle).status == "succeeded"
    edit = _sized(MAX_INPUT_BYTES, edited=True)
    monkeypatch.setenv("RELAY_WARM_START", "1" if mechanism == "landlock" else "0")
    capsys.readouterr()
    argv = ["--home", str(ws.home), "fork", run_id, "--from", "finish#1"]
    text = json.dumps(edit, ensure_ascii=False, separators=(",", ":"))
    code = cli_main([*argv, "--set", f"fetch#1={text}", "--json"])
    shown = capsys.readouterr()
    assert shown.out, shown.err
    out = json.loads(shown.out)
    assert code == 0 and out["status"] == "succeeded", out.get("error")
    assert out["result"]["fetched"] == _digest(edit)
    assert out["result"]["message"] == _digest({"ok": True})
    fork = RunRecord.load(find_run(ws, out["run_id"]))
    assert fork.fork is not None and fork.fork["edits"]["outputs"] == ["fetch#1"]
    assert _confined_by(ws, fork.run_id) == mechanism


def _sabotage(ws: Workspace, run_id: str, table: str) -> None:
    """Damage the run's database: DBOS's table ``table`` is gone."""
    path = find_run(ws, run_id).database
    with sqlite3.connect(path) as conn:
        conn.execute(f"DROP TABLE {table}")
    conn.close()


def test_a_database_error_in_the_child_is_one_line_with_its_code_and_no_sql(
    workspace: Workspace,
) -> None:
    """A resumed attempt whose database lost a DBOS table fails with ``database-error`` in one
    line naming SQLite's reason; no message, traceback or ledger entry shows the SQL."""
    run_id = _waiting(workspace, {})
    _sabotage(workspace, run_id, "workflow_events_history")
    delivery = send_message(workspace, run_id, "payload", {"ok": True})
    assert delivery.handle is not None
    final = _wait(delivery.handle)
    assert final.status == "failed" and final.error is not None
    assert final.error["code"] == codes.DATABASE_ERROR.code
    message = final.error["message"]
    assert "no such table: main.workflow_events_history" in message and "\n" not in message
    assert not SQL.search(message) and not SQL.search(final.error.get("traceback", ""))
    shown = json.dumps(read_events(find_run(workspace, run_id).events))
    assert "no such table" in shown and not SQL.search(shown)


def test_a_database_error_while_sending_is_one_line_with_its_code_and_no_sql(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """``relay send`` to a run whose database lost DBOS's notifications table says so in one
    ``[database-error]`` line, without SQL, and delivers nothing."""
    run_id = _waiting(workspace, {})
    _sabotage(workspace, run_id, "notifications")
    with pytest.raises(RunDatabaseError) as caught:
        send_message(workspace, run_id, "payload", {"ok": True})
    assert "no such table: main.notifications" in caught.value.message
    capsys.readouterr()
    code = cli_main(["--home", str(workspace.home), "send", run_id, "payload", '{"ok": true}'])
    err = capsys.readouterr().err.strip()
    assert code == RunDatabaseError.exit_code != 0
    assert err.endswith(f"[{codes.DATABASE_ERROR.code}]") and "\n" not in err, err
    assert "no such table: main.notifications" in err and not SQL.search(err), err
    assert RunRecord.load(find_run(workspace, run_id)).status == "waiting"
