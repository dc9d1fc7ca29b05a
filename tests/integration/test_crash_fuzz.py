"""Crash fuzzing: SIGKILL a run at random moments of its life, recover it, and check the record.

Each case kills attempt 1 at a moment drawn from its own fixed seed (sometimes the recovery
attempt too), recovers until the run ends, then compares the run with an uncrashed one: same
result, every step checkpointed, and no step body run again once its checkpoint was saved. The
relay appends one line per step body to a side-effect file, so executions are counted by what
really happened, not by what the runner says. ``RELAY_FUZZ_CASES=N`` runs N cases instead of
24 (a longer mode for benchmarks and bug hunts), and a quarter as many again with the run's
DBOS state in PostgreSQL; a failing case prints its seed and kill
moments, and ``-k seed-N`` runs it alone.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from relay_notebook.errors import RelayError
from relay_notebook.history import read_run_log
from relay_notebook.history.records import StepCall
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import read_events
from relay_notebook.runner import MAX_ATTEMPTS, RunHandle, RunOutcome, start_recovery, start_run
from relay_notebook.workspace import Draft, Workspace
from tests.polling import wait_until

pytestmark = pytest.mark.slow

# 24 seeded cases in the default suite (it must stay under 20 minutes); RELAY_FUZZ_CASES=200
# for a deeper run, and benchmarks/bench_crash_fuzz.py for hundreds of kills
CASES = int(os.environ.get("RELAY_FUZZ_CASES", "24"))
PG_CASES = max(1, CASES // 4)  # the same cases on a PostgreSQL system database
BASE_SEED = 7_310_000
WAIT_S = 60.0

# Relative: the child's working directory is the run's execution folder, where a relay may write.
SIDE_EFFECTS = "side_effects.log"
INPUT = {"ledger": SIDE_EFFECTS, "n": 3}

SOURCE = """\
import asyncio
import os
import time

from dbos import DBOS


def note(ledger, step, args):
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{step} {args} {time.time() * 1000:.1f}\\n".encode())
    finally:
        os.close(fd)


@DBOS.step()
async def fetch(ledger, n):
    await asyncio.sleep(0.02)
    note(ledger, "fetch", n)
    await asyncio.sleep(0.01)
    return list(range(1, n + 1))


@DBOS.step()
async def score(ledger, item):
    await asyncio.sleep(0.02)
    note(ledger, "score", item)
    await asyncio.sleep(0.01)
    return item * item


@DBOS.step()
async def left(ledger, total):
    await asyncio.sleep(0.03)
    note(ledger, "left", total)
    await asyncio.sleep(0.01)
    return total + 1


@DBOS.step()
async def right(ledger, total):
    await asyncio.sleep(0.01)
    note(ledger, "right", total)
    await asyncio.sleep(0.03)
    return total * 2


@DBOS.step()
async def combine(ledger, a, b):
    await asyncio.sleep(0.02)
    note(ledger, "combine", f"{a},{b}")
    await asyncio.sleep(0.01)
    return {"a": a, "b": b, "sum": a + b}


@DBOS.step()
async def publish(ledger, summary):
    await asyncio.sleep(0.02)
    note(ledger, "publish", summary["sum"])
    await asyncio.sleep(0.01)
    return {"published": summary["sum"]}


@DBOS.workflow()
async def run(INPUT):
    ledger = INPUT["ledger"]
    items = await fetch(ledger, INPUT["n"])
    total = 0
    for item in items:
        total += await score(ledger, item)
    a, b = await asyncio.gather(left(ledger, total), right(ledger, total))
    summary = await combine(ledger, a, b)
    published = await publish(ledger, summary)
    return {"items": items, "total": total, "summary": summary, "published": published}
"""

# (step name, args as written to the side-effect file), in function-id order from 1.
CALLS = [
    ("fetch", "3"),
    ("score", "1"),
    ("score", "2"),
    ("score", "3"),
    ("left", "14"),
    ("right", "14"),
    ("combine", "15,28"),
    ("publish", "43"),
]
FUNCTION_IDS = {call: fid for fid, call in enumerate(CALLS, 1)}


@dataclass(frozen=True)
class Timing:
    """How long an attempt lives, in all and once its workflow body has started."""

    life_s: float
    workflow_s: float


@dataclass(frozen=True)
class Baseline:
    """An uncrashed run: its result and its timing."""

    result: Any
    timing: Timing


@dataclass(frozen=True)
class Moment:
    """When to kill an attempt: a fraction of its life, or of its life after workflow_start."""

    anchor: Literal["start", "workflow_start"]
    fraction: float

    def delay(self, timing: Timing) -> float:
        return self.fraction * (timing.life_s if self.anchor == "start" else timing.workflow_s)

    def describe(self, timing: Timing) -> str:
        return f"{self.delay(timing):.3f}s after {self.anchor} (fraction {self.fraction:.3f})"


@dataclass(frozen=True)
class Plan:
    """When to kill attempt 1 and, optionally, the recovery attempt after it."""

    seed: int
    moments: tuple[Moment, ...]


@dataclass
class Kill:
    """One SIGKILL that landed: the attempt it hit, as planned, when, and where in the run."""

    attempt: int
    planned: str
    at_ms: float
    phase: str


class Progress:
    """Live events of one attempt (``on_event``): notes when its workflow body starts."""

    def __init__(self) -> None:
        self.workflow_started = threading.Event()
        self.workflow_at: float | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "workflow_start" and not self.workflow_started.is_set():
            self.workflow_at = time.monotonic()
            self.workflow_started.set()


PHASES: Counter[str] = Counter()


def make_plan(seed: int) -> Plan:
    """Half the kills anywhere in an attempt's life, half once its workflow runs; 1 in 4 twice.

    Anchoring on the live ``workflow_start`` event keeps those kills among the steps even when
    a loaded machine makes interpreter start-up slower than it was for the baseline.
    """
    rng = random.Random(seed)

    def moment() -> Moment:
        anchor: Literal["start", "workflow_start"] = (
            "start" if rng.random() < 0.5 else "workflow_start"
        )
        return Moment(anchor, rng.random())

    first = moment()
    return Plan(seed, (first, moment()) if rng.random() < 0.25 else (first,))


def wait_for(handle: RunHandle, what: str) -> RunOutcome:
    """The attempt's outcome; a hang is killed and reported with the run folder's evidence."""
    try:
        return handle.wait(WAIT_S)
    except TimeoutError:
        handle.kill()
        handle.wait(WAIT_S)
        raise AssertionError(
            f"{what}: attempt {handle.attempt} hung for {WAIT_S:.0f}s\n{evidence(handle.folder)}"
        ) from None


def kill_at(
    handle: RunHandle, started: float, progress: Progress, delay: float, anchor: str
) -> float | None:
    """SIGKILL the attempt ``delay`` s after ``anchor``; the kill's wall-clock time, or None."""
    if anchor == "workflow_start":
        while not progress.workflow_started.wait(0.005):
            if handle.done():
                return None
        assert progress.workflow_at is not None
        started = progress.workflow_at
    remaining = started + delay - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
    assert handle.process is not None
    if handle.process.poll() is not None:
        return None
    at_ms = time.time() * 1000
    handle.kill()
    return at_ms


def phase_at(folder: RunFolder, attempt: int, at_ms: float) -> str:
    """Where the attempt was when it died, from its events up to the kill."""
    events = [
        e for e in read_events(folder.events) if e.get("attempt") == attempt and e["ts"] <= at_ms
    ]
    kinds = [e["kind"] for e in events]
    if not kinds:
        return "starting (interpreter, imports)"
    if "attempt_outcome" in kinds:
        return "after the outcome was decided"
    if "workflow_start" not in kinds:
        return "launching DBOS"
    open_steps: Counter[str] = Counter()
    for e in events:
        if e["kind"] == "step_start":
            open_steps[e["step"]] += 1
        elif e["kind"] in {"step_end", "step_error"}:
            open_steps[e["step"]] -= 1
    inside = sorted(step for step, n in open_steps.items() if n > 0)
    if inside:
        return f"inside {'+'.join(inside)}"
    if kinds.count("step_end") + kinds.count("step_reused") >= len(CALLS):
        return "after the last step"
    return "between steps"


def evidence(folder: RunFolder) -> str:
    """run.json, the event ledger's tail and every attempt's stderr, for failure messages."""
    parts = [f"run folder: {folder.path}", f"run.json: {folder.meta.read_text()}"]
    try:
        lines = folder.events.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    parts.append("dbos_events.jsonl (last 25 lines):\n" + "\n".join(lines[-25:]))
    for log in sorted(folder.ipc.glob("attempt-*/stderr.log")):
        text = log.read_text(errors="replace").strip()
        if text:
            parts.append(f"{log.parent.name}/stderr.log:\n{text[-3000:]}")
    return "\n".join(parts)


def side_effects(folder: RunFolder) -> list[tuple[str, str, float]]:
    """Each step body's line in the side-effect file: (step, args, wall-clock ms)."""
    path = folder.execution / SIDE_EFFECTS
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        step, args, ms = line.split(" ")
        out.append((step, args, float(ms)))
    return out


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    """The quickest of three uncrashed runs, so that most drawn kills land before the end."""
    ws = Workspace(tmp_path_factory.mktemp("baseline") / "relays")
    draft = ws.save_draft("fuzz", SOURCE)
    runs = []
    for _ in range(3):
        progress = Progress()
        started = time.monotonic()
        handle = start_run(ws, draft, run_input=INPUT, on_event=progress)
        outcome = wait_for(handle, "uncrashed run")
        ended = time.monotonic()
        assert outcome.status == "succeeded", evidence(handle.folder)
        assert progress.workflow_at is not None, evidence(handle.folder)
        timing = Timing(ended - started, ended - progress.workflow_at)
        runs.append(Baseline(outcome.result, timing))
    return min(runs, key=lambda run: run.timing.life_s)


@pytest.fixture(scope="module", autouse=True)
def phase_report(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module, print where the kills landed (visible in the terminal summary)."""
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None and PHASES:
        shown = ", ".join(f"{phase}: {n}" for phase, n in sorted(PHASES.items()))
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\ncrash fuzz: {sum(PHASES.values())} kills drawn; {shown}")


@pytest.fixture
def draft(tmp_path: Path) -> tuple[Workspace, Draft]:
    """A fresh workspace holding the fuzz relay."""
    ws = Workspace(tmp_path / "relays")
    return ws, ws.save_draft("fuzz", SOURCE)


def test_an_uncrashed_run_executes_each_step_body_once(baseline: Baseline, tmp_path: Path) -> None:
    """Without a crash, the relay's eight step calls each leave exactly one side effect."""
    ws = Workspace(tmp_path / "relays")
    handle = start_run(ws, ws.save_draft("fuzz", SOURCE), run_input=INPUT)
    outcome = wait_for(handle, "uncrashed run")
    assert outcome.status == "succeeded" and outcome.result == baseline.result
    assert sorted((s, a) for s, a, _ in side_effects(handle.folder)) == sorted(CALLS)
    steps = read_run_log(ws, outcome.run_id).steps
    assert [(s.function_id, s.name) for s in steps] == [
        (fid, name) for (name, _), fid in FUNCTION_IDS.items()
    ]


def check_side_effects(
    folder: RunFolder, steps: Sequence[StepCall], kills: list[Kill], context: str
) -> None:
    """No step body ran again once its checkpoint existed, and each ran at least once."""
    # Attempts run one after another: a body belongs to the last attempt started before it
    # (pids cannot tell them apart, since each confined child has its own PID namespace).
    starts = [e for e in read_events(folder.events) if e.get("kind") == "attempt_start"]
    killed = {k.attempt: k.at_ms for k in kills}
    by_fid = {s.function_id: s for s in steps}
    ran: dict[int, list[int]] = {fid: [] for fid in FUNCTION_IDS.values()}
    for step, args, ms in side_effects(folder):
        assert (step, args) in FUNCTION_IDS, f"unexpected side effect {step} {args}\n{context}"
        began = [e for e in starts if e["t0"] <= ms]
        assert began, f"{step} {args} ran at {ms}, before any attempt of the run\n{context}"
        ran[FUNCTION_IDS[(step, args)]].append(began[-1]["attempt"])
    for fid, executions in ran.items():
        row = by_fid[fid]
        name = f"step {fid} ({row.name})"
        completed = row.completed_at_ms
        assert executions, f"{name} is checkpointed but its body never ran\n{context}"
        assert len(executions) == len(set(executions)), (
            f"{name} ran twice within one attempt: attempts {executions}\n{context}"
        )
        assert len(executions) <= 1 + len(kills), (
            f"{name} ran {len(executions)} times with {len(kills)} kill(s)\n{context}"
        )
        *earlier, last = sorted(executions)
        for attempt in earlier:
            assert attempt in killed and killed[attempt] < completed, (
                f"{name} ran in attempt {attempt} and again later, but it was not in flight "
                f"when attempt {attempt} was killed (checkpoint completed at {completed}, "
                f"kills {killed})\n{context}"
            )
        assert completed >= attempts_by_number(folder)[last]["started_at"] - 1, (
            f"{name} ran in attempt {last} although its checkpoint was saved before that "
            f"attempt started\n{context}"
        )
        assert set(executions) <= set(row.executed_in), (
            f"{name}: side effects in attempts {executions}, ledger says executed_in "
            f"{list(row.executed_in)}\n{context}"
        )


def attempts_by_number(folder: RunFolder) -> dict[int, dict[str, Any]]:
    """run.json's attempts keyed by attempt number."""
    return {a["attempt"]: a for a in folder.read_meta()["attempts"]}


def check_reuse(folder: RunFolder, steps: Sequence[StepCall], context: str) -> None:
    """If the last attempt replayed the workflow, the ledger says it reused every earlier step."""
    attempts = attempts_by_number(folder)
    final = max(attempts)
    final_start = attempts[final]["started_at"]
    replayed = any(s.completed_at_ms > final_start for s in steps)
    for s in steps:
        for attempt in s.reused_in:
            assert s.completed_at_ms < attempts[attempt]["started_at"], (
                f"step {s.function_id} ({s.name}) is reported reused in attempt "
                f"{attempt}, but its checkpoint was saved during it\n{context}"
            )
        if replayed and s.completed_at_ms < final_start:
            assert final in s.reused_in, (
                f"step {s.function_id} ({s.name}) was checkpointed before attempt {final}, "
                f"which replayed the workflow, but reused_in is {list(s.reused_in)}\n{context}"
            )


def recovery(ws: Workspace, run_id: str, context: str) -> Callable[[Progress], RunHandle]:
    """Starts the next attempt of ``run_id``; a refusal fails the case with its context."""

    def start(progress: Progress) -> RunHandle:
        try:
            return start_recovery(ws, run_id, on_event=progress)
        except RelayError as exc:
            raise AssertionError(f"recovery refused: {exc}\n{context}") from exc

    return start


@dataclass
class Attempt:
    """One attempt run to its end: its handle and outcome, the kill if one landed, its timing."""

    handle: RunHandle
    outcome: RunOutcome
    kill: Kill | None
    timing: Timing | None


def attempt_with_kill(
    start: Callable[[Progress], RunHandle], moment: Moment | None, timing: Timing, context: str
) -> Attempt:
    """Start one attempt and run it to its end, killing it at ``moment``; what happened."""
    progress = Progress()
    started = time.monotonic()
    handle = start(progress)
    at_ms = None
    if moment is not None:
        at_ms = kill_at(handle, started, progress, moment.delay(timing), moment.anchor)
    outcome = wait_for(handle, context)
    ended = time.monotonic()
    if outcome.status != "interrupted":
        if moment is not None:
            PHASES["too late (the attempt had ended)"] += 1
        workflow_s = ended - progress.workflow_at if progress.workflow_at else timing.workflow_s
        return Attempt(handle, outcome, None, Timing(ended - started, workflow_s))
    assert at_ms is not None and moment is not None, (
        f"attempt {outcome.attempt} was interrupted but not killed: {outcome.error}\n{context}\n"
        f"{evidence(handle.folder)}"
    )
    phase = phase_at(handle.folder, outcome.attempt, at_ms)
    PHASES[phase] += 1
    return Attempt(
        handle, outcome, Kill(outcome.attempt, moment.describe(timing), at_ms, phase), None
    )


@pytest.mark.parametrize("seed", [BASE_SEED + i for i in range(CASES)], ids=lambda s: f"seed-{s}")
def test_sigkill_at_a_random_moment_then_recover(
    seed: int, baseline: Baseline, draft: tuple[Workspace, Draft]
) -> None:
    """A run SIGKILLed at a random moment recovers to the uncrashed result, no step run twice."""
    fuzz_case(seed, baseline, draft)


@pytest.mark.parametrize(
    "seed", [BASE_SEED + 1000 + i for i in range(PG_CASES)], ids=lambda s: f"seed-{s}"
)
def test_sigkill_at_a_random_moment_on_postgresql(
    seed: int,
    baseline: Baseline,
    draft: tuple[Workspace, Draft],
    database_url: str,
) -> None:
    """The same with the run's DBOS state in PostgreSQL (and its advisory run locks)."""
    ws, relay = draft
    fuzz_case(seed, baseline, (Workspace(ws.home, database_url=database_url), relay))


def fuzz_case(seed: int, baseline: Baseline, draft: tuple[Workspace, Draft]) -> None:
    """One case: kill, recover until the run ends, then compare with the uncrashed run."""
    ws, relay = draft
    plan = make_plan(seed)
    timing = baseline.timing
    context = f"seed={seed}, baseline {baseline.timing}"
    for _ in range(3):
        # A kill drawn after the run's end is drawn again within that run's own timing.
        first = attempt_with_kill(
            lambda progress: start_run(ws, relay, run_input=INPUT, on_event=progress),
            plan.moments[0],
            timing,
            context,
        )
        if first.timing is None:
            break
        timing = first.timing
    folder, outcome = first.handle.folder, first.outcome
    kills = [first.kill] if first.kill else []
    while outcome.status == "interrupted":
        context = f"seed={seed}, kills landed: {kills}"
        assert outcome.attempt < MAX_ATTEMPTS, f"budget used up\n{context}\n{evidence(folder)}"
        moment = plan.moments[len(kills)] if len(kills) < len(plan.moments) else None
        later = attempt_with_kill(recovery(ws, outcome.run_id, context), moment, timing, context)
        outcome = later.outcome
        kills += [later.kill] if later.kill else []
    context = f"seed={seed}, kills landed: {kills}\n{evidence(folder)}"

    assert outcome.status == "succeeded", context
    assert outcome.result == baseline.result, context
    assert json.loads(folder.result.read_text()) == baseline.result, context
    again = wait_for(start_recovery(ws, outcome.run_id), context)
    assert (again.status, again.result) == ("succeeded", baseline.result), context

    log = read_run_log(ws, outcome.run_id)
    statuses = [a.status for a in log.attempts]
    assert statuses == ["interrupted"] * len(kills) + ["succeeded"], context
    assert log.run.status == "succeeded" and log.run.dbos_status == "SUCCESS", context
    assert [(s.function_id, s.name, s.status) for s in log.steps] == [
        (fid, name, "checkpointed") for (name, _), fid in FUNCTION_IDS.items()
    ], context
    check_side_effects(folder, log.steps, kills, context)
    check_reuse(folder, log.steps, context)


def journal_mode(database: Path) -> str:
    """The SQLite journal mode recorded in the database file's header."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


# The fuzz relay, held at import (before the child reaches its database) until the test says go.
GATED_SOURCE = SOURCE.replace(
    "from dbos import DBOS\n",
    "from dbos import DBOS\n\n"
    "open('at-gate', 'w').close()\n"
    "while not os.path.exists('go'):\n"
    "    time.sleep(0.005)\n",
    1,
)


def test_a_kill_before_wal_is_set_still_recovers_on_a_wal_database(tmp_path: Path) -> None:
    """A run killed after its SQLite file was created but before WAL was set recovers on WAL."""
    ws = Workspace(tmp_path / "relays")
    relay = ws.save_draft("fuzz", GATED_SOURCE)
    handle = start_run(ws, relay, run_input=INPUT)
    gate = handle.folder.execution
    wait_until(
        lambda: (gate / "at-gate").exists() or handle.done(),
        timeout=WAIT_S,
        what=lambda: f"the child at its gate\n{evidence(handle.folder)}",
    )
    assert not handle.done(), evidence(handle.folder)
    handle.kill()  # the child is held at the relay's import: it has not reached its database
    outcome = wait_for(handle, "kill at the gate")
    assert outcome.status == "interrupted", outcome
    assert not handle.folder.database.exists(), evidence(handle.folder)
    # What a SIGKILL between sqlite3.connect(path) and the WAL pragma leaves behind.
    handle.folder.database.touch()
    (gate / "go").touch()
    recovered = wait_for(start_recovery(ws, outcome.run_id), "recovery")
    assert recovered.status == "succeeded", f"{recovered}\n{evidence(handle.folder)}"
    assert journal_mode(handle.folder.database) == "wal"
