"""The ledger's line format: the one encoder writes the bytes history's scan searches for."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_notebook.history.ledger_scan import LedgerScan
from relay_notebook.record.ledger import (
    HEADER,
    EventHeader,
    EventWriter,
    decode_event,
    encode_event,
    kind_tag,
    line_start,
    run_tag,
)


def test_encoded_line_carries_the_tags_the_scan_looks_for() -> None:
    """An encoded event starts with its sequence number and names its run, attempt and kind."""
    header = EventHeader(seq=1, ts=1.5, run_id="invoice-3", attempt=2, kind="step_end")
    line = encode_event(header, {"step": "load"}).encode()
    assert line.startswith(line_start(1))
    assert run_tag("invoice-3") in line
    assert kind_tag("step_end", 2) in line and kind_tag("step_end") in line
    assert list(decode_event(line) or {}) == [*HEADER, "step"]


def test_fields_cannot_overwrite_the_header() -> None:
    """A field named like a header key is refused instead of silently moving the header."""
    header = EventHeader(seq=1, ts=1.0, run_id="a-1", attempt=1, kind="k")
    with pytest.raises(ValueError, match="attempt"):
        encode_event(header, {"attempt": 5})


def test_scan_selects_what_the_writer_wrote(tmp_path: Path) -> None:
    """Events written by ``EventWriter`` are found by kind and attempt without parsing all."""
    path = tmp_path / "dbos_events.jsonl"
    for attempt in (1, 2):
        writer = EventWriter(path, run_id="invoice-3", attempt=attempt)
        writer.emit("step_end", step="load")
        writer.emit("step_error", step="load", error_type="OSError", error="disk full")
        writer.close()
    scan = LedgerScan(path, "invoice-3")
    assert scan.count == 4
    assert [e["seq"] for e in scan.select("step_end")] == [1, 3]
    assert [e["seq"] for e in scan.select("step_error", attempt=2)] == [4]


def test_torn_line_is_not_an_event() -> None:
    """A line cut short by a killed writer decodes to nothing."""
    assert decode_event(b'{"seq":3,"ts":1.0,"run_id":"a-1"') is None
    assert decode_event(b"[1, 2]") is None


def test_a_line_without_the_header_is_not_an_event() -> None:
    """A JSON object missing a header key (a line written by hand) decodes to nothing."""
    assert decode_event(b'{"seq":1,"ts":1.0,"run_id":"a-1","kind":"log"}') is None
    assert decode_event(b'{"seq":1,"ts":1.0,"run_id":"a-1","attempt":1,"kind":"log"}') is not None
