"""History's readers on their own: safe output previews and the selective ledger scan."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from agentworks.redact import Redactor
from relay_notebook.errors import LedgerCorruptError
from relay_notebook.history.ledger_scan import LedgerScan
from relay_notebook.history.outputs import PREVIEW_CHARS, output_preview
from relay_notebook.record.ledger import EventWriter
from relay_notebook.record.ledger_events import EventKind


@dataclasses.dataclass
class Invoice:
    amount: int


class Explosive:
    """Unpickling this would run ``print``; a preview must never do that."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (print, ("unpickled!",))


def saved(value: Any, protocol: int = pickle.DEFAULT_PROTOCOL) -> str:
    """A value as DBOS saves it: a base64 pickle."""
    return base64.b64encode(pickle.dumps(value, protocol=protocol)).decode()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ({"amount": 1200, "ok": True}, '{"amount": 1200, "ok": true}'),
        ([1, (2, 3)], "[1, [2, 3]]"),
        ("x", '"x"'),
        ({1, 2}, "{1, 2}"),
        (ConnectionError("service down"), "ConnectionError('service down')"),
        (b"raw", "b'raw'"),
        (None, "null"),
    ],
)
def test_builtin_values_are_shown(value: Any, shown: str) -> None:
    """JSON values are shown as JSON; other builtins and builtin exceptions by their repr."""
    assert output_preview(saved(value), "py_pickle") == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Invoice(3), f"<{__name__}.Invoice>"),
        (datetime.date(2025, 1, 31), "<datetime.date>"),
        (Explosive(), "<builtins.print>"),
    ],
)
def test_other_classes_are_named_not_unpickled(
    value: Any, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any class outside builtins is named from the pickle's opcodes and never called."""
    assert output_preview(saved(value), "py_pickle") == shown
    assert "unpickled!" not in capsys.readouterr().out


def test_previews_are_short_and_redacted() -> None:
    """A vault value is replaced before the preview is cut to length."""
    secret = "tok-" + "9" * 20
    text = output_preview(
        saved({"token": secret, "pad": "x" * 500}), "py_pickle", Redactor({"API": secret})
    )
    assert text is not None and secret not in text and "[vault:API]" in text
    assert len(text) == PREVIEW_CHARS and text.endswith("…")
    big = output_preview(saved(list(range(100_000))), "py_pickle")
    assert big is not None and big.startswith("<") and "bytes pickled>" in big


def write_ledger(path: Path, run_id: str, kinds: list[EventKind]) -> None:
    writer = EventWriter(path, run_id=run_id, attempt=1)
    for kind in kinds:
        if kind == "receipt":
            writer.emit(kind, key=None, call_kind="agent", name="s")
        else:
            writer.emit(kind, step="s", step_id=1, workflow_id=run_id)
    writer.close()


def test_the_scan_selects_events_by_kind_and_attempt(tmp_path: Path) -> None:
    """Selected events are those of the kind (and attempt) asked for, in order."""
    path = tmp_path / "dbos_events.jsonl"
    write_ledger(path, "r-1", ["step_start", "step_error", "step_start", "receipt"])
    scan = LedgerScan(path, "r-1")
    assert [e["seq"] for e in scan.select("step_start", 1)] == [1, 3]
    assert [e["seq"] for e in scan.select("step_error")] == [2]
    assert scan.select("step_start", 2) == []
    assert [e["seq"] for e in scan.events()] == [1, 2, 3, 4]


def test_a_line_being_written_is_left_out(tmp_path: Path) -> None:
    """An incomplete last line (a live writer mid-line) is not read, and is no corruption."""
    path = tmp_path / "dbos_events.jsonl"
    write_ledger(path, "r-1", ["step_start"])
    with open(path, "ab") as fh:
        fh.write(b'{"seq":2,"ts":1,"run_id":"r-1","attempt":1,"kind":"step_e')
    scan = LedgerScan(path, "r-1")
    assert scan.count == 1 and [e["kind"] for e in scan.events()] == ["step_start"]


def test_a_torn_line_in_the_middle_is_skipped(tmp_path: Path) -> None:
    """A line torn by a killed writer and ended by the next one is skipped, the rest read."""
    path = tmp_path / "dbos_events.jsonl"
    write_ledger(path, "r-1", ["step_start"])
    with open(path, "ab") as fh:
        fh.write(b'{"seq":2,"ts":1,"run_id":"r-1","att')
    write_ledger(path, "r-1", ["step_error"])  # the writer ends the torn line first
    scan = LedgerScan(path, "r-1")
    assert [(e["seq"], e["kind"]) for e in scan.select("step_error")] == [(2, "step_error")]


@pytest.mark.parametrize("damage", ["gap", "foreign"])
def test_a_damaged_ledger_is_refused(tmp_path: Path, damage: str) -> None:
    """A gap in the numbering or another run's events raise ledger-corrupt."""
    path = tmp_path / "dbos_events.jsonl"
    write_ledger(path, "r-1", ["step_start", "step_end", "step_start"])
    lines = path.read_bytes().splitlines(keepends=True)
    if damage == "gap":
        del lines[1]
    else:
        event = json.loads(lines[1]) | {"run_id": "r-9"}
        lines[1] = (json.dumps(event, separators=(",", ":")) + "\n").encode()
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerCorruptError):
        LedgerScan(path, "r-1")
