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


def test_the_writer_writes_each_line_as_the_one_encoder_does(tmp_path: Path) -> None:
    """``EventWriter.emit`` makes its lines without ``encode_event`` (on the path of every step)
    yet byte for byte as it: fields of every JSON type, none at all, text outside ASCII, a
    quote in the run's name; and it returns the event it wrote."""
    path = tmp_path / "dbos_events.jsonl"
    writer = EventWriter(path, run_id='q"uote-1', attempt=3)
    emitted = [
        writer.emit("attempt_start"),
        writer.emit(
            "step_start",
            step="fetch",
            occurrence=2,
            site=[12, 30],
            step_id=5,
            workflow_id='q"uote-1',
            step_attempt=1,
            max_attempts=None,
            input_preview='{"city": "Zürich", "n": 1.5}',
        ),
        writer.emit("step_end", step="fetch", occurrence=2, duration_ms=0.25),
        writer.emit("attempt_end", status="succeeded", executed=[1, 2], reused=[], returncode=0),
    ]
    writer.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(emitted)
    for line, event in zip(lines, emitted, strict=True):
        header = EventHeader(**{key: event[key] for key in HEADER})  # type: ignore[literal-required, typeddict-item]
        fields = {key: value for key, value in event.items() if key not in HEADER}
        assert line == encode_event(header, fields).encode()
        assert decode_event(line) == event
    assert [e["seq"] for e in emitted] == [1, 2, 3, 4]
    assert [e["kind"] for e in emitted] == [
        "attempt_start",
        "step_start",
        "step_end",
        "attempt_end",
    ]
