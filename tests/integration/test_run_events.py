"""A run's DBOS events, stream values and messages, read back from real runs (SQLite, PG)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from relay_notebook import commands
from relay_notebook.history import overlay_run
from relay_notebook.history.run_events import read_run_events
from relay_notebook.history.run_graph import overlay_events
from relay_notebook.record.folders import find_run
from relay_notebook.runner import start_run
from relay_notebook.runner.backend import resolve_backend
from relay_notebook.views.live import RunMonitor
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relays import relay_source

REPO = Path(__file__).parents[2]


def _go(ws: Workspace, relay: str, run_input: dict[str, Any], **options: Any) -> str:
    draft = ws.save_draft(relay, relay_source(relay))
    outcome = start_run(ws, draft, run_input=run_input, **options).wait(120)
    assert outcome.status == "succeeded", outcome.error
    return outcome.run_id


def _dbos_rows(ws: Workspace, run_id: str, sql: str) -> list[tuple[Any, ...]]:
    database = find_run(ws, run_id).database
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def test_events_and_streams_come_back_as_the_relay_wrote_them(workspace: Workspace) -> None:
    """Each event's latest value, every set_event call with its function id, the stream's
    values in order and its close: what the relay published, as values, not pickles."""
    run_id = _go(workspace, "streamer", {"parts": 3, "pause": 0.05})
    found = read_run_events(workspace, run_id)
    assert found.values() == {
        "events": {"progress": {"done": 3}},
        "streams": {"output": ["part 0", "part 1", "part 2"]},
    }
    set_calls = _dbos_rows(
        workspace, run_id, "SELECT function_id FROM operation_outputs "
        "WHERE function_name = 'DBOS.setEvent' ORDER BY function_id",
    )  # fmt: skip
    assert [(h["function_id"], h["value"]) for h in found.history] == [
        (fid, {"done": n}) for (fid,), n in zip(set_calls, (1, 2, 3), strict=True)
    ]
    assert found.events[0]["function_id"] == set_calls[-1][0]
    writes = _dbos_rows(
        workspace, run_id, "SELECT function_id FROM operation_outputs "
        "WHERE function_name = 'DBOS.writeStream' ORDER BY function_id",
    )  # fmt: skip
    assert [(s["offset"], s["function_id"]) for s in found.streams] == [
        (i, fid) for i, (fid,) in enumerate(writes)
    ]
    assert found.closed == [{"workflow_id": run_id, "key": "output"}]
    latest = found.latest(per_stream=2)
    assert latest["streams"][0]["count"] == 3 and latest["streams"][0]["closed"] is True
    assert [v["preview"] for v in latest["streams"][0]["values"]] == ['"part 1"', '"part 2"']


def test_values_are_decoded_without_the_relays_code_and_redacted(workspace: Workspace) -> None:
    """A vault value is replaced wherever it appears (here one stored after the run); a
    builtin that has no JSON form is shown by its repr; an object of a class of the relay is
    named, never imported."""
    secret = "tok-8f3e-very-secret"
    run_id = _go(workspace, "publisher", {"token": secret})
    commands.vault_set(workspace, "API_TOKEN", secret)
    found = read_run_events(workspace, run_id)
    doc = json.dumps(found.to_dict())
    assert secret not in doc
    by_key = {e["key"]: e for e in found.events}
    assert by_key["secret"]["value"] == {"token": "[vault:API_TOKEN]"}
    assert by_key["secret"]["json"] is True
    assert by_key["numbers"] == {**by_key["numbers"], "value": "frozenset({7})", "json": False}
    receipt = by_key["receipt"]
    assert receipt["json"] is False and receipt["value"].endswith(".Receipt>")
    assert "relay" not in {m.split(".")[0] for m in sys.modules}, "the relay was imported"
    assert found.streams[0]["value"] == "token is [vault:API_TOKEN]"


def test_the_cli_prints_what_the_reader_reads(workspace: Workspace) -> None:
    """``relay events RUN --json`` is the reader's document; the plain form names each
    event, stream and value in lines a person reads."""
    run_id = _go(workspace, "streamer", {"parts": 2, "pause": 0.05})
    env = {**os.environ, "PYTHONPATH": str(REPO), "RELAY_CONFINE": "0"}
    cli = [sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home), "events"]
    as_json = subprocess.run([*cli, run_id, "--json"], env=env, capture_output=True, text=True)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == read_run_events(workspace, run_id).to_dict()
    plain = subprocess.run([*cli, run_id], env=env, capture_output=True, text=True).stdout
    assert plain.splitlines() == [
        'event progress: {"done": 2}, set 2 times',
        "stream output: 2 values, closed",
        '  [0] "part 0"',
        '  [1] "part 1"',
    ]


def test_reading_events_leaves_the_database_as_it_was(workspace: Workspace) -> None:
    """The reader goes through the record's one opener: no -shm or -wal appears, no byte of
    the run's database changes."""
    run_id = _go(workspace, "streamer", {"parts": 2, "pause": 0.05})
    folder = find_run(workspace, run_id)
    before = {p.name: p.read_bytes() for p in folder.database.parent.iterdir()}
    assert read_run_events(workspace, run_id).streams
    after = {p.name: p.read_bytes() for p in folder.database.parent.iterdir()}
    assert after == before


def test_a_run_blocked_in_recv_shows_the_wait_node_waiting(workspace: Workspace) -> None:
    """While the approval relay waits for its message, the run graph marks the wait node it
    is blocked in as waiting (not failed, not running), and that node shows the draft."""
    draft = workspace.save_draft("approval", relay_source("approval"))
    handle = start_run(workspace, draft, run_input={"order": "A-9"})
    flow = commands.graph(workspace, "approval")

    def painted() -> dict[str, Any] | None:
        log = commands.logs(workspace, handle.run_id)
        graph = overlay_run(flow, log)
        overlay_events(graph, read_run_events(workspace, handle.run_id).latest())
        nodes = {n.type: n.details for n in graph.nodes}
        return nodes if nodes["wait"].get("status") == "waiting" else None

    try:
        nodes = wait_until(painted, timeout=60, what="the wait node to be waiting")
    finally:
        if handle.outcome is None:
            handle.cancel()
    assert nodes["event"]["status"] == "succeeded"
    assert json.loads(nodes["event"]["latest"])["text"] == "Refund 42 EUR on order A-9"
    assert [e["key"] for e in nodes["wait"]["events"]] == ["draft"]
    assert nodes["output"]["status"] == "pending"
    assert all(d.get("status") != "failed" for d in nodes.values())


def test_on_postgres_a_reader_sees_only_its_runs_rows(
    workspace: Workspace, database_url: str
) -> None:
    """Two relays share one PostgreSQL database: each run's events and streams are its own."""
    backend = resolve_backend(database_url)
    streamer = _go(workspace, "streamer", {"parts": 2, "pause": 0.05}, backend=backend)
    other = _go(workspace, "streamer", {"parts": 1, "pause": 0.05}, backend=backend)
    assert read_run_events(workspace, streamer).values() == {
        "events": {"progress": {"done": 2}},
        "streams": {"output": ["part 0", "part 1"]},
    }
    mine = read_run_events(workspace, other)
    assert {r["workflow_id"] for r in [*mine.events, *mine.streams, *mine.history]} == {other}
    assert mine.values()["streams"] == {"output": ["part 0"]}


def test_a_sleeping_run_says_until_when_and_its_sleep_node_waits(workspace: Workspace) -> None:
    """A run past its grace in DBOS.sleep ends its attempt waiting: the header says sleeping
    until the record's time (the reader's clock) and what wakes it; the sleep node is drawn
    waiting, the check_out step after it pending, nothing failed."""
    draft = workspace.save_draft("snooze", relay_source("snooze"))
    outcome = start_run(workspace, draft, run_input={"seconds": 600}).wait(120)
    assert outcome.status == "waiting"
    record = find_run(workspace, outcome.run_id).read_meta()
    until = time.strftime("%H:%M:%S %Z", time.localtime(record["waiting"]["until_ms"] / 1000))
    monitor = RunMonitor(
        commands.graph(workspace, "snooze"),
        lambda run_id: commands.logs(workspace, run_id),
        run_id=outcome.run_id,
    )
    monitor.refresh()
    assert monitor.summary() == (
        f"run {outcome.run_id}: waiting · attempt 1 of 3 · 2 executed — sleeping until {until} "
        "· no process is held meanwhile; "
        "it resumes once due, on %relay wake or the next relay command"
    )
    nodes = {n.type: n.details for n in monitor.graph.nodes}
    assert nodes["sleep"]["status"] == "waiting"
    assert {n.label: n.details["status"] for n in monitor.graph.nodes if n.type == "step"} == {
        "check_in": "succeeded",
        "check_out": "pending",
    }
    assert "error" not in (monitor.run or {})
