"""The warm parent's early launch: its own session, its descriptors, and no database URL."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from relay_notebook.record.backend import ENV_VAR
from relay_notebook.runner import warm_launch
from relay_notebook.runner.warm import WarmParent


def test_the_launcher_keeps_out_the_variable_the_record_names() -> None:
    """The launcher's copy of the database URL variable's name is the record's."""
    assert warm_launch.DATABASE_URL_ENV == ENV_VAR


def test_kit_files_cover_the_interpreter_and_the_kit() -> None:
    """A change to the interpreter or to any kit module makes a parent stale."""
    files = warm_launch.kit_files()
    assert os.path.realpath(sys.executable) in files
    assert str(Path(warm_launch.__file__)) in files


def test_a_launched_parent_leads_its_session_without_the_database_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spawned warm parent has its own session and never sees the database password."""
    monkeypatch.setenv(ENV_VAR, "postgresql://relay:s3cret-pw@127.0.0.1:5432/runs")
    parent = WarmParent(launched=warm_launch.launch())
    try:
        environ = Path(f"/proc/{parent.pid}/environ").read_bytes()
        assert b"s3cret-pw" not in environ and ENV_VAR.encode() not in environ
        assert os.getsid(parent.pid) == parent.pid
        assert parent.wait_ready(120) and parent.state() == "ready"
    finally:
        parent.kill()
    assert parent.process.poll() is not None


def test_a_parent_that_gives_up_before_it_is_ready_is_dead_with_its_exit_status() -> None:
    """A warm parent whose control socket closes a moment before it exits (as a failed start's
    does): waiting for it ends with it dead and its exit status known, never still "starting"
    (`relay doctor` said "still importing" of a parent that had already failed)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.set_inheritable(True)
    code = f"import os, time; os.close({theirs.fileno()}); time.sleep(1.0); raise SystemExit(1)"
    pid = os.posix_spawn(sys.executable, [sys.executable, "-c", code], dict(os.environ))
    theirs.close()
    parent = WarmParent(launched=warm_launch.Launched(pid, ours, (), warm_launch.stamp(())))
    assert parent.wait_ready(30) is False
    assert parent.state() == "dead"
    assert parent.process.poll() == 1


def test_a_folder_is_changed_by_its_modules_not_by_its_bytecode(tmp_path: Path) -> None:
    """Python's first ``__pycache__`` in a kit folder (a fresh checkout's first import) or any
    other file leaves a parent current; a module added or removed makes it stale (CI once saw
    `relay run` spawn because its parent's own imports moved a folder's time)."""
    package = tmp_path / "kit"
    package.mkdir()
    (package / "mod.py").write_text("x = 1\n", encoding="utf-8")
    files = warm_launch.kit_files_under(str(package))
    before = warm_launch.stamp(files)

    def later() -> None:  # the folder's time moves on, as a later write's would
        st = package.stat()
        os.utime(package, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))

    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (package / "notes.txt").write_text("", encoding="utf-8")
    (package / ".hidden").mkdir()
    later()
    assert warm_launch.stamps_differ(files, before) is False
    (package / "new.py").write_text("", encoding="utf-8")
    assert warm_launch.stamps_differ(files, before) is True
    (package / "new.py").unlink()
    (package / "sub").mkdir()
    later()
    assert warm_launch.stamps_differ(files, before) is True
    (package / "sub").rmdir()
    assert warm_launch.stamps_differ(files, before) is False
    (package / "mod.py").write_text("x = 22\n", encoding="utf-8")
    assert warm_launch.stamps_differ(files, before) is True
    (package / "mod.py").unlink()
    assert warm_launch.stamps_differ(files, before) is True


def test_a_parent_stays_ready_when_its_kit_gets_its_first_bytecode(tmp_path: Path) -> None:
    """A ready parent over a kit folder: a ``__pycache__`` written there keeps it ``ready``
    (its attempts are forked), a new module makes it ``stale``."""
    package = tmp_path / "kit"
    package.mkdir()
    (package / "mod.py").write_text("", encoding="utf-8")
    launched = warm_launch.launch()
    files = warm_launch.kit_files_under(str(package))
    launched.files, launched.stamps = files, warm_launch.stamp(files)
    parent = WarmParent(launched=launched)
    try:
        assert parent.wait_ready(120) and parent.state() == "ready"
        (package / "__pycache__").mkdir()
        st = package.stat()
        os.utime(package, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert parent.state() == "ready"
        (package / "other.py").write_text("", encoding="utf-8")
        assert parent.state() == "stale"
    finally:
        parent.kill()
