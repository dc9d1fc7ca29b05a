"""Reading a run's ledger (``dbos_events.jsonl``) selectively: only the events a record needs.

Design note: a run of 10,000 steps has over 20,000 events, and parsing all of them costs
more than reading its steps from SQLite. A run's detail needs few of them: retries, receipts,
and the step events of attempts that did not succeed (a succeeded attempt's step bodies are
exactly the checkpoints it wrote). Every line starts with the header of the ledger's vocabulary
(``record.ledger``: ``{"seq":…,"ts":…,"run_id":…,"attempt":N,"kind":"K",``), so the lines of
one kind, or of one kind in one attempt, are found by searching the bytes the vocabulary names
(``line_start``, ``run_tag``, ``kind_tag``), and only those are parsed (once per kind). The
integrity check is cheap too: as many lines as the last sequence number, the first numbered 1,
every one naming the run. Anything unexpected (a line torn by a killed writer, a gap, another
run's events) falls back to parsing every line, which keeps readable lines and raises
``LedgerCorruptError`` for a gap or a foreign event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from relay_notebook.record.ledger import (
    Event,
    check_events,
    decode_event,
    kind_tag,
    line_start,
    read_events,
    run_tag,
)

__all__ = ["LedgerScan"]


class LedgerScan:
    """The complete lines of one run's ledger as it is now (a line being written is left out)."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        self._data = data[: data.rfind(b"\n") + 1]  # "" if no line is complete yet
        self._all: list[Event] | None = None
        self._kinds: dict[tuple[str, int | None], list[Event]] = {}
        if not self._trusted():
            # parse everything: keeps the readable lines, raises for gaps and foreign events
            self._all = check_events(read_events(path), run_id, path)

    def _trusted(self) -> bool:
        data = self._data
        lines = data.count(b"\n")
        if lines == 0:
            return True
        if not data.startswith(line_start(1)):
            return False
        if data.count(run_tag(self.run_id)) != lines:
            return False
        event = decode_event(data[data.rfind(b"\n", 0, len(data) - 1) + 1 :])
        return event is not None and event.get("seq") == lines

    @property
    def count(self) -> int:
        """How many events the ledger holds."""
        return len(self._all) if self._all is not None else self._data.count(b"\n")

    def events(self) -> list[Event]:
        """Every event, in order (parsed once)."""
        if self._all is None:
            body = self._data.rstrip(b"\n").replace(b"\n", b",")
            try:
                parsed = json.loads(b"[" + body + b"]") if body else []
            except ValueError:
                parsed = read_events(self.path)
            # as_event's test, inline (a call per event costs here); check_events checks the
            # two header keys left out, run_id and seq, and refuses a ledger without them
            events = [
                v
                for v in parsed
                if type(v) is dict and "kind" in v and "attempt" in v and "ts" in v
            ]
            self._all = check_events(cast(list[Event], events), self.run_id, self.path)
        return self._all

    def select(self, kind: str, attempt: int | None = None) -> list[Event]:
        """The events of ``kind`` (in ``attempt`` if given), in order."""
        if self._all is not None:
            return [
                e
                for e in self._all
                if e.get("kind") == kind and (attempt is None or e.get("attempt") == attempt)
            ]
        key = (kind, attempt)
        if key not in self._kinds:
            needle = kind_tag(kind, attempt)
            self._kinds[key] = [e for e in self._parse_matching(needle) if e["kind"] == kind]
        return self._kinds[key]

    def _parse_matching(self, needle: bytes) -> list[Event]:
        """The events on the lines where ``needle`` occurs (one pass over the bytes)."""
        data, found, at = self._data, [], 0
        while (at := data.find(needle, at)) >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = at = data.find(b"\n", at)
            if end < 0:
                break
            event = decode_event(data[start:end])
            if event is not None and isinstance(event.get("kind"), str):
                found.append(event)
        return found
