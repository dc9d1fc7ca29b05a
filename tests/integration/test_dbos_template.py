"""A run's first attempt starts from a migrated, empty DBOS database (``runner.dbos_template``).

Every case runs `relay` as a terminal does, with its own ``XDG_CACHE_HOME``, so the template is
made (by the CLI's warm parent, in the background) and used exactly as a user's would be.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relays import relay_source

ONE_STEP = textwrap.dedent(
    """
    from dbos import DBOS

    @DBOS.step()
    async def double(x):
        return x * 2

    @DBOS.workflow()
    async def run(INPUT):
        return {"value": await double(INPUT.get("x", 1))}
    """
)
# the template's path as the CLI's children compute it (the installed DBOS, this cache)
WHERE = "from relay_notebook.runner.dbos_template import template_path; print(template_path())"
# the template made as the CLI's warm parent makes it, in a process of its own
MAKE = (
    "from relay_notebook.runner.dbos_template import make_template; "
    "made = make_template(); assert made is not None; print(made)"
)
# a DBOS database made by DBOS itself on an empty file, as the kit did before the template
FRESH = textwrap.dedent(
    """
    import os, sqlite3, sys
    from dbos import DBOS
    path = sys.argv[1]
    DBOS(config={"name": "fresh", "system_database_url": "sqlite:///" + path,
                 "application_version": "v", "executor_id": "x", "log_level": "WARNING"})
    DBOS.launch()
    sys.stdout.flush()
    os._exit(0)
    """
)


@pytest.fixture
def cache(tmp_path: Path) -> dict[str, str]:
    """An environment with a cache of its own (no template in it yet)."""
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "RELAY_WARM_START": "1"}


@pytest.fixture(scope="module")
def _made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A template made once for the module in a cache of its own: (that cache, the template)."""
    cache = tmp_path_factory.mktemp("template-cache")
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    made = subprocess.run(
        [sys.executable, "-c", MAKE], capture_output=True, text=True, env=env, timeout=120
    )
    assert made.returncode == 0, made.stderr
    return cache, Path(made.stdout.strip())


@pytest.fixture
def made(_made: tuple[Path, Path], cache: dict[str, str]) -> Path:
    """The module's template copied into this test's cache, where the CLI looks for it (the
    template as a first run's warm parent leaves it: ``test_the_first_run_makes_...``)."""
    module_cache, template = _made
    here = Path(cache["XDG_CACHE_HOME"]) / template.relative_to(module_cache)
    here.parent.mkdir(parents=True)
    shutil.copyfile(template, here)
    from relay_notebook.runner.dbos_template import template_problem

    assert template_problem(here) is None
    return here


def relay(env: dict[str, str], home: Path, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args, "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def template_of(env: dict[str, str]) -> Path:
    out = subprocess.run([sys.executable, "-c", WHERE], capture_output=True, text=True, env=env)
    return Path(out.stdout.strip())


def started_from_template(workspace: Workspace, run_id: str) -> bool:
    starts = [
        e for e in read_events(find_run(workspace, run_id).events) if e["kind"] == "attempt_start"
    ]
    return bool(starts[0].get("from_template"))


def schema(path: Path) -> set[tuple[str, str, str | None]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return {(t, n, s) for t, n, s in rows}


def test_the_first_run_makes_the_template_and_the_next_starts_from_it(
    workspace: Workspace, cache: dict[str, str], tmp_path: Path
) -> None:
    """The CLI's warm parent makes the template once; a later run's database is a copy of it,
    holds what a database DBOS migrates itself holds, and the run succeeds on it."""
    workspace.save_draft("one", ONE_STEP)
    template = template_of(cache)
    assert str(template).startswith(cache["XDG_CACHE_HOME"]) and not template.exists()
    first = relay(cache, workspace.home, "run", "one")
    assert first["status"] == "succeeded"
    wait_until(template.is_file, timeout=60, what=f"the DBOS template at {template}")
    second = relay(cache, workspace.home, "run", "one", "--input", '{"x": 21}')
    assert second["status"] == "succeeded" and second["result"] == {"value": 42}
    assert started_from_template(workspace, second["run_id"])

    fresh = tmp_path / "fresh.sqlite"
    subprocess.run([sys.executable, "-c", FRESH, str(fresh)], check=True, timeout=120)
    assert schema(template) == schema(fresh)  # the same tables, indexes and triggers, no more
    with sqlite3.connect(f"file:{template}?mode=ro", uri=True) as conn:
        tables = [n for t, n, _ in schema(template) if t == "table"]
        rows = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    assert {t: n for t, n in rows.items() if n} == {"dbos_migrations": 1}, rows
    database = find_run(workspace, second["run_id"]).database
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        versions = [v for (v,) in conn.execute("SELECT version_name FROM application_versions")]
    assert versions == [find_run(workspace, second["run_id"]).read_meta()["app_version"]]


def test_a_template_that_is_not_a_database_is_not_used(
    workspace: Workspace, cache: dict[str, str]
) -> None:
    """A damaged template costs the run nothing: it starts from an empty file, as before
    (spawned: no warm parent is there to make the template again first)."""
    workspace.save_draft("one", ONE_STEP)
    template = template_of(cache)
    template.parent.mkdir(parents=True)
    template.write_bytes(b"not a database")
    done = relay({**cache, "RELAY_WARM_START": "0"}, workspace.home, "run", "one")
    assert done["status"] == "succeeded" and done["result"] == {"value": 2}
    assert not started_from_template(workspace, done["run_id"])


def test_a_relay_cannot_write_the_template(
    workspace: Workspace, cache: dict[str, str], made: Path
) -> None:
    """The template is read by every new run, so a confined relay may not change it."""
    workspace.save_draft("write_outside", relay_source("write_outside"))
    template = template_of(cache)
    assert template == made
    before = template.read_bytes()
    done = relay(cache, workspace.home, "run", "write_outside", "--input",
                 json.dumps({"outside": str(template)}))  # fmt: skip
    assert done["status"] == "succeeded"
    assert done["result"]["outside"] in ("EACCES", "EPERM", "EROFS")
    assert template.read_bytes() == before


def _change(template: Path, statement: str) -> None:
    """Change the template in place, as any program would (the template is in WAL mode: the
    change reaches the file itself when the last connection closes)."""
    with contextlib.closing(sqlite3.connect(template)) as conn, conn:
        conn.execute(statement)


def _drop_operation_outputs(template: Path) -> None:
    _change(template, "DROP TABLE operation_outputs")


def _plant_next_run(template: Path) -> None:
    _change(
        template,
        "INSERT INTO workflow_status (workflow_uuid, status, name, output) "
        "VALUES ('one-1', 'SUCCESS', 'run', '{\"value\": 999}')",
    )


def _truncate(template: Path) -> None:
    data = template.read_bytes()
    template.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    "damage",
    [_drop_operation_outputs, _plant_next_run, _truncate],
    ids=["without-operation_outputs", "a-row-for-the-next-run", "truncated"],
)
def test_a_wrong_template_is_not_used_and_is_made_again(
    workspace: Workspace, cache: dict[str, str], made: Path, damage: Any
) -> None:
    """A template without operation_outputs, one holding a row for the next run's id, or a
    truncated one: the next run (spawned, so nothing makes the template again first) succeeds
    with its own result, not from the template (nothing of it is read as a checkpoint); the
    next CLI's warm parent makes the template again, and the run after starts from it."""
    from relay_notebook.runner.dbos_template import template_problem

    workspace.save_draft("one", ONE_STEP)
    template = template_of(cache)
    assert template == made
    damage(template)
    assert template_problem(template) is not None
    spawned = {**cache, "RELAY_WARM_START": "0"}
    done = relay(spawned, workspace.home, "run", "one", "--input", '{"x": 21}')
    assert done["run_id"] == "one-1"
    assert done["status"] == "succeeded" and done["result"] == {"value": 42}, done
    assert not started_from_template(workspace, "one-1")
    warm = relay(cache, workspace.home, "run", "one", "--input", '{"x": 4}')
    assert warm["status"] == "succeeded" and warm["result"] == {"value": 8}
    wait_until(
        lambda: template_problem(template) is None, timeout=120,
        what=lambda: f"the DBOS template made again ({template_problem(template)})",
    )  # fmt: skip
    again = relay(cache, workspace.home, "run", "one", "--input", '{"x": 5}')
    assert again["status"] == "succeeded" and again["result"] == {"value": 10}
    assert started_from_template(workspace, again["run_id"])


# A supervisor with a long-lived warm parent: the template made first (already there: the
# ``made`` fixture's), so the parent checks it once; then a run, the template changed (as
# argv[2] says), and another run.
TRUSTED = textwrap.dedent(
    """
    import json, sqlite3, sys, time, contextlib
    from pathlib import Path
    from relay_notebook.runner import start_run
    from relay_notebook.runner.dbos_template import make_template
    from relay_notebook.runner.warm import ForkedProcess, restart_warm_parent, warm_parent
    from relay_notebook.workspace import Workspace

    home, change = sys.argv[1:3]
    template = make_template()
    assert restart_warm_parent().wait_ready(120)
    while warm_parent() is None:
        time.sleep(0.01)
    workspace = Workspace(home, warm_start=True)
    draft = workspace.load_draft("one")
    runs = []
    for x in (1, 2):
        handle = start_run(workspace, draft, run_input={"x": x})
        out = handle.wait(120)
        runs.append({"status": out.status, "result": out.result,
                     "forked": isinstance(handle.process, ForkedProcess)})
        while warm_parent() is None:
            time.sleep(0.01)
        if x == 2:
            break
        # the next run is one-2: a row that would be read as its finished workflow
        planted = ("INSERT INTO workflow_status (workflow_uuid, status, name, output) "
                   "VALUES ('one-2', 'SUCCESS', 'run', ?)", (json.dumps({"value": 999}),))
        if change == "in-place":
            with contextlib.closing(sqlite3.connect(template)) as conn, conn:
                conn.execute(*planted)
        elif change == "replaced":
            other = template.with_name("other.db")
            other.write_bytes(template.read_bytes())
            with contextlib.closing(sqlite3.connect(other)) as conn, conn:
                conn.execute(*planted)
            other.replace(template)
    print(json.dumps(runs))
    """
)


@pytest.mark.parametrize("change", ["in-place", "replaced"])
def test_a_warm_parent_checks_the_template_once_and_a_changed_one_is_checked_again(
    workspace: Workspace, cache: dict[str, str], made: Path, change: str
) -> None:
    """A warm parent checks the template once; its children copy that very file unchecked (the
    first run starts from it). A template changed in place or replaced after that check is
    checked again on the run's copy and not used: the row planted for the next run is never
    read as its checkpoint."""
    workspace.save_draft("one", ONE_STEP)
    argv = [sys.executable, "-c", TRUSTED, str(workspace.home), change]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=cache)
    assert proc.returncode == 0, proc.stderr
    first, second = json.loads(proc.stdout)
    assert first == {"status": "succeeded", "result": {"value": 2}, "forked": True}
    assert second == {"status": "succeeded", "result": {"value": 4}, "forked": True}
    assert started_from_template(workspace, "one-1")
    assert not started_from_template(workspace, "one-2")
    with sqlite3.connect(f"file:{find_run(workspace, 'one-2').database}?mode=ro", uri=True) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
