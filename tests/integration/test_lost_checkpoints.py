"""A run whose DBOS database was damaged after a crash is refused, never silently re-run."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from test_runner import CALLS, go, side_effects

from relay_notebook.errors import CheckpointsLostError
from relay_notebook.history.preview import preview_recovery
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.runner import parse_crash_spec, start_recovery, start_run
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

FIVE_STEPS = relay_source("five_steps")
ONCE = Counter(["load", "square 0", "square 1", "square 2", "total"])
RESULT = {"squares": [0, 1, 4], "total": 5}
INPUT = {"ledger": "effects.log", "n": 3}


def _wal(folder: RunFolder) -> Path:
    return folder.database.with_name(folder.database.name + "-wal")


def _remove(path: Path) -> None:
    if path.exists():
        path.unlink()


def delete_database(folder: RunFolder, rng: random.Random) -> None:
    for suffix in ("", "-wal", "-shm"):
        _remove(folder.database.with_name(folder.database.name + suffix))


def delete_wal(folder: RunFolder, rng: random.Random) -> None:
    _remove(_wal(folder))


def truncate_wal(folder: RunFolder, rng: random.Random) -> None:
    # anywhere before the last frame: at least the newest commit (a checkpoint) is cut off
    wal = _wal(folder)
    size = wal.stat().st_size
    os.truncate(wal, rng.randrange(32, size - 4096 - 24))


def garble_wal(folder: RunFolder, rng: random.Random) -> None:
    wal = _wal(folder)
    data = bytearray(wal.read_bytes())
    at = rng.randrange(0, len(data) - 64)
    for i in range(at, at + 64):
        data[i] ^= 0xFF
    wal.write_bytes(bytes(data))


def empty_database(folder: RunFolder, rng: random.Random) -> None:
    delete_database(folder, rng)
    folder.database.write_bytes(b"")


def garble_database(folder: RunFolder, rng: random.Random) -> None:
    # first move the WAL into the file (else SQLite reads the newest page 1 from the WAL)
    conn = sqlite3.connect(folder.database)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(folder.database.read_bytes())
    data[:100] = bytes(rng.randrange(256) for _ in range(100))  # the SQLite header
    folder.database.write_bytes(bytes(data))


def delete_dbos_folder(folder: RunFolder, rng: random.Random) -> None:
    delete_database(folder, rng)
    folder.dbos_dir.rmdir()


CORRUPTIONS: list[Callable[[RunFolder, random.Random], None]] = [
    delete_database, delete_wal, truncate_wal, garble_wal, empty_database, garble_database,
    delete_dbos_folder,
]  # fmt: skip


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__)
def test_a_damaged_database_is_refused_and_rerun_only_when_accepted(
    workspace: Workspace, corrupt: Callable[[RunFolder, random.Random], None], seed: int
) -> None:
    """Damage after a crash refuses recovery naming the steps; accepting runs them again."""
    rng = random.Random(f"{corrupt.__name__}-{seed}")
    k = rng.randrange(2, 6)  # crash after the k-th step's checkpoint
    name = CALLS[k - 1]
    crash = parse_crash_spec(f"after:{name}#{CALLS[:k].count(name)}")
    draft = workspace.save_draft("five", FIVE_STEPS)
    first = go(start_run(workspace, draft, run_input=INPUT, crash=crash))
    assert first.status == "interrupted" and first.executed == list(range(1, k + 1))
    folder = find_run(workspace, first.run_id)
    corrupt(folder, rng)
    with pytest.raises(CheckpointsLostError) as refused:
        start_recovery(workspace, first.run_id)
    assert refused.value.code == "checkpoints-lost"
    assert "--accept-lost-checkpoints" in refused.value.message
    assert str(folder.database) in refused.value.message
    assert "load (function id 1)" in refused.value.message or "lacks" in refused.value.message
    before = side_effects(workspace, first.run_id)
    assert before == Counter(c if c != "square" else f"square {i}" for i, c in _bodies(k))
    assert len(find_run(workspace, first.run_id).read_meta()["attempts"]) == 1  # none used
    second = go(start_recovery(workspace, first.run_id, accept_lost_checkpoints=True))
    assert second.status == "succeeded" and second.result == RESULT
    after = side_effects(workspace, first.run_id)
    assert set(after) == set(ONCE) and max(after.values()) == 2  # lost steps ran once more
    events = [json.loads(line) for line in folder.events.read_text().splitlines()]
    accepted = [e for e in events if e["kind"] == "checkpoints_lost_accepted"]
    assert len(accepted) == 1 and accepted[0]["function_ids"]


def _bodies(k: int) -> list[tuple[int, str]]:
    """The (square index, call) of the first k step bodies of FIVE_STEPS."""
    return [(i - 1, c) for i, c in enumerate(CALLS[:k])]


def test_relay_recover_refuses_then_accepts_on_the_command_line(workspace: Workspace) -> None:
    """`relay recover` exits 1 with [checkpoints-lost]; --accept-lost-checkpoints re-runs."""
    draft = workspace.save_draft("five", FIVE_STEPS)
    crash = parse_crash_spec("after:total")
    first = go(start_run(workspace, draft, run_input=INPUT, crash=crash))
    delete_database(find_run(workspace, first.run_id), random.Random(0))
    preview = preview_recovery(workspace, first.run_id)  # what recover would do, said before
    assert preview.outcome == "stops" and preview.reason["code"] == "checkpoints-lost"
    cli = [sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home), "recover"]
    refused = subprocess.run([*cli, first.run_id], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and refused.stderr.strip().endswith("[checkpoints-lost]")
    assert "total (function id 5)" in refused.stderr
    assert side_effects(workspace, first.run_id) == ONCE
    accepted = subprocess.run(
        [*cli, first.run_id, "--accept-lost-checkpoints", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["result"] == RESULT
    assert side_effects(workspace, first.run_id) == ONCE + ONCE


def test_checkpoints_deleted_from_postgresql_are_refused(
    workspace: Workspace, database_url: str
) -> None:
    """On PostgreSQL, checkpoint rows deleted after a crash refuse recovery the same way."""
    import psycopg

    from relay_notebook.runner.backend import resolve_backend

    backend = resolve_backend(database_url)
    draft = workspace.save_draft("five", FIVE_STEPS)
    crash = parse_crash_spec("after:square#2")
    first = go(start_run(workspace, draft, run_input=INPUT, crash=crash, backend=backend))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM dbos.operation_outputs WHERE workflow_uuid = %s AND function_id = 2",
            (first.run_id,),
        )
    with pytest.raises(CheckpointsLostError, match=r"square \(function id 2\)"):
        start_recovery(workspace, first.run_id, backend=backend)
    second = go(
        start_recovery(workspace, first.run_id, backend=backend, accept_lost_checkpoints=True)
    )
    assert second.status == "succeeded" and second.result == RESULT
    assert side_effects(workspace, first.run_id)["square 0"] == 2
