"""Warm start: attempts forked from a warm parent are as isolated as spawned ones, and a
missing, dead or stale parent is replaced while attempts are spawned as before."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.record.folders import find_run
from relay_notebook.runner import (
    RunOutcome,
    parse_crash_spec,
    start_recovery,
    start_run,
    warm_launch,
)
from relay_notebook.runner.doctor import start_report
from relay_notebook.runner.warm import (
    WarmParent,
    let_go_warm_parent,
    restart_warm_parent,
    start_awaited_warm_parent,
    warm_parent,
    warm_status,
)
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

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
    deadline = time.monotonic() + 120
    while (ready := warm_parent()) is None:
        assert time.monotonic() < deadline, f"no usable warm parent: {warm_status(True)}"
        time.sleep(0.05)
    return ready


def mechanism(workspace: Workspace, out: RunOutcome, attempt: int = 0) -> str:
    meta = find_run(workspace, out.run_id).read_meta()
    return str(meta["attempts"][attempt]["confinement"]["mechanism"])


def started(workspace: Workspace, run_id: str, attempt: int = 0) -> dict[str, Any]:
    """How the attempt's record says it started: forked or spawned, and why if it could have
    been forked."""
    start = find_run(workspace, run_id).read_meta()["attempts"][attempt]["start"]
    assert isinstance(start, dict)
    return start


STALE = "its warm parent was stale: the kit's code changed after it started"
EXITED = "its warm parent had exited"
FORKED = {"how": "forked", "why": None}


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


def test_a_stale_parent_is_replaced_after_a_kit_file_changes(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kit file touched on disk: the next attempt is spawned, and a new parent forks the rest.

    The file touched is one of this test's, watched as the kit's modules are by this process's
    parents only: touching a real module would make the warm parents of the tests and
    benchmarks running beside this one stale too, and spawn attempts they expect forked."""
    watched = tmp_path / "kit_module.py"
    watched.write_text("", encoding="utf-8")
    real = warm_launch.kit_files
    monkeypatch.setattr(warm_launch, "kit_files", lambda: (*real(), str(watched)))
    let_go_warm_parent(restart_warm_parent())  # one that watches it
    old = ready_parent()
    draft = workspace.save_draft("one", ONE_STEP)
    before = watched.stat()
    os.utime(watched, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert warm_parent() is None and old.state() == "stale"
    spawned = go(start_run(workspace, draft))
    assert spawned.status == "succeeded" and mechanism(workspace, spawned) == "sandbox"
    assert started(workspace, spawned.run_id) == {"how": "spawned", "why": STALE}
    new = wait_until(warm_parent)
    assert new.pid != old.pid
    forked = go(start_run(workspace, draft))
    assert forked.status == "succeeded" and mechanism(workspace, forked) == "landlock"
    assert started(workspace, forked.run_id) == FORKED
    wait_until(lambda: old.process.poll() is not None)  # let go: it left once idle
    let_go_warm_parent(new)  # the next test's parent watches the kit alone


def test_a_killed_parent_is_replaced_and_its_attempt_is_spawned(workspace: Workspace) -> None:
    """SIGKILL the warm parent: the next attempt is spawned as before, the one after forked."""
    parent = ready_parent()
    os.kill(parent.pid, signal.SIGKILL)
    wait_until(lambda: parent.process.poll() is not None)
    draft = workspace.save_draft("one", ONE_STEP)
    spawned = go(start_run(workspace, draft))
    assert spawned.status == "succeeded" and mechanism(workspace, spawned) == "sandbox"
    assert started(workspace, spawned.run_id) == {"how": "spawned", "why": EXITED}
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


def test_a_forked_attempt_killed_at_once_is_killed(workspace: Workspace) -> None:
    """A kill the instant ``start_run`` returns ends the forked attempt: its group already exists.

    The warm parent reports a child's pid only once the child leads its own process group, so a
    supervisor that signals the group at once never finds it missing (and so kills nothing).
    To make the race a sure loss for a parent that reported the pid at fork, the warm parent
    (and so each child it forks) shares one core with a busy process, while this test's process
    runs on the other: a new child then waits for the core before its ``setsid``.
    """
    parent = ready_parent()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two cores")
    draft = workspace.save_draft("one", ONE_STEP)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    ours, theirs = os.sched_getaffinity(0), os.sched_getaffinity(parent.pid)
    try:
        os.sched_setaffinity(hog.pid, {cpus[0]})
        os.sched_setaffinity(parent.pid, {cpus[0]})
        os.sched_setaffinity(0, {cpus[1]})
        for _ in range(5):
            handle = start_run(workspace, draft)
            pid = handle.process.pid
            assert os.getpgid(pid) == pid  # reported: so it leads its group
            handle.kill()
            out = go(handle)
            assert out.status == "interrupted", out
            assert mechanism(workspace, out) == "landlock", warm_status(True)
    finally:
        os.sched_setaffinity(0, ours)
        os.sched_setaffinity(parent.pid, theirs)
        hog.kill()
        hog.wait()


def test_warm_start_off_spawns_every_attempt(workspace: Workspace) -> None:
    """A workspace opened with warm start off spawns its children into the sandbox."""
    ready_parent()
    workspace = Workspace(workspace.home, warm_start=False)
    out = go(start_run(workspace, workspace.save_draft("one", ONE_STEP)))
    assert out.status == "succeeded" and mechanism(workspace, out) == "sandbox"
    assert started(workspace, out.run_id) == {"how": "spawned", "why": None}  # as asked


def test_doctor_names_the_start_and_the_confinement(workspace: Workspace) -> None:
    """`relay doctor` says warm under Landlock, in-process and for the CLI's runs; spawned
    in the sandbox with warm start off."""
    parent = ready_parent()
    report = start_report(confine=True, warm_start=True)
    assert report.start == "warm" and str(parent.pid) in report.start_reason
    assert report.confinement.startswith("Landlock ABI ")
    off = start_report(confine=True, warm_start=False)
    assert off.start == "spawned" and "RELAY_WARM_START=0" in off.start_reason
    assert off.confinement == "sandbox"
    assert start_report(confine=False, warm_start=True).confinement == "none"
    doc = json.loads(relay(workspace.home, "doctor", "--json").stdout)
    assert doc["start"] == "warm" and "before their own imports" in doc["start_reason"], doc
    assert doc["confinement"].startswith("Landlock ABI ")
    cli_off = json.loads(
        relay(workspace.home, "doctor", "--json", env={"RELAY_WARM_START": "0"}).stdout
    )
    assert cli_off["start"] == "spawned" and "RELAY_WARM_START=0" in cli_off["start_reason"]
    assert cli_off["confinement"] == "sandbox"


# `relay` whose warm parent cannot start: its module is missing (the CLI itself is untouched)
BROKEN_PARENT = (  # the CLI as the `relay` program (its argv[0]), its warm parent's module gone
    "import runpy, sys\n"
    "import relay_notebook.cli as cli\n"
    "import relay_notebook.runner.warm_launch as launch\n"
    "sys.argv[0] = cli.__path__[0] + '/__main__.py'\n"
    "launch.WARM_PARENT_MODULE = 'relay_notebook.runner.no_such_warm_parent'\n"
    "runpy.run_module('relay_notebook.cli', run_name='__main__')\n"
)


def relay(
    home: Path, *args: str, env: dict[str, str] | None = None, broken_parent: bool = False
) -> subprocess.CompletedProcess[str]:
    """`relay --home HOME ARGS...` as a terminal runs it: a fresh interpreter, the CLI as its
    program (so it starts its own warm parent first)."""
    program = ["-c", BROKEN_PARENT] if broken_parent else ["-m", "relay_notebook.cli"]
    return subprocess.run(
        [sys.executable, *program, "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_relay_run_from_a_terminal_forks_its_attempts_confined(
    workspace: Workspace, tmp_path: Path
) -> None:
    """`relay run` and `relay recover` fork their attempts from the warm parent the CLI starts
    first, confined by Landlock: a write outside the run folder is refused."""
    workspace.save_draft("write_outside", relay_source("write_outside"))
    outside = tmp_path / "escaped.txt"
    run_input = json.dumps({"outside": str(outside)})
    crashed = relay(workspace.home, "run", "write_outside", "--input", run_input,
                    "--crash", "during:after", "--json")  # fmt: skip
    doc = json.loads(crashed.stdout)
    assert doc["status"] == "interrupted", crashed.stderr
    recovered = relay(workspace.home, "recover", doc["run_id"], "--json")
    out = json.loads(recovered.stdout)
    assert recovered.returncode == 0 and out["status"] == "succeeded", recovered.stderr
    assert out["result"]["after"] == 1 and out["result"]["outside"] in ("EACCES", "EPERM")
    assert not outside.exists()
    attempts = find_run(workspace, doc["run_id"]).read_meta()["attempts"]
    assert [a["confinement"]["mechanism"] for a in attempts] == ["landlock", "landlock"]
    assert all(a["confined"] for a in attempts)
    assert [a["start"] for a in attempts] == [FORKED, FORKED]


def test_relay_run_spawns_into_the_sandbox_when_its_warm_parent_cannot_start(
    workspace: Workspace,
) -> None:
    """A warm parent that dies at start: `relay run` spawns its attempt into the same sandbox,
    and `relay doctor` says so."""
    workspace.save_draft("one", ONE_STEP)
    done = relay(workspace.home, "run", "one", "--json", broken_parent=True)
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["status"] == "succeeded", done.stderr
    assert (
        find_run(workspace, out["run_id"]).read_meta()["attempts"][0]["confinement"]["mechanism"]
        == "sandbox"
    )
    # the attempt's record says why it was not forked
    assert started(workspace, out["run_id"]) == {"how": "spawned", "why": EXITED}
    doc = json.loads(relay(workspace.home, "doctor", "--json", broken_parent=True).stdout)
    assert doc["start"] == "spawned" and "exited with status 1" in doc["start_reason"]
    assert doc["confinement"] == "sandbox"


def test_a_one_attempt_parent_is_waited_for_and_ended_when_done(workspace: Workspace) -> None:
    """A `relay run`-style parent, just started, is waited for (the attempt is forked, not
    spawned); let go unused it is ended at once, let go after an attempt it leaves by itself."""
    let_go_warm_parent(restart_warm_parent())  # this process starts from no parent
    try:
        parent = start_awaited_warm_parent()
        assert parent is not None
        out = go(start_run(workspace, workspace.save_draft("one", ONE_STEP)))
        assert out.status == "succeeded" and mechanism(workspace, out) == "landlock"
        assert restart_warm_parent() is parent  # one attempt: no second parent after it
        let_go_warm_parent(parent)
        wait_until(lambda: parent.process.poll() is not None)
        unused = start_awaited_warm_parent()
        assert unused is not None
        let_go_warm_parent(unused)
        assert unused.process.poll() is not None
    finally:
        ready_parent()


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


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
def test_without_cap_sys_admin_the_child_is_confined_in_a_user_namespace(
    workspace: Workspace, tmp_path: Path
) -> None:
    """As a user without CAP_SYS_ADMIN (every non-root user) a warm parent cannot unshare PID
    and mount namespaces directly; it enters a user namespace first, and its forked attempts
    are confined as root's are: a write outside the run folder is refused."""
    workspace.save_draft("write_outside", relay_source("write_outside"))
    outside = tmp_path / "escaped.txt"
    run_input = json.dumps({"outside": str(outside)})
    drop = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"]
    unshare = "import ctypes; print(ctypes.CDLL(None).unshare(0x20020000))"  # NEWPID | NEWNS
    plain = subprocess.run(
        [*drop, sys.executable, "-c", unshare],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert plain.stdout.strip() == "-1", "without CAP_SYS_ADMIN a plain unshare must fail"
    done = subprocess.run(
        [*drop, sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home),
         "run", "write_outside", "--input", run_input, "--json"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "RELAY_WARM_START": "1"},
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert done.returncode == 0 and out["status"] == "succeeded", done.stderr
    # refused, or written into the sandbox's own /tmp (the test's tmp_path is under the host's)
    assert out["result"]["outside"] in ("EACCES", "EPERM", "ENOENT", "written")
    assert not outside.exists()
    (attempt,) = find_run(workspace, out["run_id"]).read_meta()["attempts"]
    assert attempt["confined"] and attempt["confinement"]["mechanism"] == "landlock", attempt


def test_relay_send_from_a_terminal_forks_the_resumed_attempt(workspace: Workspace) -> None:
    """`relay send` resumes a waiting run in its own process, so it starts its warm parent first
    like `relay run`: the resumed attempt is forked and confined by Landlock."""
    workspace.save_draft("refund", relay_source("refund"))
    grace = {"RELAY_WAIT_GRACE": "0.5"}
    waited = relay(workspace.home, "run", "refund", "--input", '{"order": "B-7"}', "--json",
                   env=grace)  # fmt: skip
    run_id = json.loads(waited.stdout)["run_id"]
    assert waited.returncode == 5, waited.stderr
    sent = relay(workspace.home, "send", run_id, "approval",
                 '{"approved": true, "note": "ok by Ann"}', "--json", env=grace)  # fmt: skip
    out = json.loads(sent.stdout)
    assert sent.returncode == 0 and out["status"] == "succeeded", sent.stderr
    attempts = find_run(workspace, run_id).read_meta()["attempts"]
    assert [a["status"] for a in attempts] == ["waiting", "succeeded"]
    assert [a["confinement"]["mechanism"] for a in attempts] == ["landlock", "landlock"]
