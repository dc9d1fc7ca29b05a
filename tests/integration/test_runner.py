"""The durable runner with real child processes, real exits and real DBOS on SQLite."""

from __future__ import annotations

import json
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.errors import (
    AttemptBudgetError,
    BindingChangedError,
    DeadlinePassedError,
    ReleaseTamperedError,
    RunLockedError,
)
from relay_notebook.history import read_run_log
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.ledger import read_events
from relay_notebook.runner import RunOutcome, parse_crash_spec, start_recovery, start_run
from relay_notebook.workspace import Manifest, Workspace, freeze_release
from tests.polling import wait_until
from tests.relays import relay_source

FIVE_STEPS = relay_source("five_steps")
# load, square x3, total: five step calls in order
CALLS = ["load", "square", "square", "square", "total"]


def go(handle_or_outcome: Any) -> RunOutcome:
    """Wait for an attempt with a generous timeout (CI machines are slow)."""
    outcome: RunOutcome = handle_or_outcome.wait(120)
    return outcome


def side_effects(ws: Workspace, run_id: str) -> Counter[str]:
    """The lines step bodies appended to effects.log in the run's execution folder."""
    n = run_id.rsplit("-", 1)[1]
    path = ws.relay_dir("five") / "runs" / f"iteration-{n}-hook" / "execution" / "effects.log"
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()


@pytest.fixture
def five(workspace: Workspace) -> tuple[Workspace, Any, dict[str, Any]]:
    draft = workspace.save_draft("five", FIVE_STEPS)
    # relative to the run's execution folder, where a (confined) relay may write
    return workspace, draft, {"ledger": "effects.log", "n": 3}


def test_uncrashed_run_succeeds_and_writes_its_files(five: Any) -> None:
    """A run without a crash succeeds in one attempt and leaves result, trace and events."""
    ws, draft, inp = five
    out = go(start_run(ws, draft, run_input=inp))
    assert out.status == "succeeded" and out.attempt == 1 and out.exit_code == 0
    assert out.result == {"squares": [0, 1, 4], "total": 5}
    folder = ws.relay_dir("five") / "runs" / "iteration-1-hook"
    assert json.loads((folder / "relay_result.json").read_text()) == out.result
    trace = json.loads((folder / "relay_trace.json").read_text())
    assert trace["status"] == "succeeded" and trace["run_id"] == "five-1"
    assert (folder / ".relay_dbos" / "dbos.sqlite").exists()
    kinds = [e["kind"] for e in read_events(folder / "dbos_events.jsonl")]
    assert kinds.count("step_end") == 5 and kinds[-1] == "attempt_end"
    seqs = [e["seq"] for e in read_events(folder / "dbos_events.jsonl")]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.parametrize("k", range(1, 6))
def test_crash_after_each_step_then_recover(five: Any, tmp_path: Path, k: int) -> None:
    """Crashing after the k-th step's checkpoint, recovery reuses exactly the first k steps."""
    ws, draft, inp = five
    name = CALLS[k - 1]
    occurrence = CALLS[:k].count(name)
    crash = parse_crash_spec(f"after:{name}#{occurrence}")
    first = go(start_run(ws, draft, run_input=inp, crash=crash))
    assert first.status == "interrupted" and first.exit_code == 3
    assert first.executed == list(range(1, k + 1))
    second = go(start_recovery(ws, first.run_id))
    assert second.status == "succeeded" and second.attempt == 2
    assert second.result == {"squares": [0, 1, 4], "total": 5}
    assert second.reused == list(range(1, k + 1))
    assert second.executed == list(range(k + 1, 6))
    # every step body ran exactly once, however the run was split across attempts
    effects = side_effects(ws, first.run_id)
    assert effects == Counter(["load", "square 0", "square 1", "square 2", "total"])
    steps = read_run_log(ws, first.run_id).steps
    assert [list(s.executed_in) for s in steps] == [[1]] * k + [[2]] * (5 - k)
    assert [list(s.reused_in) for s in steps] == [[2]] * k + [[]] * (5 - k)


def test_crash_during_a_step_runs_only_that_step_twice(five: Any) -> None:
    """A crash inside square#2's body re-runs that body on recovery, and nothing else."""
    ws, draft, inp = five
    first = go(start_run(ws, draft, run_input=inp, crash=parse_crash_spec("during:square#2")))
    assert first.status == "interrupted"
    assert first.executed == [1, 2]  # load and square#1 were checkpointed
    second = go(start_recovery(ws, first.run_id))
    assert second.status == "succeeded"
    effects = side_effects(ws, first.run_id)
    assert effects["square 1"] == 2
    assert all(n == 1 for line, n in effects.items() if line != "square 1")
    step3 = read_run_log(ws, first.run_id).steps[2]
    assert step3.name == "square" and list(step3.executed_in) == [1, 2]


def test_run_json_is_read_once_per_command_at_most(
    five: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` reads run.json once, under the run lock (a new run is visible to ``recover`` as
    soon as its folder exists, so its first attempt is numbered from what the lock guards);
    ``recover`` reads it twice: once for the rules that need no lock (a finished, revoked or
    uncertain run comes back without taking it), once under the run lock, since another process
    may have changed it in between. Settling the attempt reads it no more: the lock is held."""
    ws, draft, inp = five
    reads: list[str] = []
    read_meta = RunFolder.read_meta

    def counted(folder: RunFolder) -> dict[str, Any]:
        reads.append(folder.run_id)
        return read_meta(folder)

    monkeypatch.setattr(RunFolder, "read_meta", counted)
    first = go(start_run(ws, draft, run_input=inp, crash=parse_crash_spec("after:square#1")))
    assert first.status == "interrupted"
    assert reads == [first.run_id], f"expected run to read run.json once, got {reads}"
    second = go(start_recovery(ws, first.run_id))
    assert second.status == "succeeded"
    assert reads == [first.run_id] * 3, f"expected recover to read run.json twice, got {reads}"


def test_recovering_a_finished_run_returns_it_unrun(five: Any) -> None:
    """recover on a succeeded run returns the saved result without a new attempt."""
    ws, draft, inp = five
    done = go(start_run(ws, draft, run_input=inp))
    again = start_recovery(ws, done.run_id)
    assert again.process is None
    out = go(again)
    assert (out.status, out.result, out.attempt) == ("succeeded", done.result, 1)
    assert len(read_run_log(ws, done.run_id).attempts) == 1


SLOW = relay_source("slow")  # one step that sleeps INPUT["seconds"]


def test_a_second_executor_is_refused_at_once(workspace: Workspace) -> None:
    """While an attempt runs, recovering the same run fails with run-locked."""
    draft = workspace.save_draft("slow", SLOW)
    handle = start_run(workspace, draft, run_input={"seconds": 1.5})
    with pytest.raises(RunLockedError, match="single executor"):
        start_recovery(workspace, handle.run_id)
    out = go(handle)
    assert out.status == "succeeded" and out.attempt == 1
    assert len(read_run_log(workspace, handle.run_id).attempts) == 1


def test_cancel_interrupts_the_attempt(workspace: Workspace) -> None:
    """Cancelling an attempt (SIGINT first) ends it as interrupted, not failed."""
    draft = workspace.save_draft("slow", SLOW)
    handle = start_run(workspace, draft, run_input={"seconds": 30})
    folder = workspace.relay_dir("slow") / "runs" / "iteration-1-hook"
    wait_until(  # the ledger shows the step body has started
        lambda: any(e["kind"] == "step_start" for e in read_events(folder / "dbos_events.jsonl")),
        timeout=30,
        what="the step body to start",
    )
    out = handle.cancel(grace=2)
    assert out.status == "interrupted"


def test_changed_source_rejects_recovery_until_restored(five: Any) -> None:
    """Editing the draft after a crash blocks recovery with binding-changed; restoring allows it."""
    ws, draft, inp = five
    first = go(start_run(ws, draft, run_input=inp, crash=parse_crash_spec("after:load")))
    ws.save_draft("five", FIVE_STEPS.replace("x * x", "x * x * x"))
    with pytest.raises(BindingChangedError) as info:
        start_recovery(ws, first.run_id)
    message = str(info.value)
    assert "the relay source (bound " in message and "[binding-changed]" in message
    assert "relay run five" in message
    ws.save_draft("five", FIVE_STEPS)
    assert go(start_recovery(ws, first.run_id)).status == "succeeded"


def test_changed_variables_are_named(five: Any) -> None:
    """A changed manifest variable is reported as the relay's variables."""
    ws, draft, inp = five
    first = go(start_run(ws, draft, run_input=inp, crash=parse_crash_spec("after:load")))
    ws.save_draft("five", FIVE_STEPS, Manifest(variables={"region": "eu"}))
    with pytest.raises(BindingChangedError, match="the relay's variables"):
        start_recovery(ws, first.run_id)


ALWAYS_DIES = textwrap.dedent(
    """
    import os
    from dbos import DBOS

    @DBOS.step()
    async def fine():
        return 1

    @DBOS.step()
    async def doomed():
        os._exit(9)

    @DBOS.workflow(max_recovery_attempts=MAX)
    async def run(INPUT):
        await fine()
        return await doomed()
    """
)


def test_three_attempts_then_the_budget_is_spent(workspace: Workspace) -> None:
    """A run that dies every time gets three attempts, then recovery is refused."""
    draft = workspace.save_draft("doomed", ALWAYS_DIES.replace("MAX", "10"))
    out = go(start_run(workspace, draft))
    assert out.status == "interrupted" and "exited with status 9" in out.error["message"]
    for n in (2, 3):
        out = go(start_recovery(workspace, out.run_id))
        assert (out.status, out.attempt) == ("interrupted", n)
        assert out.reused == [1]
    with pytest.raises(AttemptBudgetError, match="all 3 of its process attempts"):
        start_recovery(workspace, out.run_id)


def test_dbos_max_recovery_attempts_is_reported(workspace: Workspace) -> None:
    """When DBOS dead-letters the workflow, the run fails with a clear code, not a hang."""
    draft = workspace.save_draft("doomed", ALWAYS_DIES.replace("MAX", "1"))
    out = go(start_run(workspace, draft))
    out = go(start_recovery(workspace, out.run_id))
    assert out.status == "interrupted"
    out = go(start_recovery(workspace, out.run_id))
    assert out.status == "failed"
    assert out.error["code"] == "max-recovery-attempts-exceeded"
    assert "max_recovery_attempts" in out.error["message"]


def test_deadline_stops_the_run_and_blocks_recovery(workspace: Workspace) -> None:
    """A run past its deadline is stopped as failed, and recovery is refused."""
    draft = workspace.save_draft("slow", SLOW)
    out = go(start_run(workspace, draft, run_input={"seconds": 60}, deadline_s=2.0))
    assert out.status == "failed" and out.error["code"] == "deadline-exceeded"
    # a failed run is terminal: recover returns it as it was
    assert go(start_recovery(workspace, out.run_id)).status == "failed"


def test_recovery_after_the_deadline_is_refused(five: Any) -> None:
    """An interrupted run whose deadline has passed cannot be recovered."""
    ws, draft, inp = five
    crash = parse_crash_spec("after:load")
    first = go(start_run(ws, draft, run_input=inp, crash=crash, deadline_s=3.0))
    assert first.status == "interrupted"
    deadline = time.time() + 3.0
    # wall-clock deadlines can only be waited out
    wait_until(lambda: time.time() >= deadline + 0.1, 10, 0.1, what="the deadline to pass")
    with pytest.raises(DeadlinePassedError, match="deadline passed"):
        start_recovery(ws, first.run_id)


RAISES = textwrap.dedent(
    """
    from dbos import DBOS

    @DBOS.step(retries_allowed=True, max_attempts=3, interval_seconds=0.01, backoff_rate=1.0)
    async def flaky(state):
        raise ConnectionError("service down")

    @DBOS.workflow()
    async def run(INPUT):
        if INPUT.get("flaky"):
            await flaky(1)
        raise ValueError("amount must be positive")
    """
)


def test_an_error_raised_by_the_relay_is_terminal(workspace: Workspace) -> None:
    """A relay's own exception fails the run with a traceback of relay.py lines only."""
    draft = workspace.save_draft("raises", RAISES)
    out = go(start_run(workspace, draft))
    assert out.status == "failed" and out.exit_code == 1
    assert out.error["code"] == "relay-raised"
    assert "ValueError: amount must be positive" in out.error["message"]
    tb = out.error["traceback"]
    assert 'File "relay.py", line 12, in run' in tb
    assert "site-packages" not in tb and "relay_notebook" not in tb
    again = go(start_recovery(workspace, out.run_id))
    assert again.status == "failed" and again.attempt == 1


def test_step_retries_are_recorded_with_their_errors(workspace: Workspace) -> None:
    """Each failed try of a retried step appears in the logs with its error."""
    draft = workspace.save_draft("raises", RAISES)
    out = go(start_run(workspace, draft, run_input={"flaky": True}))
    assert out.status == "failed"
    step = read_run_log(workspace, out.run_id).steps[0]
    assert step.name == "flaky" and step.status == "error"
    assert [r.step_attempt for r in step.retries] == [1, 2, 3]
    assert all(r.error == "service down" for r in step.retries)


@pytest.mark.parametrize(
    ("name", "source", "code", "field", "said"),
    [
        pytest.param(
            "big",
            "from dbos import DBOS\n\n@DBOS.workflow()\nasync def run(INPUT):\n"
            "    return {'blob': 'x' * (140 * 1024)}\n",
            "result-too-large", "message", "128 KiB",
            id="result-over-128-kib",
        ),
        pytest.param(
            "weird",
            "from dbos import DBOS\n\n@DBOS.workflow()\nasync def run(INPUT):\n    return {1, 2}\n",
            "result-not-json", "message", "",
            id="result-not-json",
        ),
        pytest.param(
            "broken",
            "from dbos import DBOS\nimport nosuchmodule_xyz\n\n@DBOS.workflow()\n"
            "async def run(INPUT):\n    return 1\n",
            "relay-import-failed", "traceback", 'File "relay.py", line 2',
            id="import-error-with-its-line",
        ),
    ],
)  # fmt: skip
def test_a_relay_that_cannot_finish_fails_clearly(
    workspace: Workspace, name: str, source: str, code: str, field: str, said: str
) -> None:
    """A result over 128 KiB of JSON, a result JSON cannot hold, a top level that raises: the
    run fails with the error's code, and its message or traceback says what (and where)."""
    draft = workspace.save_draft(name, source)
    out = go(start_run(workspace, draft))
    assert out.status == "failed" and out.error["code"] == code
    assert said in out.error[field]


def test_a_release_runs_its_frozen_files(five: Any) -> None:
    """A run of a release uses the frozen source even after the draft changes."""
    ws, draft, inp = five
    freeze_release(draft, ws)
    ws.save_draft("five", FIVE_STEPS.replace("x * x", "x + 100"))
    out = go(start_run(ws, ws.load_draft("five"), run_input=inp, release="v1"))
    assert out.result == {"squares": [0, 1, 4], "total": 5}
    assert read_run_log(ws, out.run_id).run.release["version"] == 1


def test_a_tampered_release_does_not_run(five: Any) -> None:
    """A release whose files changed is refused before any process starts."""
    ws, draft, inp = five
    release, _ = freeze_release(draft, ws)
    frozen = release.folder / "relay.py"
    frozen.chmod(0o644)
    frozen.write_text(FIVE_STEPS + "\n# edited\n")
    with pytest.raises(ReleaseTamperedError, match=r"relay\.py: checksum changed"):
        start_run(ws, ws.load_draft("five"), run_input=inp, release="v1")
    assert not (ws.relay_dir("five") / "runs").exists() or not any(
        (ws.relay_dir("five") / "runs").iterdir()
    )


LOGS = textwrap.dedent(
    """
    from dbos import DBOS

    @DBOS.step()
    async def hello(x):
        DBOS.logger.info(f"hello from step {x}")
        return x

    @DBOS.workflow()
    async def run(INPUT):
        DBOS.logger.info("workflow says hi")
        return await hello(1)
    """
)


def test_dbos_logger_records_land_in_the_events_with_ids(workspace: Workspace) -> None:
    """DBOS.logger lines from the relay are events tagged with run, attempt, workflow and step."""
    out = go(start_run(workspace, workspace.save_draft("logs", LOGS)))
    folder = workspace.relay_dir("logs") / "runs" / "iteration-1-hook"
    logs = [e for e in read_events(folder / "dbos_events.jsonl") if e["kind"] == "log"]
    assert [(e["message"], e["workflow_id"], e["step_id"]) for e in logs] == [
        ("workflow says hi", out.run_id, None),
        ("hello from step 1", out.run_id, 1),
    ]
    assert all(e["run_id"] == out.run_id and e["attempt"] == 1 for e in logs)
    assert logs[1]["step_attempt"] == 1


ESCAPE = textwrap.dedent(
    """
    import pathlib
    from dbos import DBOS

    @DBOS.step()
    async def write(path, text):
        pathlib.Path(path).write_text(text)
        return path

    @DBOS.workflow()
    async def run(INPUT):
        await write("inside.txt", "kept")  # relative: execution/ is the working directory
        return await write(INPUT["path"], "escaped")
    """
)


def test_writes_outside_the_run_folder_fail_clearly(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """Forked or spawned, a sandboxed relay writes in its run folder, and a write elsewhere
    fails with the same clear error."""
    _, workspace = confined
    outside = tmp_path / "outside.txt"
    out = go(
        start_run(workspace, workspace.save_draft("esc", ESCAPE), run_input={"path": str(outside)})
    )
    assert out.status == "failed"
    # the sandbox's root has no such folder (the test's tmp_path is under the host's /tmp)
    denied = ("Read-only file system", "Permission denied", "No such file or directory")
    assert any(d in out.error["message"] for d in denied)
    assert "writes only inside its run folder" in out.error["message"]
    assert not outside.exists()
    folder = workspace.relay_dir("esc") / "runs" / "iteration-1-hook"
    assert (folder / "execution" / "inside.txt").read_text() == "kept"
    assert read_run_log(workspace, out.run_id).attempts[0].status == "failed"
    assert folder.joinpath("run.json").read_text().count('"confined": true') == 1


def test_the_vault_folder_is_hidden_from_the_relay(confined: tuple[str, Workspace]) -> None:
    """A sandboxed relay, forked or spawned, cannot read the workspace's vault folder."""
    _, workspace = confined
    vault = workspace.home / ".relay_vault"
    vault.mkdir(parents=True)
    (vault / "secrets.json").write_text('{"API_KEY": "s3cr3t"}')
    source = (
        "import os\nfrom dbos import DBOS\n\n@DBOS.step()\nasync def peek(p):\n"
        "    return os.path.exists(p)\n\n@DBOS.workflow()\nasync def run(INPUT):\n"
        "    return {'seen': await peek(INPUT['vault'])}\n"
    )
    out = go(
        start_run(workspace, workspace.save_draft("peek", source), run_input={"vault": str(vault)})
    )
    assert out.status == "succeeded" and out.result == {"seen": False}  # not in its root


def test_without_confinement_the_run_goes_on(workspace: Workspace) -> None:
    """A workspace opened with confine off runs unconfined and records that in the attempt."""
    workspace = Workspace(workspace.home, confine=False)
    out = go(start_run(workspace, workspace.save_draft("logs", LOGS)))
    assert out.status == "succeeded"
    assert read_run_log(workspace, out.run_id).run.status == "succeeded"
    meta = json.loads((workspace.relay_dir("logs") / "runs/iteration-1-hook/run.json").read_text())
    assert meta["attempts"][0]["confined"] is False


FROZEN = """
import gc

from dbos import DBOS


@DBOS.step()
async def count_frozen():
    return gc.get_freeze_count()


@DBOS.workflow()
async def run(INPUT):
    return {"frozen": await count_frozen()}
"""


def test_an_attempt_keeps_what_it_made_to_start_out_of_collections(tmp_path: Path) -> None:
    """A spawned attempt freezes its start-up heap (imports, the relay, DBOS's launch) before
    the workflow runs, so a long relay's full collections do not walk it (about 50 ms each in a
    1,500-step loop, measured); a spawned child has no warm parent to have frozen anything."""
    ws = Workspace(tmp_path / "relays", warm_start=False)
    out = go(start_run(ws, ws.save_draft("frozen", FROZEN)))
    assert out.status == "succeeded", out.error
    assert out.result["frozen"] > 10_000  # DBOS and SQLAlchemy alone are tens of thousands
