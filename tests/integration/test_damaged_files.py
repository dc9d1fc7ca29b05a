"""Damaged files end in coded lines: real runs, real damage, the ``relay`` CLI as a process.

A run database that is not a database, ``run.lock`` replaced by a folder, a garbled
``RELEASE.json``, a read-only workspace (a tmpfs remounted read-only: chmod does not stop
root), a run whose run.json was deleted, and REST requests with names longer than the file
system takes: each ends in one ``relay: error: ... [code]`` line (or a 4xx body), never
``[internal-error]``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_disk_full import relay, statuses
from tests.integration.test_rest_api import Server, start_server, stop_server
from tests.mounts import read_only, tmpfs
from tests.relays import relay_path


def coded(proc: object, code: str) -> str:
    """The command failed with one coded line ending ``[code]``: no traceback, no bug."""
    err = proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode in (1, 2), err  # type: ignore[attr-defined]
    assert "Traceback" not in err and "[internal-error]" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("relay: error: ") and last.endswith(f"[{code}]"), err
    return str(last)


@pytest.fixture(scope="module")
def _made_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The workspace of ``home``, made once for the module: (the workspace, a copy of it as it
    was). A run folder names its workspace by absolute path, so each test gets the copy back at
    the same path, not a copy elsewhere."""
    base = tmp_path_factory.mktemp("damaged")
    home, kept = base / "relays", base / "kept"
    assert relay(home, "publish", str(relay_path("five"))).returncode == 0
    assert relay(home, "run", "five", "--input", '{"n": 2}').returncode == 0
    for extra in ((), ("--release", "v1")):
        proc = relay(home, "run", "five", "--input", '{"n": 2}', "--crash", "after:fetch", *extra)
        assert proc.returncode == 3, proc.stderr
    shutil.copytree(home, kept, symlinks=True)
    return home, kept


@pytest.fixture
def home(_made_home: tuple[Path, Path]) -> Path:
    """A workspace with relay five published, and runs five-1 (succeeded), five-2
    (interrupted, a draft's) and five-3 (interrupted, of release v1): the module's workspace as
    it was when it was made."""
    home, kept = _made_home
    for frozen in home.glob("*/releases/*"):  # a release's folder is read-only, as published
        if frozen.is_dir():
            frozen.chmod(0o755)
    shutil.rmtree(home)
    shutil.copytree(kept, home, symlinks=True)
    return home


def run_dir(home: Path, n: int) -> Path:
    return home / "five" / "runs" / f"iteration-{n}-hook"


def test_logs_of_a_run_whose_database_is_not_a_database_is_one_coded_line(home: Path) -> None:
    """logs names the database as damaged; recover refuses with ``[checkpoints-lost]``."""
    database = run_dir(home, 2) / ".relay_dbos" / "dbos.sqlite"
    database.write_bytes(b"not a database, " * 400)
    line = coded(relay(home, "logs", "five-2"), "run-record-damaged")
    assert str(database) in line
    assert str(database) in coded(relay(home, "recover", "five-2"), "checkpoints-lost")


def test_a_run_lock_replaced_by_a_folder_is_one_coded_line(home: Path) -> None:
    """recover and delete name run.lock as damaged; the run is left as it was."""
    lock = run_dir(home, 2) / "run.lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    for args in (("recover", "five-2"), ("delete", "five-2")):
        assert str(lock) in coded(relay(home, *args), "run-record-damaged")
    assert statuses(home)["five-2"] == "interrupted"
    lock.rmdir()
    assert relay(home, "recover", "five-2").returncode == 0


def test_a_garbled_release_file_is_one_coded_line(home: Path) -> None:
    """verify, run --release and recover of the release's run name RELEASE.json as tampered."""
    meta = next((home / "five" / "releases").glob("*/RELEASE.json"))
    meta.parent.chmod(0o755)
    meta.chmod(0o644)
    original = meta.read_bytes()
    meta.write_text('{"relay": "five", "version": ')
    for args in (("verify", "five"), ("run", "five", "--release", "v1"), ("recover", "five-3")):
        assert str(meta) in coded(relay(home, *args), "release-tampered")
    meta.write_bytes(original)
    assert relay(home, "verify", "five").returncode == 0
    assert relay(home, "recover", "five-3").returncode == 0


def test_a_run_whose_run_json_is_gone_is_listed_damaged(home: Path) -> None:
    """runs (text and JSON) list it ``damaged`` naming run.json; logs and recover say so; it
    can still be deleted, leaving no lock file."""
    meta = run_dir(home, 2) / "run.json"
    meta.unlink()
    assert statuses(home) == {"five-1": "succeeded", "five-2": "damaged", "five-3": "interrupted"}
    listed = json.loads(relay(home, "runs", "--json").stdout)
    assert str(meta) in next(r["problem"] for r in listed if r["run_id"] == "five-2")
    text = relay(home, "runs").stdout
    assert any("five-2" in line and "damaged" in line for line in text.splitlines()), text
    for command in ("logs", "recover"):
        assert str(meta) in coded(relay(home, command, "five-2"), "run-record-damaged")
    deleted = relay(home, "delete", "five-2")
    assert deleted.returncode == 0, deleted.stderr
    assert list(run_dir(home, 2).iterdir()) == [] and "five-2" not in statuses(home)


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "64m") as where:
        yield where


def test_a_read_only_workspace_is_named_as_read_only(mounted: Path) -> None:
    """run, recover, fork, delete and publish on a workspace remounted read-only each say
    ``[workspace-read-only]``; read-write again, nothing had changed and recover works."""
    home = mounted / "relays"
    assert relay(home, "check", str(relay_path("five"))).returncode == 0
    assert relay(home, "run", "five", "--input", '{"n": 2}').returncode == 0
    crashed = relay(home, "run", "five", "--input", '{"n": 2}', "--crash", "after:fetch")
    assert crashed.returncode == 3, crashed.stderr
    before = statuses(home)
    read_only(mounted, True)
    try:
        for args in (
            ("run", "five", "--input", '{"n": 2}'),
            ("recover", "five-2"),
            ("fork", "five-1", "--from", "add#2"),
            ("delete", "five-1"),
            ("delete", "five", "--force"),
            ("publish", "five"),
        ):
            assert str(home) in coded(relay(home, *args), "workspace-read-only"), args
        assert statuses(home) == before
    finally:
        read_only(mounted, False)
    assert relay(home, "recover", "five-2").returncode == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A Jupyter server over a workspace with one run (five-1)."""
    root = tmp_path_factory.mktemp("long") / "root"
    root.mkdir()
    home = root / "relays"
    assert relay(home, "check", str(relay_path("five"))).returncode == 0
    assert relay(home, "run", "five", "--input", '{"n": 1}').returncode == 0
    srv = start_server(root)
    try:
        yield srv
    finally:
        stop_server(srv)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("where", ["file path", "workspace"])
def test_rest_answers_a_60000_character_name_with_a_coded_4xx(server: Server, where: str) -> None:
    """A file path or ``?workspace=`` of 60,000 characters is a coded 4xx answer, not a 500."""
    long = "a" * 60_000
    if where == "file path":
        reply = server.call(
            "GET", "/runs/{run_id}/files/{path}", {"run_id": "five-1", "path": long}
        )
    else:
        reply = server.call("GET", "/relays", query=f"?workspace={long}")
    assert 400 <= reply.status < 500, reply.body
    assert reply.body["error"]["code"] != "internal-error"
    assert reply.body["error"]["message"]
