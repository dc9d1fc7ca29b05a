"""Confinement as root: real relays try to escape Landlock (a forked child) and bubblewrap (a
spawned one), and run.json says what held."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.record.folders import allocate_run, find_run
from relay_notebook.runner import RunOutcome, parse_crash_spec, start_recovery, start_run
from relay_notebook.runner.confine import attempt_write_rules, verify_confinement
from relay_notebook.workspace import Workspace

# Every escape a relay running as root could try; each probe records the errno it met.
ESCAPES = textwrap.dedent(
    """
    import errno, json, os, subprocess, sys
    from pathlib import Path
    from dbos import DBOS
    from agentworks import run_dir

    def outcome(action):
        try:
            action()
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
        return "done"

    def write(path, text):
        with open(path, "w") as fh:
            fh.write(text)

    @DBOS.step()
    def escape(outside):
        run = Path(run_dir).parent
        meta = json.loads((run / "run.json").read_text())
        planted = Path(run_dir) / "planted"
        planted.mkdir(exist_ok=True)
        (planted / "relay.py").write_text("PLANTED = True\\n")
        forged = dict(meta, code_dir=str(planted), max_attempts=50)
        (planted / "run.json").write_text(json.dumps(forged))
        status = open("/proc/self/status").read()
        remount = subprocess.run(["mount", "-o", "remount,bind,rw", "/"], capture_output=True)
        return {
            "caps": next(l.split()[1] for l in status.splitlines() if l.startswith("CapEff")),
            "remount": remount.returncode,
            "outside": outcome(lambda: write(outside, "escaped")),
            "tmp": outcome(lambda: write("/tmp/relay-escaped", "escaped")),
            "run.json": outcome(lambda: write(run / "run.json", json.dumps(forged))),
            "replace run.json": outcome(lambda: os.replace(planted / "run.json", run / "run.json")),
            "rename run.json": outcome(lambda: os.rename(run / "run.json", run / "old.json")),
            "plant tmp": outcome(lambda: os.symlink("/etc/passwd", run / ".run.json.tmp")),
            "lock": outcome(lambda: os.rename(run / "run.lock", run / "old.lock")),
            "spec": outcome(lambda: write(sys.argv[1], "{}")),
            "code": outcome(lambda: write(Path(__file__), "PLANTED = True\\n")),
            "trace": outcome(lambda: write(run / "relay_trace.json", "{}")),
            "other run": outcome(lambda: write(Path(INPUT_OTHER[0]) / "planted", "escaped")),
        }

    INPUT_OTHER = []

    @DBOS.workflow()
    async def run(INPUT):
        INPUT_OTHER[:] = [INPUT["other"]]
        return {"probes": escape(INPUT["outside"]), "planted": "PLANTED" in globals()}
    """
)
# EXDEV: a file of execution/ cannot be renamed onto the read-only run folder
# ENOENT: the sandbox's root holds no such path (another run, a file under the host's /tmp)
BLOCKED = {"EROFS", "EACCES", "EPERM", "EBUSY", "EXDEV", "ENOENT"}

# Looks for the supervisor by the marker in its command line, reads its environment, kills it.
SPY = textwrap.dedent(
    """
    import os, signal
    from dbos import DBOS

    @DBOS.step()
    def hunt(marker):
        seen, environ, killed = [], [], []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if marker.encode() in cmdline and int(pid) != os.getpid():
                seen.append(int(pid))
                try:
                    environ.append(open(f"/proc/{pid}/environ", "rb").read().decode())
                except (OSError, ValueError):
                    pass
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    killed.append(int(pid))
                except OSError:
                    pass
        return {"seen": seen, "environ": environ, "killed": killed}

    @DBOS.workflow()
    async def run(INPUT):
        return hunt(INPUT["marker"])
    """
)


def go(handle: Any) -> RunOutcome:
    """Wait for an attempt with a generous timeout (CI machines are slow)."""
    outcome: RunOutcome = handle.wait(120)
    return outcome


def test_a_root_relay_cannot_remount_write_control_files_or_escape(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """Remounting /, rewriting run.json, the lock, the spec, the code, another run's folder or
    files outside all fail."""
    mechanism, workspace = confined
    outside = tmp_path / "outside.txt"
    draft = workspace.save_draft("esc", ESCAPES)
    source = (draft.folder / "relay.py").read_text()
    other = allocate_run(workspace, "esc").execution
    run_input = {"outside": str(outside), "other": str(other)}
    out = go(start_run(workspace, draft, run_input=run_input))
    assert out.status == "succeeded", out.error
    probes = out.result["probes"]
    assert probes.pop("caps") == "0000000000000000"
    assert probes.pop("remount") != 0
    if probes["tmp"] == "done":  # the sandbox's /tmp is its own tmpfs, not the host's
        probes.pop("tmp")
    assert {k: v for k, v in probes.items() if v not in BLOCKED} == {}
    assert not outside.exists() and not Path("/tmp/relay-escaped").exists()
    assert list(other.iterdir()) == []
    assert (draft.folder / "relay.py").read_text() == source
    meta = find_run(workspace, out.run_id).read_meta()
    assert meta["max_attempts"] == 3 and meta["code_dir"] == str(draft.folder)
    attempt = meta["attempts"][0]
    assert attempt["confined"] is True and attempt["confinement"]["reason"] is None
    assert attempt["confinement"]["pid_namespace"] is True
    assert attempt["confinement"]["mechanism"] == mechanism


def test_recovery_runs_the_bound_code_within_the_budget_whatever_the_relay_wrote(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """After a relay tried to point run.json at its own code, recovery replays the real code."""
    _, workspace = confined
    draft = workspace.save_draft("esc", ESCAPES)
    crash = parse_crash_spec("after:escape")
    run_input = {"outside": str(tmp_path / "x"), "other": str(tmp_path)}
    first = go(start_run(workspace, draft, run_input=run_input, crash=crash))
    assert first.status == "interrupted"
    second = go(start_recovery(workspace, first.run_id))
    assert second.status == "succeeded" and second.reused == [1]
    assert second.result["planted"] is False
    meta = find_run(workspace, first.run_id).read_meta()
    assert meta["max_attempts"] == 3 and meta["code_dir"] == str(draft.folder)
    assert [a["confined"] for a in meta["attempts"]] == [True, True]


# A supervisor process with the marker in its command line (and a warm parent, forking).
SUPERVISE = textwrap.dedent(
    """
    import json, sys
    from relay_notebook.runner import start_run
    from relay_notebook.runner.warm import restart_warm_parent
    from relay_notebook.workspace import Workspace

    home, mechanism, marker = sys.argv[1:4]
    if mechanism == "landlock":
        assert restart_warm_parent().wait_ready(120)
    workspace = Workspace(home, warm_start=mechanism == "landlock")
    draft = workspace.load_draft("spy")
    out = start_run(workspace, draft, run_input={"marker": marker}).wait(120)
    print(json.dumps({"status": out.status, "result": out.result}))
    """
)


def test_a_relay_cannot_see_or_kill_its_supervisor(confined: tuple[str, Workspace]) -> None:
    """The supervisor's command line, environment and process are out of the relay's reach."""
    mechanism, workspace = confined
    workspace.save_draft("spy", SPY)
    marker = "supervisor-marker-7f3a"
    env = {**os.environ, "RELAY_TEST_PASSWORD": "hunter2-supervisor-only"}
    argv = [sys.executable, "-c", SUPERVISE, str(workspace.home), mechanism, marker]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "succeeded"
    assert doc["result"] == {"seen": [], "environ": [], "killed": []}


def test_the_cli_supervisor_is_out_of_the_relay_reach_too(workspace: Workspace) -> None:
    """`relay run` (a spawned child, under bubblewrap) hides its own command line as well."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    workspace.save_draft("spy", SPY)
    marker = "supervisor-marker-7f3a"
    argv = [
        sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home),
        "run", "spy", "--input", json.dumps({"marker": marker}), "--json",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == {"seen": [], "environ": [], "killed": []}


def test_without_confinement_run_json_says_so_and_why(workspace: Workspace) -> None:
    """Confinement turned off records confined false with the reason, and the run goes on."""
    workspace = Workspace(workspace.home, confine=False)
    source = "from dbos import DBOS\n\n@DBOS.workflow()\nasync def run(INPUT):\n    return 1\n"
    out = go(start_run(workspace, workspace.save_draft("plain", source)))
    assert out.status == "succeeded"
    attempt = find_run(workspace, out.run_id).read_meta()["attempts"][0]
    assert attempt["confined"] is False
    assert attempt["confinement"] == {
        "mechanism": None,
        "reason": "turned off by the confine setting (RELAY_CONFINE=0, RelayMagics.confine = "
        "False)",
    }


def test_the_self_check_reports_an_unconfined_process_as_unconfined(workspace: Workspace) -> None:
    """Outside bubblewrap, as root, the child's check lists what does not hold."""
    workspace.save_draft("r", "x = 1\n")
    folder = allocate_run(workspace, "r")
    folder.meta.write_text("{}")
    attempt_dir = folder.ipc / "attempt-test"
    attempt_dir.mkdir()
    report = verify_confinement(attempt_write_rules(folder, attempt_dir).check())
    assert report["confined"] is False
    assert f"{folder.meta} is writable" in report["reason"]
    assert "shares the supervisor's PID namespace" in report["reason"]
    if os.geteuid() == 0:
        assert "holds capabilities" in report["reason"]
    assert list(folder.path.glob(".relay-confinement-probe-*")) == []


def test_no_control_file_lies_beneath_a_writable_path(workspace: Workspace) -> None:
    """The write rules fit Landlock: nothing the supervisor trusts is under a writable path."""
    workspace.save_draft("r", "x = 1\n")
    folder = allocate_run(workspace, "r")
    attempt_dir = folder.ipc / "attempt-test"
    attempt_dir.mkdir()
    rules = attempt_write_rules(folder, attempt_dir)
    trusted = [*rules.protected, *rules.sealed, folder.meta, folder.lock, folder.result]
    assert [(t, w) for t in trusted for w in rules.writable if t.is_relative_to(w)] == []
    assert all(w.is_relative_to(folder.path) for w in rules.writable)
