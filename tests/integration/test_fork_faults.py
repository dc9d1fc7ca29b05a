"""`relay fork` killed inside the making of a fork: there is no fork, or `relay recover` completes
the one there is (copied steps never run again, the edit kept), or refuses it in one coded line.

Each case runs `relay` as a terminal does and makes the fork process SIGKILL itself at one of the
named points of ``runner.fault_points`` (``RELAY_TEST_KILL_AT=fork:<point>``), as a power cut
would. The relay notes each step body it runs in its run folder's ``execution/effects.log``, so
"a copied step ran again" is read off the fork's own file; the parent is checked byte for byte.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from relay_notebook.runner.fault_points import ENV_KILL_AT, FORK_POINTS
from relay_notebook.testing import PostgresServer

ROOT = Path(__file__).resolve().parents[2]


def _fuzz_source() -> str:
    """The relay ``benchmarks/bench_crash_fuzz.py`` forks (each body notes its call in
    ``effects.log``): one source for the fuzz and these tests."""
    spec = importlib.util.spec_from_file_location(
        "bench_crash_fuzz", ROOT / "benchmarks" / "bench_crash_fuzz.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.SOURCE)


SOURCE = _fuzz_source()
#: forked from add#2 with fetch#2 (copied) set to 100: fetch#1, add#1, fetch#2 are copied and
#: 0 + 100 + 20 is the result; only add#2, fetch#3 and add#3 run, each once
FORK = ("--from", "add#2", "--set", "fetch#2=100")
RESULT = {"total": 120}
FRESH = ["add 100", "fetch 2", "add 20"]


def relay(
    home: Path, *args: str, kill_at: str | None = None, database_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (ENV_KILL_AT, "RELAY_DATABASE_URL")}
    env["PYTHONPATH"] = str(ROOT)
    if kill_at is not None:
        env[ENV_KILL_AT] = kill_at
    if database_url is not None:
        env["RELAY_DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def run_folder(home: Path, run_id: str) -> Path:
    return home / "fuzz" / "runs" / f"iteration-{run_id.rsplit('-', 1)[1]}-hook"


def effects(home: Path, run_id: str) -> list[str]:
    path = run_folder(home, run_id) / "execution" / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a run folder, by its path in it."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def run_ids(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "fuzz" / "runs").iterdir())


def parent_run(home: Path, database_url: str | None = None) -> str:
    (home / "fuzz").mkdir(parents=True)
    (home / "fuzz" / "relay.py").write_text(SOURCE)
    done = relay(home, "run", "fuzz", "--input", '{"n": 3}', "--json", database_url=database_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"total": 30}
    return "fuzz-1"


@pytest.fixture(scope="module")
def _parent_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One SQLite workspace holding the finished parent run, made once for the module: (the
    workspace, a copy of it as it was). A run folder names its workspace by absolute path, so
    each test gets the copy back at the same path, not a copy elsewhere."""
    base = tmp_path_factory.mktemp("fork-faults")
    home, kept = base / "relays", base / "kept"
    parent_run(home)
    shutil.copytree(home, kept, symlinks=True)
    return home, kept


@pytest.fixture
def parent_home(_parent_home: tuple[Path, Path]) -> Path:
    """The module's workspace with its parent run ``fuzz-1`` as it was when it finished."""
    home, kept = _parent_home
    shutil.rmtree(home)
    shutil.copytree(kept, home, symlinks=True)
    return home


@pytest.fixture(scope="module")
def _pg_parent(
    tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer
) -> tuple[Path, Path, str]:
    """The same on PostgreSQL, made once for the module: (the workspace, a copy of it as it
    was, the database's name); the database is kept as it was in ``<name>_kept``, a template."""
    base = tmp_path_factory.mktemp("fork-faults-pg")
    home, kept = base / "relays", base / "kept"
    name = postgres.database_url().rsplit("/", 1)[1]
    parent_run(home, postgres.database_url(name))
    shutil.copytree(home, kept, symlinks=True)
    _admin(postgres, f'CREATE DATABASE "{name}_kept" TEMPLATE "{name}"')
    return home, kept, name


def _admin(postgres: PostgresServer, *statements: str) -> None:
    """Run ``statements`` on the server's maintenance database (``postgres``)."""
    import psycopg

    with psycopg.connect(postgres.database_url("postgres"), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def pg_parent_home(
    _pg_parent: tuple[Path, Path, str], postgres: PostgresServer
) -> tuple[Path, str]:
    """(the workspace, its database's URL) with the parent run ``fuzz-1`` on PostgreSQL as it was
    when it finished: its folder copied back, its database made again from the template."""
    home, kept, name = _pg_parent
    shutil.rmtree(home)
    shutil.copytree(kept, home, symlinks=True)
    _admin(
        postgres,
        f'DROP DATABASE "{name}" WITH (FORCE)',
        f'CREATE DATABASE "{name}" TEMPLATE "{name}_kept"',
    )
    return home, postgres.database_url(name)


def check_killed_fork(
    home: Path, point: str, database_url: str | None = None, *, made: bool = False
) -> None:
    """Kill `relay fork` at ``point``; then no fork, or one `relay recover` finishes right.
    ``made``: ``home`` already holds the parent run (``parent_home``, ``pg_parent_home``)."""
    parent = "fuzz-1" if made else parent_run(home, database_url)
    before = snapshot(run_folder(home, parent))
    killed = relay(home, "fork", parent, *FORK, "--json", kill_at=point, database_url=database_url)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if point == "fork:planned":  # nothing was written yet: no fork at all
        assert run_ids(home) == ["iteration-1-hook"]
        return
    meta = json.loads((run_folder(home, "fuzz-2") / "run.json").read_text())
    assert meta["status"] == ("pending" if point == "fork:published" else "creating"), meta
    if meta["status"] == "creating":  # `relay logs` says what it is and what to type
        shown = relay(home, "logs", "fuzz-2", database_url=database_url).stdout.splitlines()
        assert shown[0].startswith("run fuzz-2: creating"), shown  # (DBOS's status once forked)
        assert shown[1:2] == [
            f"  a fork of {parent} from {FORK[1]}, still being made when its command stopped: "
            "relay recover fuzz-2 finishes making it and runs it; relay delete fuzz-2 drops it",
        ], shown
    recovered = relay(home, "recover", "fuzz-2", "--json", database_url=database_url)
    assert recovered.returncode == 0, recovered.stderr
    outcome = json.loads(recovered.stdout)
    assert outcome["status"] == "succeeded" and outcome["result"] == RESULT, outcome
    assert effects(home, "fuzz-2") == FRESH  # no copied step ran, each fresh one once
    meta = json.loads((run_folder(home, "fuzz-2") / "run.json").read_text())
    assert meta["fork"]["edits"] == {"input": False, "outputs": ["fetch#2"]}
    assert "fork_creation" not in meta
    assert snapshot(run_folder(home, parent)) == before  # the parent, byte for byte
    assert effects(home, parent) == ["fetch 0", "add 0", "fetch 1", "add 10", "fetch 2", "add 20"]


@pytest.mark.parametrize("point", FORK_POINTS)
def test_a_fork_killed_while_it_is_made_is_completed_by_recover_or_never_was(
    point: str, parent_home: Path
) -> None:
    """Killed at each point of its making, the fork is absent (before anything is written) or
    completed by `relay recover` with the edit and without running a copied step again."""
    check_killed_fork(parent_home, point, made=True)


@pytest.mark.parametrize("point", ["fork:forked", "fork:edited", "fork:resumed"])
def test_a_fork_on_postgresql_killed_while_it_is_made_stays_held_until_recover_completes_it(
    point: str, pg_parent_home: tuple[Path, str]
) -> None:
    """On PostgreSQL the killed fork's rows stay on the hold queue; `relay recover` completes
    them (the edit applied once) and runs only the fresh calls. The points where the fork has
    rows in the database (before them it is the SQLite test's case: a record, no rows)."""
    home, database_url = pg_parent_home
    check_killed_fork(home, point, database_url, made=True)


def test_a_refused_fork_leaves_no_run_folder(parent_home: Path) -> None:
    """A call the parent never made, or an output set on a call that is not copied: refused
    with [fork-refused], and no run folder (rejected or other) is left behind."""
    home, parent = parent_home, "fuzz-1"
    for args in (("--from", "nope#1"), ("--from", "add#2", "--set", "add#3=1")):
        refused = relay(home, "fork", parent, *args)
        assert refused.returncode == 1 and refused.stderr.strip().endswith("[fork-refused]")
        assert "Traceback" not in refused.stderr
    assert run_ids(home) == ["iteration-1-hook"]


def test_a_half_made_fork_whose_parent_is_gone_is_refused_in_one_coded_line(
    parent_home: Path,
) -> None:
    """With its parent deleted the fork cannot be completed: `relay recover` refuses it in one
    line with [fork-incomplete] naming `relay delete`, runs nothing, and the delete works."""
    home, parent = parent_home, "fuzz-1"
    killed = relay(home, "fork", parent, *FORK, kill_at="fork:copied")
    assert killed.returncode == -signal.SIGKILL
    assert relay(home, "delete", parent).returncode == 0
    refused = relay(home, "recover", "fuzz-2")
    assert refused.returncode == 1
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and line.endswith("[fork-incomplete]"), line
    assert "relay delete fuzz-2" in line
    assert effects(home, "fuzz-2") == []
    listed = json.loads(relay(home, "runs", "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [("fuzz-2", "creating")]
    assert relay(home, "delete", "fuzz-2").returncode == 0


def _workflows(database_url: str, run_id: str) -> list[str]:
    """The statuses of DBOS's rows for ``run_id``'s workflow in the shared database."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (run_id,)
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_a_half_made_fork_on_postgresql_is_deleted_with_its_rows(
    pg_parent_home: tuple[Path, str],
) -> None:
    """Killed while it was made, the fork's workflow waits on the hold queue; `relay delete`
    removes those rows with its folder, and deleting the parent removes the parent's: nothing is
    left for DBOS's tools to list. The parent is untouched by the fork's deletion."""
    (home, database_url), parent = pg_parent_home, "fuzz-1"
    killed = relay(home, "fork", parent, *FORK, kill_at="fork:forked", database_url=database_url)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _workflows(database_url, "fuzz-2") != []  # DBOS's fork, held, not yet run
    before = snapshot(run_folder(home, parent))
    deleted = relay(home, "delete", "fuzz-2", database_url=database_url)
    assert deleted.returncode == 0, deleted.stderr
    assert _workflows(database_url, "fuzz-2") == []
    assert _workflows(database_url, parent) == ["SUCCESS"]
    assert snapshot(run_folder(home, parent)) == before
    listed = json.loads(relay(home, "runs", "--json", database_url=database_url).stdout)
    assert [r["run_id"] for r in listed] == [parent]
    assert relay(home, "delete", parent, database_url=database_url).returncode == 0
    assert _workflows(database_url, parent) == []
