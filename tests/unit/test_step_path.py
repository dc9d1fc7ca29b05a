"""The fast paths on every step's way: origin tracking switched per awaitable, call sites from
the relay's frames, the secret search skipping bare numbers, the ledger's prebuilt encoder."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentworks._sites import MAX_DEPTH, call_site, track_origins, tracked, untracked
from agentworks.redact import Redactor
from relay_notebook.record.ledger import (
    HEADER,
    EventHeader,
    EventWriter,
    encode_event,
    read_events,
)
from relay_notebook.record.ledger_events import FIELDS
from relay_notebook.runner.instrument import PREVIEW_CHARS, _preview

SECRET = "tok-5ecret-Value-77"
REDACTOR = Redactor({"API_KEY": SECRET})
RELAY = "/relays/demo/relay.py"
HEADER_KEYS = frozenset(HEADER)


@pytest.fixture
def origins() -> Iterator[None]:
    """Coroutine origins tracked as the child tracks them, and off again afterwards."""
    before = sys.get_coroutine_origin_tracking_depth()
    track_origins()
    yield
    track_origins(before)


async def _depth_now() -> int:
    await asyncio.sleep(0)  # suspended once: the depth is read after a resumption
    return sys.get_coroutine_origin_tracking_depth()


def test_untracked_runs_without_origins_and_gives_other_tasks_theirs(origins: None) -> None:
    """Inside ``untracked`` coroutines get no origin, inside a ``tracked`` in it they do again,
    and a task run while the untracked one is suspended keeps the caller's tracking."""

    async def main() -> tuple[int, int, int, int]:
        other = asyncio.ensure_future(_depth_now())
        inside = await untracked(_depth_now)
        nested = await untracked(lambda: tracked(_depth_now))
        return inside, nested, await other, sys.get_coroutine_origin_tracking_depth()

    assert asyncio.run(main()) == (0, MAX_DEPTH, MAX_DEPTH, MAX_DEPTH)


def test_untracked_passes_results_errors_and_cancellation_through(origins: None) -> None:
    """What the awaitable returns or raises reaches the caller unchanged, and a cancellation
    reaches the awaitable, whose cleanup runs with the tracking restored afterwards."""
    cleaned: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    async def blocks() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append("blocks")

    async def main() -> tuple[int, str, bool]:
        value = await untracked(lambda: asyncio.sleep(0, result=7))
        with pytest.raises(KeyError, match="boom") as raised:
            await untracked(fails)
        task = asyncio.ensure_future(untracked(blocks))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return value, raised.traceback[-1].name, task.cancelled()

    assert asyncio.run(main()) == (7, "fails", True)
    assert cleaned == ["blocks"]
    assert sys.get_coroutine_origin_tracking_depth() == MAX_DEPTH


def test_a_gathered_call_made_in_relay_code_keeps_its_site(origins: None) -> None:
    """A call run as a task finds its site in its coroutine's origin, though the machinery
    around it ran untracked."""
    code = compile(
        "async def run(step):\n"  # line 1
        "    return await gather(\n"  # line 2
        "        step(1),\n"  # line 3
        "        step(2),\n"  # line 4
        "    )\n",
        RELAY,
        "exec",
    )
    relay: dict[str, Any] = {"gather": asyncio.gather}
    exec(code, relay)

    async def step(n: int) -> list[int] | None:
        site = call_site(RELAY, skip=0)
        return await untracked(lambda: asyncio.sleep(0, result=site))

    assert asyncio.run(relay["run"](step)) == [[3], [4]]


def test_call_site_names_helper_calls_outermost_first() -> None:
    """Only the relay's frames count; a comprehension's line stands for its function's."""
    code = compile(
        "def run(step):\n"  # line 1
        "    return helper(step)\n"  # line 2
        "def helper(step):\n"  # line 3
        "    return [step() for _ in range(1)]\n",  # line 4
        RELAY,
        "exec",
    )
    relay: dict[str, Any] = {}
    exec(code, relay)
    assert relay["run"](lambda: call_site(RELAY)) == [[2, 4]]
    assert call_site(RELAY) is None  # no frame of the relay's here, and no task


@pytest.mark.parametrize("value", [None, True, 7, 2.5, 1j])
def test_a_bare_number_carries_no_secret(value: object) -> None:
    """None, booleans and numbers are not searched: they hold no text."""
    assert REDACTOR.find(value) is None


@pytest.mark.parametrize(
    "value",
    [
        [1, 2, SECRET],
        ((3,), {"n": 4, "key": SECRET}),
        {"nested": [None, True, f"Bearer {SECRET}"]},
    ],
)
def test_a_secret_among_numbers_is_still_found(value: object) -> None:
    """A container of numbers is searched: a secret string inside it is found."""
    assert REDACTOR.find(value) == "API_KEY"


@pytest.mark.parametrize(
    ("args", "kwargs", "shown"),
    [((7,), {}, "7"), ((True,), {}, "true"), (("a", None), {"k": 1.5}, '["a", null, {"k": 1.5}]')],
)
def test_an_argument_preview_is_their_json(
    args: tuple[Any, ...], kwargs: dict[str, Any], shown: str
) -> None:
    """A step's arguments are previewed as JSON (a lone int on its fast path too)."""
    assert _preview(args, kwargs) == shown


def test_a_long_argument_preview_is_cut() -> None:
    """A preview longer than ``PREVIEW_CHARS`` is cut with an ellipsis, a lone int too."""
    for value in (10**299, "x" * 1000):
        text = _preview((value,), {})
        assert len(text) == PREVIEW_CHARS and text.endswith("…")


def test_encoded_line_is_the_json_of_header_then_fields() -> None:
    """The prebuilt encoder writes what ``json.dumps`` did: compact, ``repr`` for the rest."""
    header = EventHeader(seq=4, ts=1764720000000.1, run_id="loop-1", attempt=2, kind="step_end")
    fields = {"step": "tick", "site": [27], "max_attempts": None, "duration_ms": 0.5, "x": Path()}
    expected = json.dumps({**header, **fields}, default=repr, separators=(",", ":"))
    assert encode_event(header, fields) == expected


def test_a_cycle_in_an_event_is_refused() -> None:
    """A field that contains itself is refused as ``json`` refuses it, not recursed into."""
    header = EventHeader(seq=1, ts=1.0, run_id="a-1", attempt=1, kind="log")
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        encode_event(header, {"message": loop})


def test_a_written_line_is_the_one_encoders(tmp_path: Path) -> None:
    """``emit`` writes the header in ``HEADER`` order, then the fields, as ``encode_event``."""
    path = tmp_path / "dbos_events.jsonl"
    writer = EventWriter(path, run_id="loop-1", attempt=2)
    event = writer.emit("step_end", step="tick", site=[27], max_attempts=None, duration_ms=0.5)
    writer.close()
    (line,) = path.read_text(encoding="utf-8").splitlines()
    header = EventHeader(seq=1, ts=event["ts"], run_id="loop-1", attempt=2, kind="step_end")
    fields = {"step": "tick", "site": [27], "max_attempts": None, "duration_ms": 0.5}
    assert line == encode_event(header, fields)
    assert list(json.loads(line)) == [*HEADER, *fields]


def test_no_kind_has_a_field_named_like_the_header() -> None:
    """``emit`` relies on the vocabulary to keep fields from overwriting the header."""
    assert all(HEADER_KEYS.isdisjoint(fields) for fields in FIELDS.values())


def test_writers_open_at_once_number_on_from_each_other(tmp_path: Path) -> None:
    """Two writers holding the ledger open in turn append without reusing a number."""
    path = tmp_path / "dbos_events.jsonl"
    child = EventWriter(path, run_id="r-1", attempt=1)
    supervisor = EventWriter(path, run_id="r-1", attempt=1)
    child.emit("step_start", step="a")
    supervisor.emit("log", level="INFO", logger="x", message="m")
    child.emit("step_end", step="a")
    child.emit("step_start", step="b")
    supervisor.emit("attempt_end", status="succeeded")
    child.close()
    supervisor.close()
    assert [(e["seq"], e["kind"]) for e in read_events(path)] == [
        (1, "step_start"),
        (2, "log"),
        (3, "step_end"),
        (4, "step_start"),
        (5, "attempt_end"),
    ]
