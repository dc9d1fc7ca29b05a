"""A full disk is one coded line: a real tmpfs holds the workspace, filled before and during runs.

Each command on a full disk ends with ``relay: error: ... [disk-full]`` naming the folder,
never ``[internal-error]``; a run the disk stopped is ``interrupted`` (never ``running``
without a process), no run folder is left without its run.json, and once space is freed
``relay recover`` finishes the run from its checkpoints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mounts import fill, tmpfs
from tests.polling import wait_until
from tests.relays import relay_path

# a step that fills the disk it writes on (once: a recovery finds its marker and goes on)
FILLER = textwrap.dedent(
    """
    import os
    from dbos import DBOS

    @DBOS.step()
    def fill():
        if os.path.exists("filled"):
            return "already"
        open("filled", "w").close()
        with open("filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(bytes(65536))
            except OSError:
                pass
        return "filled"

    @DBOS.step()
    def after(how):
        return {"after": how}

    @DBOS.workflow()
    async def run(INPUT):
        return after(fill())
    """
)


def relay(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``relay --home HOME ARGS...`` in a fresh interpreter, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "RELAY_DEBUG": ""},
        timeout=timeout,
    )


def assert_disk_full(proc: subprocess.CompletedProcess[str], folder: Path) -> str:
    """The command failed with one coded ``[disk-full]`` line naming ``folder``: no traceback."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr and "[internal-error]" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: error: ") and last.endswith("[disk-full]"), proc.stderr
    assert str(folder) in last, last
    return last


def statuses(home: Path) -> dict[str, str]:
    proc = relay(home, "runs", "--json")
    assert proc.returncode == 0, proc.stderr
    return {r["run_id"]: r["status"] for r in json.loads(proc.stdout)}


def folders_without_record(home: Path) -> list[Path]:
    """Run folders of any relay that lack their run.json."""
    return [p for p in home.glob("*/runs/iteration-*-hook") if not (p / "run.json").is_file()]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, mounted for this test alone."""
    with tmpfs(tmp_path / "disk", "16m") as where:
        yield where


def test_run_on_a_nearly_full_disk_is_one_coded_line(disk: Path) -> None:
    """With 0, 16, 64 or 256 KiB free, ``relay run`` says ``[disk-full]`` naming the workspace;
    no run folder, nothing ``running``; with the space back the same command succeeds (once,
    after all four: none of them left anything in its way)."""
    home = disk / "relays"
    assert relay(home, "check", str(relay_path("five"))).returncode == 0
    for free_kib in (0, 16, 64, 256):
        filler = fill(disk, leave=free_kib * 1024)
        proc = relay(home, "run", "five", "--input", '{"n": 2}')
        assert_disk_full(proc, home)
        assert folders_without_record(home) == [], free_kib
        assert "running" not in statuses(home).values(), free_kib
        filler.unlink()
    again = relay(home, "run", "five", "--input", '{"n": 2}', "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["result"] == {"total": 10}


def nap_filled_in_its_step(
    home: Path, disk: Path
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """`relay run nap` (a 2 s step) with ``disk`` filled while its step sleeps: the command's
    end, the run's ledger and the filler (delete it to free the disk)."""
    cmd = [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "run", "nap"]
    run = subprocess.Popen(
        [*cmd, "--input", '{"seconds": 2}'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RELAY_DEBUG": ""},
    )
    ledger = home / "nap" / "runs" / "iteration-1-hook" / "dbos_events.jsonl"
    wait_until(lambda: ledger.is_file() and "step_start" in ledger.read_text(), 60)
    filler = fill(disk)
    out, err = run.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, run.returncode, out, err), ledger, filler


def test_a_disk_filled_during_a_step_leaves_the_run_interrupted(disk: Path) -> None:
    """A filler written while the step sleeps: the run ends ``interrupted`` with one
    ``[disk-full]`` line naming its folder; freed, ``relay recover`` finishes it."""
    home = disk / "relays"
    assert relay(home, "check", str(relay_path("nap"))).returncode == 0
    proc, ledger, filler = nap_filled_in_its_step(home, disk)
    assert_disk_full(proc, ledger.parent)
    assert "relay recover nap-1" in proc.stderr
    record = json.loads((ledger.parent / "run.json").read_text())
    assert record["status"] == "interrupted" and record["error"]["code"] == "disk-full"
    assert statuses(home) == {"nap-1": "interrupted"}
    filler.unlink()
    recovered = relay(home, "recover", "nap-1", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["result"] == {"slept": 2}


def test_a_step_that_fills_the_disk_stops_its_run_recoverably(disk: Path, tmp_path: Path) -> None:
    """The relay's own step fills the disk: its checkpoint cannot be written, the run is
    ``interrupted`` (not failed), and after the filler is deleted recover succeeds."""
    home = disk / "relays"
    source = tmp_path / "filler.py"
    source.write_text(FILLER)
    assert relay(home, "check", str(source)).returncode == 0
    proc = relay(home, "run", "filler")
    folder = home / "filler" / "runs" / "iteration-1-hook"
    assert_disk_full(proc, folder)
    assert statuses(home) == {"filler-1": "interrupted"}
    (folder / "execution" / "filler").unlink()
    recovered = relay(home, "recover", "filler-1", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["result"] == {"after": "already"}


def test_every_command_on_a_full_disk_is_one_coded_line(disk: Path, tmp_path: Path) -> None:
    """check (save), publish, recover, fork and send on a full disk each end in ``[disk-full]``
    and change nothing; freed, the interrupted run recovers and the waiting run takes the
    message."""
    home = disk / "relays"
    for name in ("five", "gate"):
        assert relay(home, "check", str(relay_path(name))).returncode == 0
    assert relay(home, "run", "five", "--input", '{"n": 2}').returncode == 0
    crashed = relay(home, "run", "five", "--input", '{"n": 2}', "--crash", "after:fetch")
    assert crashed.returncode == 3, crashed.stderr
    assert relay(home, "run", "gate").returncode == 5  # waits for a message on "go"
    before = statuses(home)
    assert before == {"five-1": "succeeded", "five-2": "interrupted", "gate-1": "waiting"}
    copy = tmp_path / "nap.py"
    copy.write_text(relay_path("nap").read_text())
    filler = fill(disk)
    for args in (
        ("check", str(copy)),
        ("publish", "five"),
        ("recover", "five-2"),
        ("fork", "five-1", "--from", "add#2", "--set", "fetch#2=5"),
        ("send", "gate-1", "go", "5"),
    ):
        line = assert_disk_full(relay(home, *args), home)
        assert "[internal-error]" not in line, args
    assert statuses(home) == before and folders_without_record(home) == []
    filler.unlink()
    recovered = relay(home, "recover", "five-2", "--json")
    assert recovered.returncode == 0 and json.loads(recovered.stdout)["result"] == {"total": 10}
    sent = relay(home, "send", "gate-1", "go", "5", "--json")
    assert sent.returncode == 0, sent.stderr
    assert statuses(home)["gate-1"] == "succeeded"
