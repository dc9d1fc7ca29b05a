"""A full workspace disk for runs on PostgreSQL: the workspace's files fail, not the database.

The run's checkpoints live in a real PostgreSQL server (the session's ``postgres``), its
folder on a real 16 MiB tmpfs (``tests.mounts``) filled to the last byte: before the run,
between its record and its attempt, and while a step runs. Each ``relay run`` ends with one
``[disk-full]`` line naming the folder; no run is left ``running`` (or ``pending``) with no
process, and once the filler is deleted ``relay recover`` finishes the run from its checkpoints
in PostgreSQL. (A PostgreSQL server whose own disk is full is not tested here: the kit reads
its ``53100`` as ``disk-full`` too, see ``errors.storage``.)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay_notebook.runner.fault_points import START_POINTS
from tests.integration.test_disk_full import (
    assert_disk_full,
    folders_without_record,
    nap_filled_in_its_step,
    relay,
    statuses,
)
from tests.integration.test_disk_full_start import run_filled_at
from tests.mounts import fill, tmpfs
from tests.relays import relay_path


@pytest.fixture(scope="module")
def _checked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace where ``relay check`` saved ``five`` and ``nap``, made once for the module
    (their drafts: files that name no path, so a copy is the same workspace elsewhere)."""
    home = tmp_path_factory.mktemp("checked") / "relays"
    for name in ("five", "nap"):
        assert relay(home, "check", str(relay_path(name))).returncode == 0
    return home


@pytest.fixture
def disk(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch, _checked: Path
) -> Iterator[Path]:
    """A 16 MiB tmpfs, mounted for this test alone, with ``five`` and ``nap`` saved on it; the
    ``relay`` commands run on ``database_url`` (RELAY_DATABASE_URL)."""
    monkeypatch.setenv("RELAY_DATABASE_URL", database_url)
    with tmpfs(tmp_path / "disk", "16m") as where:
        shutil.copytree(_checked, where / "relays")
        yield where


def test_a_postgres_run_on_a_full_disk_is_one_coded_line(disk: Path) -> None:
    """Filled before the run: ``[disk-full]`` naming the workspace, no run made; freed, the
    same command runs on PostgreSQL."""
    home = disk / "relays"
    filler = fill(disk)
    assert_disk_full(relay(home, "run", "five", "--input", '{"n": 2}'), home)
    assert statuses(home) == {} and folders_without_record(home) == []
    filler.unlink()
    again = relay(home, "run", "five", "--input", '{"n": 2}', "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["result"] == {"total": 10}
    assert json.loads((home / "five/runs/iteration-1-hook/run.json").read_text())["database"]
    assert list(home.rglob("reserve")) == []  # a run's reserves go when its attempt ends


@pytest.mark.parametrize("point", [p for p in START_POINTS if p != "attempt:database"])
def test_a_disk_filled_before_a_postgres_runs_attempt_leaves_it_interrupted(
    disk: Path, point: str
) -> None:
    """Filled after run.json, before the attempt's folder, or after run.json says attempt 1
    runs (the database is PostgreSQL's: the child makes none): one ``[disk-full]`` line naming
    the run's folder, the run ``interrupted``; freed, ``relay recover`` finishes it."""
    home = disk / "relays"
    proc, filler = run_filled_at(home, disk, point)
    folder = home / "five" / "runs" / "iteration-1-hook"
    assert "relay recover five-1" in assert_disk_full(proc, folder)
    record = json.loads((folder / "run.json").read_text())
    assert record["status"] == "interrupted" and record["error"]["code"] == "disk-full", record
    assert statuses(home) == {"five-1": "interrupted"} and folders_without_record(home) == []
    assert list(home.rglob("reserve")) == []  # the room kept to record it is the disk's again
    filler.unlink()
    recovered = relay(home, "recover", "five-1", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["result"] == {"total": 10}


def test_a_disk_filled_during_a_postgres_runs_step_leaves_it_interrupted(disk: Path) -> None:
    """The workspace's disk fills while a step sleeps (its checkpoint still goes to
    PostgreSQL): one ``[disk-full]`` line naming the run's folder, the run ``interrupted``;
    freed, ``relay recover`` finishes it without running the step again."""
    home = disk / "relays"
    proc, ledger, filler = nap_filled_in_its_step(home, disk)
    assert_disk_full(proc, ledger.parent)
    assert statuses(home) == {"nap-1": "interrupted"} and folders_without_record(home) == []
    filler.unlink()
    recovered = relay(home, "recover", "nap-1", "--json")
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout)["result"] == {"slept": 2}
