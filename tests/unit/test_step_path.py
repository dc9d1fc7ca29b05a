"""The fast paths on every step's way: call sites read where a call is made (``Sited``), from
the relay's frames, the secret search skipping bare numbers, the ledger's prebuilt encoder."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentworks import _sites
from agentworks._sites import Sited, call_site, made_at
from agentworks.redact import Redactor
from relay_notebook.record.ledger import (
    HEADER,
    EventHeader,
    EventWriter,
    encode_event,
    encode_members,
    encode_step_info,
    read_events,
)
from relay_notebook.record.ledger_events import FIELDS, StepInfo
from relay_notebook.runner.instrument import PREVIEW_CHARS, _preview, step_runner_binder

SECRET = "tok-5ecret-Value-77"
REDACTOR = Redactor({"API_KEY": SECRET})
RELAY = "/relays/demo/relay.py"
HEADER_KEYS = frozenset(HEADER)


def _sited_step() -> Sited:
    """A step's stand-in as the child makes one: its coroutine returns the site it was given."""

    async def tick(n: int, *, scale: int = 1) -> int:
        """Doubles ``n``."""
        return 2 * n * scale

    async def start(site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        await asyncio.sleep(0)  # run after the frames that made it are gone, when gathered
        return site, await tick(*args, **kwargs)

    return Sited(tick, start, RELAY)


GATHER = compile(
    "async def run(step):\n"  # line 1
    "    return await gather(\n"  # line 2
    "        step(1),\n"  # line 3
    "        step(2),\n"  # line 4
    "    )\n"
    "async def direct(step):\n"  # line 6
    "    return await step(3)\n",  # line 7
    RELAY,
    "exec",
)


def _relay() -> dict[str, Any]:
    relay: dict[str, Any] = {"gather": asyncio.gather}
    exec(GATHER, relay)
    return relay


def test_a_gathered_call_keeps_the_site_it_was_made_at_without_origin_tracking() -> None:
    """Calls run as tasks by ``asyncio.gather`` have no frame of the relay's when they run:
    each still gets the line that made it, and no coroutine origin is tracked for that."""
    relay, step = _relay(), _sited_step()
    assert sys.get_coroutine_origin_tracking_depth() == 0
    assert asyncio.run(relay["run"](step)) == [([3], 2), ([4], 4)]
    assert asyncio.run(relay["direct"](step)) == ([7], 6)
    assert asyncio.run(step(5)) == (None, 10)  # made outside the relay: no site


def test_a_sited_function_looks_to_inspect_like_the_async_function_it_stands_for() -> None:
    """Frameworks decide how to call a function by inspecting it (Pydantic AI runs a tool in
    a thread unless ``inspect.iscoroutinefunction``): a step's stand-in must pass as async,
    with its name, signature and documentation; as a class attribute it binds as a method."""
    step = _sited_step()
    assert inspect.iscoroutinefunction(step) and asyncio.iscoroutinefunction(step)
    assert (step.__name__, step.__doc__) == ("tick", "Doubles ``n``.")
    assert str(inspect.signature(step)) == "(n: 'int', *, scale: 'int' = 1) -> 'int'"

    class Holder:
        async def method(self, n: int) -> tuple[Holder, int]:
            return self, n

    async def start(site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return await Holder.__dict__["plain"](*args, **kwargs)

    Holder.plain = Holder.method  # type: ignore[attr-defined]
    Holder.sited = Sited(Holder.method, start, RELAY)  # type: ignore[attr-defined]
    holder = Holder()
    assert inspect.iscoroutinefunction(holder.sited)  # type: ignore[attr-defined]
    assert asyncio.run(holder.sited(4)) == (holder, 4)  # type: ignore[attr-defined]


def test_pydantic_ai_calls_a_sited_step_as_a_tool_and_awaits_it() -> None:
    """A step given to a Pydantic AI agent as a tool is awaited, not run in a thread (where its
    coroutine would be the tool's result)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    async def lookup(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    async def start(site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return await lookup(*args, **kwargs)

    result = Agent(TestModel(), tools=[Sited(lookup, start, RELAY)]).run_sync("weather?")
    assert result.output == '{"lookup":"sunny in a"}'


def test_a_sited_call_passes_results_errors_and_cancellation_through() -> None:
    """What the coroutine returns or raises reaches the caller unchanged, and a cancellation
    reaches it, whose cleanup runs."""
    cleaned: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    async def blocks() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.append("blocks")

    def sited(func: Any) -> Sited:
        return Sited(func, lambda site, args, kwargs: func(*args, **kwargs), RELAY)

    async def main() -> tuple[int, str, bool]:
        value = await sited(asyncio.sleep)(0, result=7)
        with pytest.raises(KeyError, match="boom") as raised:
            await sited(fails)()
        task = asyncio.ensure_future(sited(blocks)())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return value, raised.traceback[-1].name, task.cancelled()

    assert asyncio.run(main()) == (7, "fails", True)
    assert cleaned == ["blocks"]


def test_a_call_made_inside_a_gathered_platform_call_takes_its_site() -> None:
    """A platform call that makes another (``ctx.call_agent`` makes ``agent``) runs it where
    no frame of the relay's is left when gathered: the inner call takes the outer's site."""

    async def inner() -> list[int] | None:
        await asyncio.sleep(0)
        return call_site(RELAY)

    async def outer(n: int = 0) -> list[int] | None:
        return await made_at(inner, lambda: RELAY)()

    relay = _relay()
    assert asyncio.run(relay["run"](made_at(outer, lambda: RELAY))) == [[3], [4]]
    assert asyncio.run(made_at(outer, lambda: None)()) is None  # not in a run: no site


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
    assert call_site(RELAY) is None  # no frame of the relay's here, in no sited call


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


def test_a_line_of_encoded_members_is_the_line_emit_writes(tmp_path: Path) -> None:
    """The path of every step encodes the fields its ``step_start`` and ``step_end`` share once
    (``encode_members``) and writes each with ``emit_members``: byte for byte what ``emit``
    writes for the same fields (and ``encode_event``), numbered on with it, scrubbed as it is;
    no fields at all make a line of the header alone."""
    info = {
        "step": "fetch",
        "occurrence": 2,
        "site": [12, 30],
        "step_id": 5,
        "workflow_id": 'q"uote-1',
        "step_attempt": 1,
        "max_attempts": None,
    }
    preview = json.dumps({"city": "Zürich", "key": SECRET}, ensure_ascii=False)
    fast = EventWriter(tmp_path / "fast.jsonl", run_id='q"uote-1', attempt=3)
    slow = EventWriter(tmp_path / "slow.jsonl", run_id='q"uote-1', attempt=3)
    for writer in (fast, slow):
        writer.scrub = REDACTOR.scrub
    members = encode_members(info)
    fast.emit_members("attempt_start", "")
    fast.emit_members("step_start", members + ',"input_preview":' + json.dumps(preview))
    fast.emit_members("step_end", members + ',"duration_ms":0.25')
    slow.emit("attempt_start")
    slow.emit("step_start", **info, input_preview=preview)  # type: ignore[arg-type]
    slow.emit("step_end", **info, duration_ms=0.25)  # type: ignore[arg-type]
    for writer in (fast, slow):
        writer.close()
    got = (tmp_path / "fast.jsonl").read_bytes().splitlines()
    want = (tmp_path / "slow.jsonl").read_bytes().splitlines()
    for line, other in zip(got, want, strict=True):
        event, expected = json.loads(line), json.loads(other)
        assert {**event, "ts": 0} == {**expected, "ts": 0}
        header = EventHeader(**{key: event[key] for key in HEADER})  # type: ignore[typeddict-item]
        fields = {key: value for key, value in event.items() if key not in HEADER}
        assert line == encode_event(header, fields).encode()
    assert [json.loads(line)["seq"] for line in got] == [1, 2, 3]
    assert json.loads(got[0]).keys() == set(HEADER)
    assert SECRET.encode() not in b"".join(got) and b"[vault:API_KEY]" in got[1]


def test_the_site_walk_ends_at_the_event_loop_running_the_call() -> None:
    """A step's coroutine runs on an event loop; the frames beyond the loop's callback started
    the loop (the child's own), so the walk for a call's site stops there instead of reading
    them all: a relay function that started a loop does not count for calls made inside it."""
    code = compile(
        "def outer(make):\n"  # line 1
        "    return make()\n",  # line 2: runs a loop, or makes the call itself
        RELAY,
        "exec",
    )
    relay: dict[str, Any] = {}
    exec(code, relay)

    async def inner() -> list[int] | None:
        return call_site(RELAY)

    assert relay["outer"](lambda: call_site(RELAY)) == [2]  # no loop between: found
    assert relay["outer"](lambda: asyncio.run(inner())) is None  # beyond the loop: not read


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


def test_step_runner_arguments_bind_as_dbos_binds_them_and_say_what_is_missing_as_dbos() -> None:
    """``DBOS.run_step_async``'s options and function by position or by DBOS's keyword names;
    a missing one said in DBOS's words, not the kit's."""
    bind = step_runner_binder("run_step_async")

    def shout(text: str) -> str:
        return text.upper()

    by_position = bind({"name": "s"}, shout, "hi", loud=True)
    by_keyword = bind(dbos_step_options={"name": "s"}, func=shout, loud=True)
    assert by_position == ({"name": "s"}, shout, ("hi",), {"loud": True})
    assert by_keyword == ({"name": "s"}, shout, (), {"loud": True})
    with pytest.raises(TypeError, match=r"^DBOS\.run_step_async\(\) missing 1 .*'func'$"):
        bind(dbos_step_options=None)


def test_a_site_found_again_from_the_same_frame_is_the_one_its_callers_make_now() -> None:
    """A loop asking from one frame at one instruction gets the site it got before (kept, not
    walked again); a frame at the same instruction reached from other callers (a generator
    resumed elsewhere, a helper called from another line) gets its own."""
    code = compile(
        "def run(step):\n"  # line 1
        "    sites = [step() for _ in range(2)]\n"  # line 2: one frame, one instruction
        "    sites.append(helper(step))\n"  # line 3
        "    sites.append(helper(step))\n"  # line 4
        "    g = gen(step)\n"  # line 5
        "    sites.append(first(g))\n"  # line 6
        "    sites.append(second(g))\n"  # line 7
        "    return sites\n"  # line 8
        "def helper(step):\n"  # line 9
        "    return step()\n"  # line 10
        "def gen(step):\n"  # line 11
        "    while True:\n"  # line 12
        "        yield step()\n"  # line 13
        "def first(g):\n"  # line 14
        "    return next(g)\n"  # line 15
        "def second(g):\n"  # line 16
        "    return next(g)\n",  # line 17
        RELAY,
        "exec",
    )
    relay: dict[str, Any] = {}
    exec(code, relay)

    def step() -> list[int] | None:
        return call_site(RELAY)  # the relay's frame calling ``step`` starts the walk

    sites = relay["run"](step)
    assert sites == [[2], [2], [3, 10], [4, 10], [6, 15, 13], [7, 17, 13]]
    # a site given again is a copy: changing one changes no later call's
    sites[0].append(99)
    assert relay["run"](step)[:2] == [[2], [2]]


def test_a_site_from_made_at_is_never_kept_for_the_frame() -> None:
    """With no frame of the relay's on the stack, the site is the ``made_at`` call's, which
    depends on the task, not on the frames: one frame asking at one instruction in two such
    calls gets each one's."""

    def probe() -> list[list[int] | None]:
        found = []
        for made in ([1], [2]):
            token = _sites._MADE_AT.set(made)
            try:
                found.append(call_site(RELAY, skip=0))  # this frame starts the walk
            finally:
                _sites._MADE_AT.reset(token)
        return found

    assert probe() == [[1], [2]]


_COUNT = st.one_of(st.none(), st.integers())

_STEP = StepInfo(
    step='say "hé"',
    occurrence=2,
    site=[4, 12],
    step_id=5,
    workflow_id="x-3",
    step_attempt=1,
    max_attempts=None,
)

#: a value of another type than the one declared, for each of a step's fields
_OFF_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "step": st.one_of(st.integers(), st.none()),
    "occurrence": st.one_of(st.booleans(), st.floats(allow_nan=False)),
    "site": st.lists(st.booleans(), min_size=1, max_size=3).map(lambda b: [7, *b]),
    "step_id": st.booleans(),
    "workflow_id": st.integers(),
    "step_attempt": st.one_of(st.booleans(), st.none()),
    "max_attempts": st.floats(allow_nan=False),
}


@given(
    info=st.builds(
        StepInfo,
        step=st.text(),
        occurrence=_COUNT,
        site=st.one_of(st.none(), st.lists(st.integers(), max_size=4)),
        step_id=_COUNT,
        workflow_id=st.one_of(st.none(), st.text()),
        step_attempt=st.integers(),
        max_attempts=_COUNT,
    ),
    off=st.one_of(
        st.none(),
        st.sampled_from(sorted(_OFF_TYPE)).flatmap(
            lambda key: st.tuples(st.just(key), _OFF_TYPE[key])
        ),
    ),
)
@example(info=_STEP, off=("site", [7, True]))  # not "[7,1]"
@example(info=_STEP, off=("step_attempt", False))
@example(info=_STEP, off=("step", 3))
@example(info=_STEP, off=None)
def test_a_steps_shared_fields_are_encoded_as_json_encodes_them(
    info: StepInfo, off: tuple[str, Any] | None
) -> None:
    """``encode_step_info`` writes a step's fields itself (the path of every step); the bytes
    are ``encode_members``'s for values of the declared types, and for one of another type
    (``off``: a ``bool`` where a number is declared is JSON's ``true``, not ``1``)."""
    if off is not None:
        info = cast(StepInfo, {**info, off[0]: off[1]})  # a copy: examples share theirs
    assert encode_step_info(info) == encode_members(info)
