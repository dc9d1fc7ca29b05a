"""Crash fuzzing on the terminal path: `relay run` and `relay recover` as a terminal starts them.

A terminal's `relay run` is its own warm parent (``runner.warm_launch``): the CLI process spawns
the parent first, checks the relay while the parent imports DBOS, and forks the attempt from it.
Each case SIGKILLs, at a moment drawn from its own seed, one of three (they take turns): the
forked attempt (the CLI, its supervisor, records it ``interrupted``), the CLI process alone (the
supervisor is lost; the attempt finishes alone and the next recovery settles it with its own
outcome), or the whole tree at once (nothing settles the attempt but the next recovery).
Then `relay recover` runs, again from a fresh terminal process, until the run ends.
The run must end as an uncrashed one does, with the checks of ``test_crash_fuzz``: every step
checkpointed, and no step body run again once its checkpoint was saved (counted from the
relay's own side-effect file).
The cases run on a run folder's SQLite file and, fewer, on a PostgreSQL database (the run's
locks are then the server's advisory locks, which a killed process's session drops).
``RELAY_CLI_FUZZ_CASES=N`` runs N SQLite cases instead of 6 (and half as many on PostgreSQL).
Forks killed while they are made are the benchmark's cases (``fork_case``), a few of them here
(``RELAY_FORK_FUZZ_CASES=N``, default 2).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from relay_notebook.history import list_runs, read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.workspace import Workspace
from tests.integration.test_crash_fuzz import (
    INPUT,
    SOURCE,
    Kill,
    check_reuse,
    check_side_effects,
    evidence,
)
from tests.polling import wait_until
from tests.procs import alive, descendants, parent_of

pytestmark = pytest.mark.slow

CASES = int(os.environ.get("RELAY_CLI_FUZZ_CASES", "6"))
BASE_SEED = 7_320_000
TARGETS = ("attempt", "cli", "tree")
#: (seed, store, what is killed): the SQLite cases, then half as many on PostgreSQL (seeds of
#: their own); the targets take turns, so each store sees all three from 3 cases on
DRAWS = [(BASE_SEED + i, "sqlite", TARGETS[i % 3]) for i in range(CASES)] + [
    (BASE_SEED + 500 + i, "postgres", TARGETS[i % 3]) for i in range(max(1, CASES // 2))
]
ROOT = Path(__file__).resolve().parents[2]
#: what the fuzz relay returns when nothing crashes (its steps are pure functions of INPUT)
EXPECTED = {
    "items": [1, 2, 3],
    "total": 14,
    "summary": {"a": 15, "b": 28, "sum": 43},
    "published": {"published": 43},
}
EXIT_INTERRUPTED = 3


def relay(home: Path, *args: str, database_url: str | None = None) -> subprocess.Popen[str]:
    """`relay --home HOME ARGS...` as a terminal starts it, warm start on (on PostgreSQL with
    ``database_url``, given as a terminal user gives it: ``RELAY_DATABASE_URL``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RELAY_DATABASE_URL", "RELAY_HOME")}
    env |= {"RELAY_WARM_START": "1", "PYTHONPATH": str(ROOT)}
    if database_url is not None:
        env["RELAY_DATABASE_URL"] = database_url
    return subprocess.Popen(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def attempt_processes(cli_pid: int) -> list[int]:
    """The forked attempt: what runs below the CLI's warm parent (the CLI's own child)."""
    return [p for p in descendants(cli_pid) if parent_of(p) != cli_pid]


def attempt_started(workspace: Workspace) -> bool:
    """Whether the run's first attempt has started (its ``attempt_start`` event is written)."""
    runs = list_runs(workspace)
    if not runs:
        return False
    events = read_events(find_run(workspace, runs[0].run_id).events)
    return any(e.get("kind") == "attempt_start" for e in events)


def kill_at(
    proc: subprocess.Popen[str], workspace: Workspace, target: str, delay_s: float
) -> tuple[float, list[int]]:
    """SIGKILL ``target`` of ``proc`` (the forked ``attempt``, the ``cli`` alone, or the whole
    ``tree``) ``delay_s`` after the attempt started. Returns when (epoch ms; 0: the run ended
    first) and every process that was below the CLI then."""

    def started_or_ended() -> object:
        return "ended" if proc.poll() is not None else attempt_started(workspace)

    if wait_until(started_or_ended, timeout=60, interval=0.005, what="the attempt") == "ended":
        return 0.0, []
    started = time.monotonic()
    while time.monotonic() - started < delay_s:
        if proc.poll() is not None:
            return 0.0, []
        time.sleep(0.002)
    below = descendants(proc.pid)
    at_ms = time.time() * 1000
    victims = {
        "attempt": attempt_processes(proc.pid),  # the supervisor records it interrupted
        "cli": [proc.pid],  # the supervisor is lost; the attempt goes on alone
        "tree": [proc.pid, *below],  # everything at once, as a power cut does
    }[target]
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return at_ms, below


def only_run(workspace: Workspace) -> str:
    runs = list_runs(workspace, "fuzz")
    assert len(runs) == 1, [r.run_id for r in runs]
    return runs[0].run_id


@pytest.mark.parametrize(
    ("seed", "store", "target"),
    DRAWS,
    ids=[f"{store}-{target}-{seed}" for seed, store, target in DRAWS],
)
def test_a_terminal_run_killed_at_a_random_moment_recovers_from_the_terminal(
    seed: int, store: str, target: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(seed)
    delay_s = rng.uniform(0.0, 0.4)
    url = request.getfixturevalue("postgres").database_url() if store == "postgres" else None
    workspace = Workspace(tmp_path / "relays")
    workspace.save_draft("fuzz", SOURCE)
    plan = f"seed {seed} ({store}): SIGKILL the {target} {delay_s * 1000:.0f} ms in"

    proc = relay(
        workspace.home, "run", "fuzz", "--input", json.dumps(INPUT), "--json", database_url=url
    )
    at_ms, below = kill_at(proc, workspace, target, delay_s)
    out, err = proc.communicate(timeout=120)
    run_id = only_run(workspace)
    folder = find_run(workspace, run_id)
    context = f"{plan}\nrelay run exited {proc.returncode}: {err}\n{out}"
    if at_ms and target == "attempt":
        assert proc.returncode in (0, EXIT_INTERRUPTED), f"{context}\n{evidence(folder)}"
    if at_ms and target in ("cli", "tree"):
        assert proc.returncode == -signal.SIGKILL, context
        # what the CLI left (its warm parent, the attempt) leaves by itself, holding nothing
        wait_until(
            lambda: not any(alive(p) for p in below), timeout=30,
            what=lambda: f"the processes the killed CLI left to end: {below}\n{context}",
        )  # fmt: skip

    for _ in range(4):
        status = folder.read_meta()["status"]
        if status == "succeeded":
            break
        recovered = relay(workspace.home, "recover", run_id, "--json", database_url=url)
        rout, rerr = recovered.communicate(timeout=120)
        context += f"\nrelay recover exited {recovered.returncode}: {rerr}\n{rout}"
    record = folder.read_meta()
    assert record["status"] == "succeeded", f"{context}\n{evidence(folder)}"
    result = json.loads(folder.result.read_text(encoding="utf-8"))
    assert result == EXPECTED, f"{context}\n{evidence(folder)}"
    if url is not None:
        assert record["database"]["kind"] == "postgresql", record["database"]
        assert not folder.database.exists()  # the checkpoints were in PostgreSQL
    log = read_run_log(workspace, run_id)
    kills = []
    attempts = record["attempts"]
    if at_ms and attempts[0]["status"] == "interrupted":
        kills.append(Kill(1, plan, at_ms, target))
    check_side_effects(folder, log.steps, kills, f"{context}\n{evidence(folder)}")
    check_reuse(folder, log.steps, f"{context}\n{evidence(folder)}")
    assert all(a["confinement"]["mechanism"] == "landlock" for a in attempts), attempts
    print(f"{plan}: attempts {[a['status'] for a in attempts]}")  # shown with -s


FORK_CASES = int(os.environ.get("RELAY_FORK_FUZZ_CASES", "2"))


def _bench() -> ModuleType:
    """``benchmarks/bench_crash_fuzz.py``, whose fork cases this test draws a few of."""
    spec = importlib.util.spec_from_file_location(
        "bench_crash_fuzz", ROOT / "benchmarks" / "bench_crash_fuzz.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_forks_killed_while_they_are_made_end_right_or_never_were(tmp_path: Path) -> None:
    """`relay fork` SIGKILLed at drawn points of its making (and `relay recover` at points of
    completing it): each fork is absent or ends with its edit, no copied step run again, and
    the parent stays byte-identical."""
    stats: Counter[str] = Counter()
    problems = _bench().fork_part(FORK_CASES, BASE_SEED + 900, stats, tmp_path / "relays")
    assert problems == [], f"{problems}\n{dict(stats)}"
    assert stats["fork kills"] == FORK_CASES, dict(stats)
    done = stats["forks completed and right"] + stats["killed before anything was written"]
    assert done == FORK_CASES, dict(stats)
