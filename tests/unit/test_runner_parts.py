"""Runner pieces that need no child process: crash specs, run ids, the ledger, bindings, traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relay_notebook.errors import InvalidCrashSpecError, InvalidRunIdError, RunNotFoundError
from relay_notebook.record.bindings import changed_bindings, compute_bindings
from relay_notebook.record.folders import allocate_run, parse_run_id
from relay_notebook.record.ledger import EventWriter, decode_event, read_events
from relay_notebook.runner import CrashSpec, find_run, parse_crash_spec
from relay_notebook.runner.outcome import TRACE_LIMIT, write_trace
from relay_notebook.workspace import Workspace


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("after:charge", CrashSpec("after", "charge", 1)),
        ("during:charge#2", CrashSpec("during", "charge", 2)),
        (" after:extract_invoice#10 ", CrashSpec("after", "extract_invoice", 10)),
    ],
)
def test_crash_specs_parse(text: str, spec: CrashSpec) -> None:
    """after:/during: with an optional #N parse into a CrashSpec."""
    assert parse_crash_spec(text) == spec


@pytest.mark.parametrize("text", ["", "after", "later:x", "after:", "after:x#0", "during:x#-1"])
def test_bad_crash_specs_show_the_accepted_forms(text: str) -> None:
    """A malformed --crash names the forms that work."""
    with pytest.raises(InvalidCrashSpecError, match="expected after:STEP or during:STEP"):
        parse_crash_spec(text)


def test_run_ids_name_relay_and_number(workspace: Workspace) -> None:
    """invoice-3 is run 3 of relay invoice; relay names may contain dashes and digits."""
    assert parse_run_id("invoice-3") == ("invoice", 3)
    assert parse_run_id("my-relay-2-12") == ("my-relay-2", 12)
    with pytest.raises(InvalidRunIdError, match="expected RELAY-N"):
        parse_run_id("invoice")
    with pytest.raises(RunNotFoundError, match="relay runs invoice"):
        find_run(workspace, "invoice-3")


def test_run_folders_are_numbered_in_order(workspace: Workspace) -> None:
    """Each new run gets the next iteration-N-hook folder with its subfolders."""
    workspace.save_draft("r", "x = 1\n")
    first, second = allocate_run(workspace, "r"), allocate_run(workspace, "r")
    assert (first.number, second.number) == (1, 2)
    assert second.path.name == "iteration-2-hook"
    assert all((second.path / d).is_dir() for d in (".relay_dbos", ".relay_ipc", "execution"))


def test_ledger_numbers_events_across_writers_and_skips_a_torn_line(tmp_path: Path) -> None:
    """Sequence numbers continue across writers; a half-written last line is ignored."""
    path = tmp_path / "dbos_events.jsonl"
    a = EventWriter(path, run_id="r-1", attempt=1)
    a.emit("attempt_start")
    a.emit("step_start", step="s")
    a.close()
    with open(path, "ab") as fh:
        fh.write(b'{"seq": 3, "kind": "step_e')  # the process died mid-write
    b = EventWriter(path, run_id="r-1", attempt=2)
    b.emit("attempt_start")
    b.close()
    events = read_events(path)
    assert [(e["seq"], e["attempt"], e["kind"]) for e in events] == [
        (1, 1, "attempt_start"),
        (2, 1, "step_start"),
        (3, 2, "attempt_start"),
    ]


def test_a_writer_numbers_on_from_a_long_ledgers_end_and_a_torn_line_in_its_middle(
    tmp_path: Path,
) -> None:
    """A new writer counts a ledger longer than the tail it reads from its end, and a line torn
    by a killed writer, then ended by the next one, is skipped by every reader."""
    path = tmp_path / "dbos_events.jsonl"
    a = EventWriter(path, run_id="r-1", attempt=1)
    for i in range(3000):  # some 400 KiB: more than the tail a writer reads
        a.emit("step_start", step="s", occurrence=i, input_preview="x" * 100)
    a.close()
    assert path.stat().st_size > 300_000
    with open(path, "ab") as fh:
        fh.write(b'{"seq":3001,"ts":1.0,"run_id":"r-1","attempt":1,"kind":"st')  # killed here
    b = EventWriter(path, run_id="r-1", attempt=2)
    b.emit("attempt_start")
    b.close()
    c = EventWriter(path, run_id="r-1", attempt=2)  # its own last line is whole again
    c.emit("attempt_end", status="succeeded")
    c.close()
    events = read_events(path)
    assert [e["seq"] for e in events] == list(range(1, 3003))
    assert [(e["attempt"], e["kind"]) for e in events[-2:]] == [
        (2, "attempt_start"),
        (2, "attempt_end"),
    ]
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3003  # the torn line is still there, and read as no event
    assert [decode_event(line) for line in lines] == [*events[:3000], None, *events[3000:]]


def test_changed_bindings_name_what_changed() -> None:
    """Only the bindings that differ are reported, in the user's words."""
    bound = compute_bindings(input={"a": 1}, variables={}, source_hash="a" * 64)
    same = compute_bindings(input={"a": 1}, variables={}, source_hash="a" * 64)
    assert changed_bindings(bound, same) == []
    now = compute_bindings(input={"a": 2}, variables={"x": "y"}, source_hash="b" * 64)
    changes = changed_bindings(bound, now)
    assert [c.split(" (")[0] for c in changes] == [
        "the run input",
        "the relay's variables",
        "the relay source",
    ]
    assert "(bound aaaaaaaaaaaa, now bbbbbbbbbbbb)" in changes[2]
    assert set(bound) >= {"python", "dbos", "sqlalchemy", "runner"}


def minimal_meta(run_id: str, status: str) -> dict[str, object]:
    """A run.json with every field readers need and no attempts."""
    return {
        "run_id": run_id, "relay": run_id.rsplit("-", 1)[0], "status": status, "code_dir": ".",
        "app_version": "0", "bindings": {}, "created_at": 0.0, "deadline_ms": 0.0,
        "attempts": [], "input": {},
    }  # fmt: skip


def test_trace_is_capped_at_2_mib_with_a_marker(workspace: Workspace) -> None:
    """A run with a huge ledger gets a trace under 2 MiB that says what it dropped."""
    workspace.save_draft("r", "x = 1\n")
    folder = allocate_run(workspace, "r")
    folder.write_meta(minimal_meta(folder.run_id, "succeeded"))
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=1)
    for i in range(6000):
        writer.emit("step_start", step="s", occurrence=i, step_id=i, input_preview="x" * 400)
    writer.close()
    write_trace(folder)
    data = folder.trace.read_bytes()
    assert len(data) <= TRACE_LIMIT
    trace = json.loads(data)
    assert trace["truncated"]["dropped_calls"] > 0
    assert trace["calls"][-1]["occurrence"] == 5999  # the newest calls are kept
    kept = len(trace["calls"])
    assert trace["truncated"]["dropped_calls"] == 6000 - kept  # it says how many went
    assert trace["calls"][0]["occurrence"] == 6000 - kept
    assert len(data) > TRACE_LIMIT - 1000  # as many as fit: the cap, not far under it


def test_a_trace_reads_one_call_per_line(workspace: Workspace) -> None:
    """relay_trace.json as a person opens it: its fields one per line, sorted, and each
    attempt and each call on a line of its own, in the ledger's order."""
    workspace.save_draft("r", "x = 1\n")
    folder = allocate_run(workspace, "r")
    folder.write_meta(minimal_meta(folder.run_id, "succeeded"))
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=1)
    writer.emit("attempt_start")  # not a call: the trace leaves it out
    for i in (1, 2):
        writer.emit("step_start", step="fetch", occurrence=i, step_id=i, input_preview=f"{i}")
        writer.emit("step_end", step="fetch", occurrence=i, step_id=i, duration_ms=1.5)
    writer.close()
    write_trace(folder)
    text = folder.trace.read_text(encoding="utf-8")
    trace = json.loads(text)
    assert list(trace) == ["attempts", "calls", "error", "relay", "run_id", "status"]
    lines = text.splitlines()
    calls = [line for line in lines if '"kind": "step_' in line]
    assert len(calls) == 4
    assert [json.loads(line.strip().rstrip(",")) for line in calls] == trace["calls"]
    assert [(c["kind"], c["occurrence"]) for c in trace["calls"]] == [
        ("step_start", 1), ("step_end", 1), ("step_start", 2), ("step_end", 2),
    ]  # fmt: skip
    assert all("run_id" not in c for c in trace["calls"])
    assert lines[0] == "{" and lines[-1] == "}"


def test_a_ledger_with_a_gap_or_a_foreign_event_is_rejected(workspace: Workspace) -> None:
    """Reading a run's history refuses a ledger with missing events or another run's events."""
    from relay_notebook.errors import LedgerCorruptError
    from relay_notebook.history import read_run_log

    workspace.save_draft("r", "x = 1\n")
    folder = allocate_run(workspace, "r")
    folder.write_meta(minimal_meta(folder.run_id, "running"))
    writer = EventWriter(folder.events, run_id=folder.run_id, attempt=1)
    writer.emit("attempt_start")
    writer.close()
    assert read_run_log(workspace, folder.run_id).steps == ()
    other = EventWriter(folder.events, run_id="r-99", attempt=1)
    other.emit("attempt_start")
    other.close()
    with pytest.raises(LedgerCorruptError, match="event of run 'r-99'"):
        read_run_log(workspace, folder.run_id)
    lines = folder.events.read_text().splitlines()
    folder.events.write_text(
        lines[0]
        + "\n"
        + lines[1].replace('"r-99"', f'"{folder.run_id}"').replace('"seq":2', '"seq":5')
        + "\n"
    )
    with pytest.raises(LedgerCorruptError, match="skips from event 1 to 5"):
        read_run_log(workspace, folder.run_id)
