"""Damaged records are one run's problem: real runs, real damage, coded errors naming the file.

A run folder is damaged the ways the probe found (run.json truncated, ``[]``, ``attempts`` not
a list, ``deadline_ms`` gone; ``.relay_dbos/`` deleted; a succeeded run's result deleted or
garbled); listing marks that run and keeps the others; ``logs`` and ``recover`` of it end with
one coded line. Ledger appends from a refused ``recover`` while an attempt runs keep the
sequence unbroken.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.cli import main
from relay_notebook.history import list_runs, read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import EventWriter, check_events, read_events
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relays import relay_source


def relay(ws: Workspace, *args: str) -> tuple[int, str, str]:
    """Run ``relay --home HOME ARGS...`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--home", str(ws.home), *args])
    return code, out.getvalue(), err.getvalue()


def coded_line(ws: Workspace, *args: str) -> str:
    """The single stderr line of a command that was refused with a code (not a bug)."""
    code, _, err = relay(ws, *args)
    lines = err.strip().splitlines()
    assert code in (1, 2) and len(lines) == 1, err
    assert "[internal-error]" not in lines[0] and lines[0].startswith("relay: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """A workspace with three runs of five: succeeded (1), interrupted (2), succeeded (3)."""
    ws = Workspace(tmp_path_factory.mktemp("damage") / "relays")
    ws.save_draft("five", relay_source("five"))
    outcomes = [
        commands.run(ws, "five", run_input={"n": 2}, crash=crash).wait(120)
        for crash in (None, "after:fetch", None)
    ]
    assert [o.status for o in outcomes] == ["succeeded", "interrupted", "succeeded"]
    return ws


def _edit_meta(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def damage(meta: Path) -> None:
        data = json.loads(meta.read_text())
        change(data)
        meta.write_text(json.dumps(data))

    return damage


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated": lambda meta: meta.write_bytes(meta.read_bytes()[:40]),
    "a list": lambda meta: meta.write_text("[]"),
    "attempts not a list": _edit_meta(lambda m: m.update(attempts="three")),
    "deadline_ms missing": _edit_meta(lambda m: m.pop("deadline_ms")),
    "not UTF-8": lambda meta: meta.write_bytes(b"\xff\xfe{"),
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_run_json_is_listed_as_damaged_and_names_its_file(
    ws: Workspace, how: str
) -> None:
    """``runs`` marks the damaged run and lists the others; ``logs``/``recover`` name run.json."""
    meta = find_run(ws, "five-2").meta
    original = meta.read_bytes()
    DAMAGE[how](meta)
    try:
        found = {s.run_id: s for s in list_runs(ws)}
        assert [found[r].status for r in ("five-1", "five-2", "five-3")] == [
            "succeeded",
            "damaged",
            "succeeded",
        ]
        assert found["five-2"].problem is not None and str(meta) in found["five-2"].problem
        code, out, err = relay(ws, "runs")
        assert code == 0 and "five-2" in out and "damaged" in out and "five-3" in out, err
        listed = {r["run_id"]: r for r in json.loads(relay(ws, "runs", "--json")[1])}
        assert listed["five-2"]["status"] == "damaged" and listed["five-1"]["problem"] is None
        for command in ("logs", "recover"):
            line = coded_line(ws, command, "five-2")
            assert line.endswith("[run-record-damaged]") and str(meta) in line
    finally:
        meta.write_bytes(original)
    assert {s.status for s in list_runs(ws)} == {"succeeded", "interrupted"}


def test_a_deleted_dbos_folder_refuses_recovery_naming_it(ws: Workspace) -> None:
    """Recovering a run whose ``.relay_dbos/`` is gone is a coded error; logs still read."""
    folder = find_run(ws, "five-2")
    aside = folder.path / "dbos-aside"
    shutil.move(folder.dbos_dir, aside)
    try:
        line = coded_line(ws, "recover", "five-2")  # the checkpoint guard names the file
        assert line.endswith("[checkpoints-lost]") and ".relay_dbos" in line
        code, _, err = relay(ws, "logs", "five-2")
        assert code == 0, err
    finally:
        shutil.move(aside, folder.dbos_dir)
    assert find_run(ws, "five-2").read_meta()["status"] == "interrupted"


@pytest.mark.parametrize("how", ["deleted", "garbled"])
def test_a_succeeded_run_without_a_readable_result_names_the_file(ws: Workspace, how: str) -> None:
    """``recover`` of a succeeded run whose relay_result.json is gone or garbled names it."""
    result = find_run(ws, "five-3").result
    original = result.read_bytes()
    if how == "deleted":
        result.unlink()
    else:
        result.write_text('{"total": ')
    try:
        line = coded_line(ws, "recover", "five-3")
        assert line.endswith("[run-record-damaged]") and "relay_result.json" in line
        assert relay(ws, "logs", "five-3")[0] == 0
    finally:
        result.write_bytes(original)


def test_writers_in_turn_on_one_ledger_never_repeat_a_sequence_number(tmp_path: Path) -> None:
    """Two writers opened on one ledger and used in turn number on from each other."""
    ledger = tmp_path / "dbos_events.jsonl"
    first = EventWriter(ledger, run_id="r-1", attempt=1)
    second = EventWriter(ledger, run_id="r-1", attempt=1)
    for i in range(5):
        (first if i % 2 else second).emit("log", level="INFO", message=f"tick {i}")
    first.emit("log", level="INFO", message="tock")
    first.close()
    second.close()
    events = read_events(ledger)
    assert [e["seq"] for e in check_events(events, "r-1", ledger)] == [1, 2, 3, 4, 5, 6]


def test_a_recover_refused_while_an_attempt_runs_keeps_the_ledger_readable(
    tmp_path: Path,
) -> None:
    """A recover held as denied during a live attempt appends its event without a seq clash."""
    ws = Workspace(tmp_path / "relays")
    ws.save_draft("nap", relay_source("nap"))
    handle = commands.run(ws, "nap", run_input={"seconds": 2})
    folder = handle.folder
    wait_until(lambda: any(e["kind"] == "step_start" for e in read_events(folder.events)))
    commands.revoke(ws, "nap")
    held = commands.recover(ws, handle.run_id).wait(10)
    assert held.status == "denied"
    commands.grant(ws, "nap")
    assert handle.wait(120).status == "succeeded"
    log = read_run_log(ws, handle.run_id)  # raised [ledger-corrupt] when seqs collided
    kinds = [e["kind"] for e in log.events]
    assert "recovery_held" in kinds and kinds.index("recovery_held") < len(kinds) - 1
    assert [e["seq"] for e in log.events] == list(range(1, len(log.events) + 1))
    code, out, err = relay(ws, "logs", handle.run_id, "--json")
    assert code == 0 and json.loads(out)["status"] == "succeeded", err
