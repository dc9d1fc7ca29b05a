"""A supervisor that dies mid-attempt (a killed kernel or worker): the next recovery settles it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from relay_notebook.record.folders import find_run
from relay_notebook.runner import start_recovery
from relay_notebook.workspace import Workspace
from tests.polling import wait_until

SLOW = textwrap.dedent(
    """
    import asyncio
    from dbos import DBOS

    @DBOS.step()
    async def first():
        return 1

    @DBOS.step()
    async def second(x):
        await asyncio.sleep(1.0)
        return x + 1

    @DBOS.workflow()
    async def run(INPUT):
        return {"value": await second(await first())}
    """
)
# start a run, report the child's pid, then die by SIGKILL without settling anything
SUPERVISOR = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from relay_notebook.runner import start_run
    from relay_notebook.record.checkpoints import read_checkpoints
    from relay_notebook.workspace import Workspace

    ws = Workspace(sys.argv[1], confine=sys.argv[2] == "1")
    handle = start_run(ws, ws.load_draft("slow"))
    while not read_checkpoints(handle.folder):  # step 1's checkpoint is saved
        time.sleep(0.02)
    print(json.dumps({"run_id": handle.run_id, "child": handle.process.pid}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _orphan_run(ws: Workspace, *, confined: bool = True) -> tuple[str, int]:
    # the child outlives its supervisor (the kit's sandbox, forked or spawned, and unconfined;
    # only the bubblewrap fallback ends it with its parent): the tests kill it where they must
    argv = [sys.executable, "-c", SUPERVISOR, str(ws.home), "1" if confined else "0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    info = json.loads(proc.stdout)
    return info["run_id"], info["child"]


def _gone(pid: int) -> bool:
    """No process of the child's group is left (under bubblewrap, the relay's own
    interpreter outlives bwrap for a moment, holding the run lock)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_gone(pid: int) -> None:
    wait_until(lambda: _gone(pid), timeout=30, what=f"process group {pid} to end")


def test_a_child_that_finished_alone_is_settled_with_its_own_outcome(workspace: Workspace) -> None:
    """The kernel died but its child finished the run: recovery reports it, using no attempt."""
    workspace.save_draft("slow", SLOW)
    run_id, child = _orphan_run(workspace, confined=False)
    _wait_gone(child)
    out = start_recovery(workspace, run_id).wait(60)
    assert out.status == "succeeded" and out.result == {"value": 2}
    meta = find_run(workspace, run_id).read_meta()
    assert [a["status"] for a in meta["attempts"]] == ["succeeded"]
    assert meta["status"] == "succeeded"


def test_a_lost_attempt_is_settled_interrupted_and_counts(workspace: Workspace) -> None:
    """Supervisor and child both killed: the attempt is recorded lost; recovery reuses step 1."""
    workspace.save_draft("slow", SLOW)
    run_id, child = _orphan_run(workspace)
    os.killpg(child, signal.SIGKILL)  # the child leads its own process group
    _wait_gone(child)
    out = start_recovery(workspace, run_id).wait(60)
    assert out.status == "succeeded" and out.attempt == 2 and out.reused == [1]
    meta = find_run(workspace, run_id).read_meta()
    first = meta["attempts"][0]
    assert first["status"] == "interrupted" and first["lost"] is True and first["executed"] == [1]
    lines = Path(find_run(workspace, run_id).events).read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds.count("attempt_end") == 2


def test_a_lost_attempt_whose_database_was_replaced_by_a_link_fails_the_run(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Supervisor and child killed, and the run's database replaced by a link (what a relay
    may do to its run's folder): the recovery settles the lost attempt without reading the
    link, and the run fails with run-record-damaged, naming it, as a settled attempt would;
    the link's target is neither read into the run nor written."""
    workspace.save_draft("slow", SLOW)
    run_id, child = _orphan_run(workspace)
    os.killpg(child, signal.SIGKILL)
    _wait_gone(child)
    folder = find_run(workspace, run_id)
    elsewhere = tmp_path / "elsewhere.sqlite"
    folder.database.rename(elsewhere)
    folder.database.symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    out = start_recovery(workspace, run_id).wait(60)
    assert out.status == "failed", out
    assert out.error is not None and out.error["code"] == "run-record-damaged", out.error
    assert f"a link to {elsewhere}" in out.error["message"]
    meta = folder.read_meta()
    assert meta["status"] == "failed" and meta["error"]["code"] == "run-record-damaged"
    assert [(a["status"], a["lost"]) for a in meta["attempts"]] == [("failed", True)]
    assert elsewhere.read_bytes() == before
    again = start_recovery(workspace, run_id).wait(60)  # a finished run: said as it is
    assert again.status == "failed" and again.error == out.error
