"""The run's event ledger, ``dbos_events.jsonl``: the kit's own events and DBOS log records.

Design note: DBOS keeps only each step's final output and no "reused" flag, so the runner
records what happened itself. Each event is one JSON line written with a single ``write`` on
an ``O_APPEND`` descriptor: a process killed mid-run loses at most the line it was writing
(readers skip a torn last line), and lines reach the OS page cache at once, so they survive
``os._exit`` and SIGKILL. Sequence numbers increase across attempts. Writers in different
processes (the child, its supervisor, a refused ``recover`` next door) serialise on a ``flock``
of the ledger itself and number from what is on disk, so no writer needs the run lock. The
child writes two lines for every step, and taking and checking the lock for each was most of
what a line cost (three of its four system calls), so the child's writer *holds* the ledger:
it keeps the lock from one line to the next, and a keeper thread lets go of it every
``HOLD_TICK_S`` (the next line takes it again and counts what others appended meanwhile), so
another writer, blocked in ``flock``, waits a tick at most, as a rule (the kernel wakes it as
the lock is let go; the child's next line could take it first, and the writer waits one tick
more). A process forked from a holding child writes through a descriptor of its own.

The line format is part of the vocabulary: every event starts with the header ``HEADER``, in
that order, compact (``{"seq":1,"ts":…,"run_id":"invoice-3","attempt":1,"kind":"step_end",…``).
``encode_event`` is the one encoder (``EventWriter`` writes the same bytes: the fields by the
same ``_encode``, ``encode_members``, the header's numbers as ``_encode`` writes numbers, so
the path of every step encodes the fields its two lines share once, with ``encode_step_info``,
which writes what ``encode_members`` would) and ``decode_event`` the one decoder; a reader
that finds lines by their bytes (history's ``LedgerScan``) asks ``line_start``, ``run_tag`` and
``kind_tag`` for the bytes to look for, so the encoder and the search change together. The
kinds and their fields are ``record.events``; ``EventWriter.emit`` refuses a field its kind
does not have.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import json.encoder
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final, Unpack, cast

from relay_notebook.record.ledger_events import (
    FIELDS,
    Event,
    EventFields,
    EventHeader,
    EventKind,
    StepInfo,
    unknown_fields,
)

__all__ = [
    "HEADER",
    "HOLD_TICK_S",
    "Event",
    "EventHeader",
    "EventWriter",
    "as_event",
    "check_events",
    "decode_event",
    "encode_event",
    "encode_members",
    "encode_step_info",
    "encode_text",
    "kind_tag",
    "line_start",
    "now_ms",
    "read_events",
    "run_tag",
]


#: the header's keys in the order every line starts with them
HEADER: Final = tuple(EventHeader.__annotations__)
_HEADER_KEYS: Final = frozenset(HEADER)


#: a text as ``_encode`` writes it in a line (``ensure_ascii``), for members added to
#: ``encode_members``'s
encode_text: Final[Callable[[str], str]] = json.encoder.encode_basestring_ascii


def _encoder() -> Callable[[Mapping[str, object]], str]:
    """``json.dumps(event, default=repr, separators=(",", ":"))``: the C encoder ``json`` itself
    makes for it, called without ``json``'s Python layers (two lines are written per step)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without ``_json``
        return json.JSONEncoder(default=repr, separators=(",", ":")).encode

    def encode(event: Mapping[str, object]) -> str:
        # fresh markers each time, as ``json`` makes them: a cycle is refused, not recursed
        return "".join(make({}, repr, encode_text, None, ":", ",", False, False, True)(event, 0))

    return encode


_encode: Final = _encoder()


def encode_event(header: EventHeader, fields: Mapping[str, object]) -> str:
    """One ledger line (without its newline): the header in ``HEADER`` order, then ``fields``."""
    if not _HEADER_KEYS.isdisjoint(fields):
        clash = _HEADER_KEYS.intersection(fields)
        raise ValueError(f"event fields {sorted(clash)} would overwrite the header")
    event = {key: header[key] for key in HEADER}  # type: ignore[literal-required]
    event.update(fields)
    return _encode(event)


def encode_members(fields: Mapping[str, object]) -> str:
    """``fields`` encoded as ``_encode`` encodes them inside an event's line: its members
    without the braces (``""`` for none), as ``EventWriter.emit_members`` takes them."""
    return _encode(fields)[1:-1]


def encode_step_info(info: StepInfo) -> str:
    """``encode_members(info)`` for the fields every line of a step's run shares, written
    directly: the path of every step encodes them, and ``json``'s encoder, made for each
    event, cost more than the rest of the line. ``info``'s keys in ``StepInfo``'s order, as
    ``StepInfo(...)`` makes them; a value of a type other than the declared ones (a name
    that is not a text, a ``bool`` for a number) is encoded by ``encode_members``."""
    step, occurrence, site = info["step"], info["occurrence"], info["site"]
    step_id, workflow_id = info["step_id"], info["workflow_id"]
    attempt, max_attempts = info["step_attempt"], info["max_attempts"]
    if not (
        type(step) is str
        and (occurrence is None or type(occurrence) is int)
        and (step_id is None or type(step_id) is int)
        and (workflow_id is None or type(workflow_id) is str)
        and type(attempt) is int
        and (max_attempts is None or type(max_attempts) is int)
        and (site is None or (type(site) is list and all(type(n) is int for n in site)))
    ):
        return encode_members(info)
    return (
        f'"step":{encode_text(step)},'
        f'"occurrence":{"null" if occurrence is None else occurrence},'
        f'"site":{"null" if site is None else "[" + ",".join(map(int.__repr__, site)) + "]"},'
        f'"step_id":{"null" if step_id is None else step_id},'
        f'"workflow_id":{"null" if workflow_id is None else encode_text(workflow_id)},'
        f'"step_attempt":{attempt},'
        f'"max_attempts":{"null" if max_attempts is None else max_attempts}'
    )


def as_event(value: object) -> Event | None:
    """``value`` (decoded JSON) as an event: a dict with every header key; else ``None``."""
    if isinstance(value, dict) and value.keys() >= _HEADER_KEYS:
        return cast(Event, value)
    return None


def decode_event(line: bytes | str) -> Event | None:
    """The event on one ledger line, or ``None`` for a line that is torn or not an event."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return as_event(value)


def line_start(seq: int) -> bytes:
    """How the line of event ``seq`` begins."""
    return b"{" + json.dumps(HEADER[0]).encode() + b":" + str(int(seq)).encode() + b","


def run_tag(run_id: str) -> bytes:
    """The bytes naming ``run_id`` in every line of its ledger."""
    return json.dumps("run_id").encode() + b":" + json.dumps(run_id).encode() + b","


def kind_tag(kind: str, attempt: int | None = None) -> bytes:
    """The bytes on every line of ``kind`` (of ``attempt``, if given: the two are adjacent)."""
    tag = json.dumps("kind").encode() + b":" + json.dumps(kind).encode()
    if attempt is None:
        return tag
    return json.dumps("attempt").encode() + b":" + str(int(attempt)).encode() + b"," + tag


def now_ms() -> float:
    """Wall-clock milliseconds since the epoch, to 0.1 ms (DBOS stores whole ms)."""
    return round(time.time() * 10_000) / 10  # ``round(…, 1)`` formats decimals: slower


def read_events(path: Path) -> list[Event]:
    """Every complete event in ``path`` (missing file → none; a torn last line is skipped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.splitlines()
    try:  # every line whole: one decode of them all (a torn or foreign line: line by line)
        values = json.loads(b"[" + b",".join(lines) + b"]") if lines else []
    except ValueError:
        values = None
    if values is not None and len(values) == len(lines):
        events = [e for value in values if (e := as_event(value)) is not None]
        if len(events) == len(values):
            return events
    return [e for line in lines if (e := decode_event(line)) is not None]


def check_events(events: list[Event], run_id: str, where: Path) -> list[Event]:
    """``events`` if they belong to ``run_id`` with sequence numbers 1, 2, 3...; else raise.

    A ledger with a gap or another run's events cannot be trusted to say what happened.
    """
    from relay_notebook.errors import LedgerCorruptError

    for expected, event in enumerate(events, start=1):
        if event.get("run_id") != run_id:
            raise LedgerCorruptError(
                f"The ledger {where} holds an event of run {event.get('run_id')!r} (seq "
                f"{event.get('seq')}), not of run {run_id}; it was copied or edited by hand."
            )
        if event.get("seq") != expected:
            raise LedgerCorruptError(
                f"The ledger {where} skips from event {expected - 1} to {event.get('seq')}; "
                f"events are missing, so the run's history cannot be trusted."
            )
    return events


#: bytes read from a ledger's end for its last event (a line is far shorter: previews are cut)
_TAIL_BYTES: Final = 256 * 1024


def _last_seq(path: Path, size: int) -> int:
    """The sequence number of the last whole event in the ledger's first ``size`` bytes: the
    number of its events, as they are numbered 1, 2, 3... (``check_events``), read from its
    end instead of decoding all of it; a ledger whose end holds no event is counted whole."""
    start = max(0, size - _TAIL_BYTES)
    with open(path, "rb") as fh:
        fh.seek(start)
        lines = fh.read(size - start).split(b"\n")
    if start:
        del lines[0]  # begun before the tail
    for line in reversed(lines):
        event = decode_event(line)
        if event is not None and type(event["seq"]) is int:
            return event["seq"]
    return len(read_events(path)) if start else 0


#: how long a holding writer keeps the ledger's lock at most before letting other writers in
HOLD_TICK_S: Final = 0.05

#: the holding writers of this process (a fork gives each a descriptor of its own)
_holders: weakref.WeakSet[EventWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_holders):
        writer._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


class EventWriter:
    """Appends tagged events to the ledger and, optionally, mirrors them to a live pipe.

    Any number of writers, in any processes, may hold the ledger open: each append takes an
    exclusive ``flock`` on the ledger and, if another writer appended since, numbers on from
    the ledger as it is now, so sequence numbers never collide. A writer made with ``hold``
    (the child's) keeps the lock between its lines and lets go of it every ``HOLD_TICK_S``.
    """

    def __init__(
        self,
        path: Path,
        *,
        run_id: str,
        attempt: int,
        pipe_fd: int | None = None,
        hold: bool = False,
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.attempt = attempt
        self._thread_lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pipe_fd = pipe_fd
        #: applied to every line before it is written (the child scrubs vault values)
        self.scrub: Callable[[str], str] | None = None
        self._seq = 0
        self._size = -1  # the ledger's size after this writer's last append
        #: every line's header after its time, up to its kind's name
        self._tags = f',"run_id":{json.dumps(run_id)},"attempt":{int(attempt)!r},"kind":"'
        #: whether this writer has the ledger's lock now, and keeps it after a line
        self._holding = False
        self._keep = hold
        self._closed = threading.Event()
        with self._locked():
            self._catch_up()
        if hold:
            _holders.add(self)
            threading.Thread(target=self._keeper, name="relay-ledger", daemon=True).start()

    def _keeper(self) -> None:
        """A holding writer's thread: lets go of the ledger's lock every tick."""
        while not self._closed.wait(HOLD_TICK_S):
            with self._thread_lock:
                self._let_go()

    def _let_go(self) -> None:
        """Under the thread lock: the ledger's lock given back, if this writer has it."""
        if self._holding:
            self._holding = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _forked(self) -> None:
        """In a process forked from this one: the same ledger through a descriptor of its own,
        so that its lock is this process's (the descriptor it inherited shares the lock of its
        parent, which may hold it); lines one by one, as a writer that does not hold."""
        if self._fd < 0:
            return  # closed (``close`` forgets it; a fork in between finds it so)
        # another thread may have had these at the fork; no keeper here (threads do not survive)
        self._thread_lock, self._closed = threading.Lock(), threading.Event()
        self._closed.set()
        self._holding = self._keep = False
        self._size = -1
        inherited = self._fd
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError:
            self._fd = -1  # its lines fail loudly (EBADF), never under the parent's lock
        os.close(inherited)  # the parent's lock stays the parent's

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # flock excludes other processes; threads of this one (a child's log records from DBOS
        # threads, its wait watch) share the descriptor, so they take the writer's own lock too
        # (``emit`` does the same in straight calls: it is on the path of every step)
        with self._thread_lock:
            if not self._holding:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                self._holding = False
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _catch_up(self) -> None:
        """Under the lock: if the ledger grew behind this writer's back, count it again."""
        size = os.lseek(self._fd, 0, os.SEEK_END)  # the size, without a whole ``fstat``
        if size != self._size:
            self._count_again(size)

    def _count_again(self, size: int) -> None:
        """Under the lock: number on from the ledger as it is now (``size`` bytes)."""
        self._seq = _last_seq(self.path, size)
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    os.write(self._fd, b"\n")  # end a line torn by a killed writer
                    size += 1
        self._size = size

    def emit(self, kind: EventKind, **fields: Unpack[EventFields]) -> Event:
        """Write one event now; returns it as written.

        ``ValueError`` if ``kind`` is not in the vocabulary or a field is not one of its own.
        """
        allowed = FIELDS.get(kind)
        if allowed is None or not allowed.issuperset(fields):  # the vocabulary: no header key
            raise ValueError(unknown_fields(kind, fields))
        members = encode_members(fields)
        seq, ts = self._append(kind, members)
        # the header in ``HEADER`` order, as ``encode_event`` writes it
        event = {"seq": seq, "ts": ts, "run_id": self.run_id, "attempt": self.attempt}
        event["kind"] = kind
        event.update(fields)
        return cast(Event, event)

    def emit_members(self, kind: EventKind, members: str) -> None:
        """Write one event whose fields are already encoded: ``members`` is
        ``encode_members(fields)`` (plus members added after a comma, encoded alike) of fields
        ``emit`` would take for ``kind``. The path of every step encodes the fields its
        ``step_start`` and ``step_end`` share once, and writes the same line ``emit`` would."""
        self._append(kind, members)

    def _append(self, kind: str, members: str) -> tuple[int, float]:
        """Append the line of event ``kind`` with ``members`` under the ledger's ``flock``;
        its sequence number and time."""
        rest = f'{self._tags}{kind}"{"," if members else ""}{members}}}'
        if self.scrub is not None:  # the header's numbers carry nothing of the relay's
            rest = self.scrub(rest)
        # ``_locked`` and ``_catch_up`` in straight calls: this is on the path of every step
        with self._thread_lock:
            fd, locked, held = self._fd, self._holding, False
            try:
                if not locked:  # else: held since this writer's last line, which it counted
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    locked = True
                    size = os.lseek(fd, 0, os.SEEK_END)
                    if size != self._size:
                        self._count_again(size)
                self._seq = seq = self._seq + 1
                ts = now_ms()
                # as ``_encode`` writes the header: ``int.__repr__``, ``float.__repr__``
                line = f'{{"seq":{seq},"ts":{ts!r}{rest}\n'.encode()
                written = os.write(fd, line)
                if written == len(line):
                    self._size += written
                    held = self._keep
                else:
                    self._size = -1  # torn: counted again under the lock taken again
            finally:
                self._holding = held
                if locked and not held:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        if self._pipe_fd is not None:
            try:
                os.write(self._pipe_fd, line)
            except OSError:
                self._pipe_fd = None  # the supervisor went away; the file still has it
        return seq, ts

    def sync(self) -> None:
        """Make every event so far durable on disk."""
        os.fsync(self._fd)

    def close(self) -> None:
        self._closed.set()
        _holders.discard(self)
        with self._thread_lock:
            self._holding = self._keep = False
            fd, self._fd = self._fd, -1
            if fd >= 0:  # once: the number may be another file's after
                os.close(fd)  # and with it the lock, if held
