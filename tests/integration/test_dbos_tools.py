"""DBOS's own tools on a relay's database: `dbos workflow fork`, `cancel` and `resume`, run as a
user runs them (the real `dbos` CLI on the run's SQLite file), then `relay recover`, `runs`
and `logs`: a workflow the kit did not make is shown and refused before an attempt would run
it, a cancelled run is shown cancelled and is not recovered, a resumed one recovers, and a
failed one that DBOS's tool re-enqueued stays failed, saying so."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_runner import ALWAYS_DIES, go

from relay_notebook import commands
from relay_notebook.commands.runs import RunOutcome
from relay_notebook.commands.time_travel import fork, lineage, lineage_text
from relay_notebook.errors import OutsideWorkflowError, codes
from relay_notebook.record.folders import find_run
from relay_notebook.runner.fork import ForkRequest
from relay_notebook.views.records import run_log_text
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

DBOS_CLI = shutil.which("dbos", path=str(Path(sys.executable).parent))


def dbos(*args: str) -> str:
    """DBOS's CLI, as a user types it; its output (it must succeed)."""
    assert DBOS_CLI is not None, "the dbos CLI is not installed beside this Python"
    proc = subprocess.run([DBOS_CLI, "workflow", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def rows(ws: Workspace, run_id: str) -> dict[str, str]:
    """Every workflow in the run's database and DBOS's status of it."""
    conn = sqlite3.connect(find_run(ws, run_id).database)
    try:
        return dict(conn.execute("SELECT workflow_uuid, status FROM workflow_status"))
    finally:
        conn.close()


def recover_cancelled(ws: Workspace, run_id: str, shown_url: str) -> RunOutcome:
    """`relay recover` of a run cancelled with `dbos workflow cancel`, after lineage and logs
    say cancelled: it runs nothing and names the resume command (the database as `shown_url`)."""
    assert lineage(ws, run_id).status == "cancelled"
    log = commands.logs(ws, run_id)
    assert (log.run.status, log.run.dbos_status) == ("cancelled", "CANCELLED")
    held = go(commands.recover(ws, run_id))
    assert held.status == "cancelled" and held.attempt == 1  # no attempt used
    assert held.error is not None and held.error["code"] == "cancelled-in-dbos"
    assert f"dbos workflow resume {run_id} -s {shown_url}" in held.error["message"]
    return held


@pytest.fixture
def crashed(workspace: Workspace) -> tuple[Workspace, str, str]:
    """A run of `five` killed after its second `fetch`: the workspace, run id, database URL."""
    workspace.save_draft("five", relay_source("five"))
    first = go(commands.run(workspace, "five", run_input={"n": 3}, crash="after:fetch#2"))
    assert first.status == "interrupted", first.error
    return workspace, first.run_id, f"sqlite:///{find_run(workspace, first.run_id).database}"


def test_a_dbos_fork_is_refused_before_recovery_would_run_it_then_shown_apart(
    crashed: tuple[Workspace, str, str],
) -> None:
    """`dbos workflow fork` leaves an ENQUEUED workflow: recover refuses in one coded line
    naming it and the commands to type; it never runs; cancelled, recovery goes on."""
    ws, run_id, url = crashed
    dbos("fork", run_id, "-S", "2", "-f", "copy-1", "-s", url)
    with pytest.raises(OutsideWorkflowError) as refused:
        go(commands.recover(ws, run_id))
    message = str(refused.value)
    assert refused.value.code == codes.OUTSIDE_WORKFLOW.code == "outside-workflow"
    assert "copy-1 (ENQUEUED, forked from " + run_id in message
    assert f"dbos workflow cancel copy-1 -s {url}" in message
    assert f"relay fork {run_id} --from CALL" in message and "\n" not in message
    preview = commands.preview(ws, run_id)
    assert preview.outcome == "stops" and preview.reason is not None
    assert preview.reason["code"] == "outside-workflow"
    assert rows(ws, run_id) == {run_id: "PENDING", "copy-1": "ENQUEUED"}  # nothing ran
    log = commands.logs(ws, run_id)
    assert [(w.workflow_id, w.forked_from) for w in log.run.outside] == [("copy-1", run_id)]
    assert log.children == ()  # the fork is not drawn as the run's child
    assert log.run.to_dict()["outside_workflows"][0]["status"] == "ENQUEUED"

    dbos("cancel", "copy-1", "-s", url)
    final = go(commands.recover(ws, run_id))
    assert final.status == "succeeded" and final.result == {"total": 30}
    assert rows(ws, run_id) == {run_id: "SUCCESS", "copy-1": "CANCELLED"}
    assert [w.status for w in commands.logs(ws, run_id).run.outside] == ["CANCELLED"]


def test_a_run_cancelled_with_dbos_is_shown_cancelled_and_recovers_once_resumed(
    crashed: tuple[Workspace, str, str],
) -> None:
    """After `dbos workflow cancel` runs, lineage and logs say cancelled, recover runs nothing;
    after `dbos workflow resume` the run is interrupted again and recovers from checkpoints."""
    ws, run_id, url = crashed
    dbos("cancel", run_id, "-s", url)
    assert [r.status for r in commands.runs(ws)] == ["cancelled"]
    recover_cancelled(ws, run_id, url)
    assert rows(ws, run_id) == {run_id: "CANCELLED"}

    dbos("resume", run_id, "-s", url)
    assert [r.status for r in commands.runs(ws)] == ["interrupted"]  # DBOS: ENQUEUED again
    final = go(commands.recover(ws, run_id))
    assert final.status == "succeeded" and final.result == {"total": 30}
    assert final.reused[:2] == [1, 2]  # the fetches checkpointed before the crash
    assert rows(ws, run_id) == {run_id: "SUCCESS"}


def test_a_dbos_fork_of_a_finished_run_is_listed_in_its_logs_and_left_alone(
    workspace: Workspace,
) -> None:
    """A succeeded run forked with DBOS's tool: its logs and lineage name the fork; recover
    returns the run as it was and the fork stays ENQUEUED (the kit never runs it)."""
    workspace.save_draft("five", relay_source("five"))
    done = go(commands.run(workspace, "five", run_input={"n": 2}))
    url = f"sqlite:///{find_run(workspace, done.run_id).database}"
    dbos("fork", done.run_id, "-S", "1", "-f", "again", "-s", url)
    text = commands.logs(workspace, done.run_id)
    assert [w.describe() for w in text.run.outside] == [
        f"again (ENQUEUED, forked from {done.run_id} with dbos workflow fork)"
    ]
    tree = lineage_text(lineage(workspace, done.run_id)).splitlines()
    assert tree == [
        f"{done.run_id}  succeeded",
        f"└─ again (ENQUEUED, forked from {done.run_id} with dbos workflow fork): not made by "
        "the kit, not a run",
    ]
    again = go(commands.recover(workspace, done.run_id))
    assert again.status == "succeeded" and again.attempt == 1
    assert rows(workspace, done.run_id) == {done.run_id: "SUCCESS", "again": "ENQUEUED"}


def test_a_failed_run_resumed_with_dbos_stays_failed_and_says_why(workspace: Workspace) -> None:
    """DBOS dead-letters a run (MAX_RECOVERY_ATTEMPTS_EXCEEDED, the kit: failed) and `dbos
    workflow resume` makes it ENQUEUED: the logs and the recovery preview say the kit keeps it
    failed and name `relay fork`; recover runs nothing and DBOS's row stays as the tool left it."""
    workspace.save_draft("doomed", ALWAYS_DIES.replace("MAX", "1"))
    out = go(commands.run(workspace, "doomed"))
    while out.status == "interrupted":
        out = go(commands.recover(workspace, out.run_id))
    assert out.error is not None and out.error["code"] == "max-recovery-attempts-exceeded"
    url = f"sqlite:///{find_run(workspace, out.run_id).database}"
    dbos("resume", out.run_id, "-s", url)
    text = run_log_text(commands.logs(workspace, out.run_id))
    assert f"{out.run_id} of doomed (draft): failed\n  DBOS ENQUEUED" in text
    assert "re-enqueued the workflow (dbos workflow resume)" in text
    assert f"%relay fork {out.run_id} --from CALL" in text
    reason = commands.preview(workspace, out.run_id).reason
    assert reason is not None and reason["code"] == "finished"
    assert "the kit does not run a finished run again" in reason["message"]
    again = go(commands.recover(workspace, out.run_id))
    assert (again.status, again.attempt) == ("failed", out.attempt)
    assert rows(workspace, out.run_id) == {out.run_id: "ENQUEUED"}


def test_the_kits_fork_of_a_run_leaves_a_dbos_fork_behind(workspace: Workspace) -> None:
    """`relay fork` of a run whose database holds a `dbos workflow fork` copies the run's own
    workflows only: the DBOS-made fork is not run by the kit's fork's first attempt."""
    workspace.save_draft("five", relay_source("five"))
    done = go(commands.run(workspace, "five", run_input={"n": 3}))
    url = f"sqlite:///{find_run(workspace, done.run_id).database}"
    dbos("fork", done.run_id, "-S", "2", "-f", "theirs", "-s", url)
    ours = go(fork(workspace, done.run_id, ForkRequest("fetch#2")))
    assert ours.status == "succeeded" and ours.result == {"total": 30}
    assert rows(workspace, ours.run_id) == {ours.run_id: "SUCCESS"}
    assert rows(workspace, done.run_id) == {done.run_id: "SUCCESS", "theirs": "ENQUEUED"}
