"""A run's SQLite side files (``-wal``, ``-shm``) are the attempt's own, never a reader's.

SQLite run as root creates a missing side file as root and gives it to the database's owner a
moment later; a sandboxed attempt that opened it in that moment got a read-only database
(``attempt to write a readonly database`` at DBOS's launch: an ``interrupted`` run, about one
attempt in a few hundred while a view or a command read the run). So the attempt makes its side
files before DBOS launches and keeps them while it lives, a reader never makes them, and a
process that writes a run's file as root gives it side files of the owner's first
(``record.store``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from relay_notebook.record.store import give_side_files, open_database
from relay_notebook.runner.dbos_template import make_template
from relay_notebook.runner.fault_points import ENV_STOP_AT, PREPARED_POINT
from relay_notebook.runner.sandbox import sandbox_uid
from tests.integration.test_cli import relay
from tests.integration.test_disk_full_start import stopped_at
from tests.polling import wait_until
from tests.relays import relay_path

SIDES = ("dbos.sqlite-wal", "dbos.sqlite-shm")


def owners(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_uid for p in sorted(folder.iterdir())}


def test_an_attempt_holds_its_side_files_from_before_dbos_launches(tmp_path: Path) -> None:
    """Stopped after its database is made and before DBOS launches, the attempt has its
    ``-wal`` and ``-shm`` already, owned as the database is; a live read of the run then
    creates nothing and changes no owner; let go, the run succeeds."""
    home = tmp_path / "relays"
    assert relay(home, "check", str(relay_path("five"))).returncode == 0
    cmd = [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "run", "five"]
    # the mark tells this test's stopped attempt from any other's
    env = {**os.environ, "RELAY_DEBUG": "", ENV_STOP_AT: PREPARED_POINT, "TEST_MARK": str(home)}
    run = subprocess.Popen(
        [*cmd, "--input", '{"n": 2}', "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    pid = None
    try:
        pid = wait_until(
            lambda: stopped_at(PREPARED_POINT, f"TEST_MARK={home}"), 120, what="the attempt stopped"
        )
        assert pid is not None
        dbos = home / "five" / "runs" / "iteration-1-hook" / ".relay_dbos"
        before = owners(dbos)
        assert set(SIDES) <= set(before), before
        assert {before[side] for side in SIDES} == {before["dbos.sqlite"]}, before
        if os.geteuid() == 0:
            assert before["dbos.sqlite"] == sandbox_uid(), before  # the attempt's, not root's
        with open_database(dbos / "dbos.sqlite", live=True) as conn:
            assert conn is not None
            assert conn.execute("SELECT count(*) FROM dbos_migrations").fetchone() == (1,)
        assert owners(dbos) == before
        os.kill(pid, signal.SIGCONT)
        pid = None
        out, err = run.communicate(timeout=120)
    finally:
        if pid is not None:  # failed while it was stopped: it would stay stopped for ever
            os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err
    assert json.loads(out)["result"] == {"total": 10}


def test_a_live_reader_makes_no_side_file_and_a_writer_gets_the_owners() -> None:
    """A run's database with no side files yet (its attempt starting): a live read reads it and
    leaves no ``-wal`` or ``-shm``. ``give_side_files``, for a root process about to write
    it, makes both empty and owned as the database is; the owner then writes through them,
    and a live read sees what it wrote."""
    template = make_template()
    assert template is not None
    # beneath folders the owner may pass through (pytest's own are root's, 0700)
    with tempfile.TemporaryDirectory(prefix="relay-side-files-") as scratch:
        os.chmod(scratch, 0o755)
        _read_then_write(template, Path(scratch) / "run")


def _read_then_write(template: Path, folder: Path) -> None:
    folder.mkdir()
    database = folder / "dbos.sqlite"
    shutil.copyfile(template, database)
    owner = sandbox_uid() if os.geteuid() == 0 else os.getuid()
    if os.geteuid() == 0:
        for path in (folder, database):
            os.chown(path, owner, owner)
    with open_database(database, live=True) as conn:
        assert conn is not None
        assert conn.execute("SELECT count(*) FROM dbos_migrations").fetchone() == (1,)
    assert sorted(p.name for p in folder.iterdir()) == ["dbos.sqlite"]

    give_side_files(database)
    made = {p.name: p.stat() for p in folder.iterdir()}
    if os.geteuid() == 0:
        assert sorted(made) == ["dbos.sqlite", *sorted(SIDES)]
        assert {made[s].st_uid for s in SIDES} == {owner}
        assert {made[s].st_size for s in SIDES} == {0}
    else:  # another user's SQLite makes its side files its own: nothing to give
        assert sorted(made) == ["dbos.sqlite"]
    writer = os.fork()
    if writer == 0:  # the owner, as an attempt would be
        try:
            if os.geteuid() == 0:
                os.setgid(owner)
                os.setuid(owner)
            conn = sqlite3.connect(database, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE written (x)")
            conn.execute("COMMIT")
            os._exit(0)  # as an attempt ends: its WAL stays
        except BaseException as exc:
            os.write(2, f"the owner's write failed: {exc!r}\n".encode())
            os._exit(1)
    _, status = os.waitpid(writer, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with open_database(database, live=True) as conn:
        assert conn is not None
        assert conn.execute("SELECT count(*) FROM written").fetchone() == (0,)
    assert {p.name: p.stat().st_uid for p in folder.iterdir()} == dict.fromkeys(
        ["dbos.sqlite", *SIDES], owner
    )


def test_what_a_relay_left_in_its_database_folder_is_not_followed(tmp_path: Path) -> None:
    """``give_side_files`` in a folder the relay could write: a database that is a link makes
    nothing (whatever it points to); a side file that is a link, even a dangling one, is left
    as it is and never written through; the other side file is still made."""
    if os.geteuid() != 0:
        return  # only root gives files away; another user's SQLite makes them its own
    owner = sandbox_uid()
    target = tmp_path / "elsewhere.sqlite"
    target.write_bytes(b"")
    os.chown(target, owner, owner)
    folder = tmp_path / "run"
    folder.mkdir()
    linked = folder / "dbos.sqlite"
    linked.symlink_to(target)
    give_side_files(linked)
    assert sorted(p.name for p in folder.iterdir()) == ["dbos.sqlite"]

    linked.unlink()
    template = make_template()
    assert template is not None
    shutil.copyfile(template, linked)
    os.chown(linked, owner, owner)
    planted = folder / "dbos.sqlite-wal"
    planted.symlink_to(tmp_path / "not-there")
    give_side_files(linked)
    assert planted.is_symlink() and not (tmp_path / "not-there").exists()
    shm = folder / "dbos.sqlite-shm"
    assert shm.stat().st_uid == owner and shm.stat().st_size == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted(["dbos.sqlite", *SIDES])
