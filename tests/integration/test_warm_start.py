"""Warm start: attempts forked from a warm parent are as isolated as spawned ones, and a
missing, dead or stale parent is replaced while attempts are spawned as before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import relay_notebook.runner.crash as kit_file
from relay_notebook.record.folders import find_run
from relay_notebook.runner import RunOutcome, parse_crash_spec, start_recovery, start_run
from relay_notebook.runner.doctor import start_report
from relay_notebook.runner.warm import WarmParent, restart_warm_parent, warm_parent
from relay_notebook.workspace import Workspace

# Module state a relay could leave behind: in its own module, in a kit module, in DBOS's.
LEAKY = textwrap.dedent(
    """
    import random
    import dbos
    import agentworks
    from agentworks import agent, mcp, tool, vault
    from dbos import DBOS

    COUNT = getattr(dbos, "_relay_leak", 0) + 1
    dbos._relay_leak = COUNT
    agentworks._relay_leak = getattr(agentworks, "_relay_leak", 0) + 1

    @DBOS.step()
    async def look():
        calls = all(callable(f) for f in (agent, mcp, tool, vault))
        return {"dbos": COUNT, "agentworks": agentworks._relay_leak, "random": random.random(),
                "calls": calls}

    @DBOS.step()
    async def after():
        return 1

    @DBOS.workflow()
    async def run(INPUT):
        seen = await look()
        await after()
        return seen
    """
)
ONE_STEP = (
    "from dbos import DBOS\n\n@DBOS.step()\nasync def one():\n    return 1\n\n"
    "@DBOS.workflow()\nasync def run(INPUT):\n    return await one()\n"
)


def go(handle: Any) -> RunOutcome:
    """Wait for an attempt with a generous timeout (CI machines are slow)."""
    outcome: RunOutcome = handle.wait(120)
    return outcome


def wait_until(condition: Callable[[], Any], timeout: float = 120) -> Any:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)
    return value


def ready_parent() -> WarmParent:
    parent = restart_warm_parent()
    assert parent.wait_ready(120)
    return wait_until(warm_parent)


def mechanism(workspace: Workspace, out: RunOutcome, attempt: int = 0) -> str:
    meta = find_run(workspace, out.run_id).read_meta()
    return str(meta["attempts"][attempt]["confinement"]["mechanism"])


def test_a_relay_top_level_state_never_leaks_into_the_next_attempt(workspace: Workspace) -> None:
    """Each forked attempt starts from the parent's clean state: counters at 1, fresh randomness."""
    ready_parent()
    draft = workspace.save_draft("leaky", LEAKY)
    first = go(start_run(workspace, draft))
    second = go(start_run(workspace, draft))
    assert first.status == second.status == "succeeded"
    assert mechanism(workspace, first) == mechanism(workspace, second) == "landlock"
    clean = {"dbos": 1, "agentworks": 1, "calls": True}  # and the kit's calls are the calls
    assert {k: v for k, v in first.result.items() if k != "random"} == clean
    assert {k: v for k, v in second.result.items() if k != "random"} == clean
    assert first.result["random"] != second.result["random"]
    crashed = go(start_run(workspace, draft, crash=parse_crash_spec("after:look")))
    assert crashed.status == "interrupted"
    recovered = go(start_recovery(workspace, crashed.run_id))
    assert recovered.status == "succeeded" and recovered.reused == [1]
    assert mechanism(workspace, recovered, 1) == "landlock"


def test_a_stale_parent_is_replaced_after_a_kit_file_changes(workspace: Workspace) -> None:
    """A kit file touched on disk: the next attempt is spawned, and a new parent forks the rest."""
    old = ready_parent()
    draft = workspace.save_draft("one", ONE_STEP)
    path = Path(kit_file.__file__)
    before = path.stat()
    try:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        assert warm_parent() is None and old.state() == "stale"
        spawned = go(start_run(workspace, draft))
        assert spawned.status == "succeeded" and mechanism(workspace, spawned) == "bwrap"
        new = wait_until(warm_parent)
        assert new.pid != old.pid
        forked = go(start_run(workspace, draft))
        assert forked.status == "succeeded" and mechanism(workspace, forked) == "landlock"
        wait_until(lambda: old.process.poll() is not None)  # let go: it left once idle
    finally:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert warm_parent() is None  # stale again; the next test's first attempt replaces it


def test_a_killed_parent_is_replaced_and_its_attempt_is_spawned(workspace: Workspace) -> None:
    """SIGKILL the warm parent: the next attempt is spawned as before, the one after forked."""
    parent = ready_parent()
    os.kill(parent.pid, signal.SIGKILL)
    wait_until(lambda: parent.process.poll() is not None)
    draft = workspace.save_draft("one", ONE_STEP)
    spawned = go(start_run(workspace, draft))
    assert spawned.status == "succeeded" and mechanism(workspace, spawned) == "bwrap"
    assert wait_until(warm_parent).pid != parent.pid
    forked = go(start_run(workspace, draft))
    assert forked.status == "succeeded" and mechanism(workspace, forked) == "landlock"


def test_a_forked_attempt_killed_by_a_signal_is_recorded_with_it(workspace: Workspace) -> None:
    """The supervisor sees a forked child's signal as it sees a spawned one's."""
    ready_parent()
    slow = ONE_STEP.replace("return 1", "import asyncio\n    await asyncio.sleep(60)")
    handle = start_run(workspace, workspace.save_draft("slow", slow))
    folder = find_run(workspace, handle.run_id)
    wait_until(lambda: "step_start" in folder.events.read_text())
    handle.kill()
    out = go(handle)
    assert out.status == "interrupted"
    attempt = folder.read_meta()["attempts"][0]
    assert attempt["returncode"] == -signal.SIGKILL
    assert attempt["confinement"]["mechanism"] == "landlock"


def test_warm_start_off_spawns_every_attempt(workspace: Workspace) -> None:
    """A workspace opened with warm start off spawns its children under bubblewrap."""
    ready_parent()
    workspace = Workspace(workspace.home, warm_start=False)
    out = go(start_run(workspace, workspace.save_draft("one", ONE_STEP)))
    assert out.status == "succeeded" and mechanism(workspace, out) == "bwrap"


def test_doctor_names_the_start_and_the_confinement(workspace: Workspace) -> None:
    """`relay doctor` says spawned under bubblewrap for the CLI; in-process, warm under Landlock."""
    parent = ready_parent()
    report = start_report(confine=True, warm_start=True)
    assert report.start == "warm" and str(parent.pid) in report.start_reason
    assert report.confinement.startswith("Landlock ABI ")
    off = start_report(confine=True, warm_start=False)
    assert off.start == "spawned" and "RELAY_WARM_START=0" in off.start_reason
    assert off.confinement == "bubblewrap"
    assert start_report(confine=False, warm_start=True).confinement == "none"
    argv = [sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home)]
    done = subprocess.run([*argv, "doctor", "--json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["start"] == "spawned" and "one attempt" in doc["start_reason"]
    assert doc["confinement"] == "bubblewrap"


@pytest.mark.parametrize("warm", [True, False])
def test_cancel_reaches_the_relay_under_either_start(workspace: Workspace, warm: bool) -> None:
    """Cancel's SIGINT reaches the relay's own process, forked or spawned."""
    ready_parent()
    workspace = Workspace(workspace.home, warm_start=warm)
    slow = ONE_STEP.replace("return 1", "import asyncio\n    await asyncio.sleep(60)")
    handle = start_run(workspace, workspace.save_draft("slow", slow))
    folder = find_run(workspace, handle.run_id)
    wait_until(lambda: "step_start" in folder.events.read_text())
    out = handle.cancel(grace=30)
    assert out.status == "interrupted"
    assert folder.read_meta()["attempts"][0]["returncode"] == -signal.SIGINT
