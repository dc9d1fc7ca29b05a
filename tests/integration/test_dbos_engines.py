"""The SQLite engine a warm parent rehearses DBOS on, for the attempts it forks
(``runner.dbos_engines``).

Each case runs in a process of its own, with a cache of its own (so the DBOS template is made
there), since a rehearsal launches and destroys DBOS in the process that makes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg

from relay_notebook.runner import dbos_engines

# both scripts' forked attempt runs one workflow of one step, with the id "run-1"
ONE_STEP_RUN = textwrap.dedent(
    """
    def one_step_run():
        from dbos import DBOS, SetWorkflowID

        @DBOS.step()
        async def double(x):
            return 2 * x

        @DBOS.workflow(name="run")  # as a relay's module names it, not this function's local
        async def run(x):
            return await double(x)

        async def go():
            with SetWorkflowID("run-1"):
                return await run(21)

        return go
    """
)

# a warm parent's part (rehearse), then a forked attempt's (a run on its own database)
REHEARSED = ONE_STEP_RUN + textwrap.dedent(
    """
    import asyncio, json, os, sqlite3, sys, threading
    from pathlib import Path
    import dbos
    from relay_notebook.runner import dbos_engines
    from relay_notebook.runner.dbos_template import copy_template

    if sys.argv[1] == "template":  # in a process of its own, as a warm parent's helper does
        import subprocess
        subprocess.run([sys.executable, "-c", "from relay_notebook.runner.dbos_template "
                        "import make_template; make_template()"], check=True)
    out = {"rehearsed": dbos_engines.rehearse(), "threads": threading.active_count(),
           "dbos": dbos._dbos._dbos_global_instance is not None,
           "registry": dbos._dbos._dbos_global_registry is not None}
    engine = dbos_engines._rehearsed
    if engine is not None:
        out["compiled"] = len(engine._compiled_cache)
        out["connections"] = engine.pool.checkedout()
    folder = Path(sys.argv[2])  # the test's own folder (removed with it)
    r, w = os.pipe()
    if os.fork() == 0:  # as a forked attempt does (runner.child)
        from dbos import DBOS
        database = folder / "run.sqlite"
        copy_template(database)
        given = dbos_engines.sqlite_engine_for(database)
        config = {"name": "relay", "system_database_url": f"sqlite:///{database}",
                  "application_version": "v1", "executor_id": "x", "log_level": "WARNING"}
        if given is not None:
            config["system_database_engine"] = given
        go = one_step_run()

        DBOS(config=config)
        DBOS.launch()
        child = {"result": asyncio.run(go()), "given": given is not None}
        if given is not None:
            child["compiled"] = len(given._compiled_cache)
        os.write(w, json.dumps(child).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        out["child"] = json.loads(pipe.read())
    rows = sqlite3.connect(folder / "run.sqlite").execute(
        "SELECT workflow_uuid, status FROM workflow_status").fetchall()
    out["rows"] = [list(row) for row in rows]
    print(json.dumps(out))
    """
)


def rehearse(tmp_path: Path, template: bool) -> dict[str, object]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = [sys.executable, "-c", REHEARSED, "template" if template else "none", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_a_rehearsal_leaves_nothing_running_and_its_fork_compiles_nothing_again(
    tmp_path: Path,
) -> None:
    """After the rehearsal no thread runs, DBOS is destroyed (instance and registry) and the
    engine holds no connection: safe to fork. The forked run writes its own database through
    that engine and compiles no statement the rehearsal had not compiled."""
    out = rehearse(tmp_path, template=True)
    assert out["rehearsed"] is True and out["threads"] == 1
    assert out["dbos"] is False and out["registry"] is False
    assert out["connections"] == 0
    compiled = out["compiled"]
    assert isinstance(compiled, int) and compiled >= 10
    assert out["child"] == {"result": 42, "given": True, "compiled": compiled}
    assert out["rows"] == [["run-1", "SUCCESS"]]


def test_without_a_template_there_is_no_rehearsal_and_dbos_makes_its_engine(
    tmp_path: Path,
) -> None:
    """No template yet (a machine's first warm parent): nothing is rehearsed, and the forked
    run lets DBOS make its own engine, as before."""
    out = rehearse(tmp_path, template=False)
    assert out["rehearsed"] is False and out["threads"] == 1 and out["dbos"] is False
    assert out["child"] == {"result": 42, "given": False}
    assert out["rows"] == [["run-1", "SUCCESS"]]


# a worker's warm parent rehearses on its PostgreSQL database, then forks an attempt there
REHEARSED_POSTGRES = ONE_STEP_RUN + textwrap.dedent(
    """
    import asyncio, json, os, sys, threading
    import dbos, psycopg
    from relay_notebook.runner import dbos_engines

    url = sys.argv[1]
    first = dbos_engines.rehearse_postgres(url)
    out = {"rehearsed": first, "again": dbos_engines.rehearse_postgres(url),
           "threads": threading.active_count(),
           "dbos": dbos._dbos._dbos_global_instance is not None,
           "registry": dbos._dbos._dbos_global_registry is not None}
    engine = dbos_engines._rehearsed_pg[url]
    out["compiled"] = len(engine._compiled_cache)
    out["connections"] = engine.pool.checkedout()
    out["dialect_ready"] = engine.dialect.server_version_info is not None
    r, w = os.pipe()
    if os.fork() == 0:  # as a forked attempt does (runner.child), its leader connecting ahead
        from dbos import DBOS
        sockets = dbos_engines.connect_ahead(url, above=60)
        given = dbos_engines.postgres_engine(url)
        go = one_step_run()

        DBOS(config={"name": "relay-run-1", "system_database_url": url,
                     "system_database_engine": given, "application_version": "v1",
                     "executor_id": "x", "log_level": "WARNING"})
        DBOS.launch()
        child = {"result": asyncio.run(go()), "same": given is engine,
                 "ahead": len(sockets), "compiled": len(given._compiled_cache)}
        os.write(w, json.dumps(child).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as pipe:
        out["child"] = json.loads(pipe.read())
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT workflow_uuid, name, status FROM dbos.workflow_status "
                            "ORDER BY workflow_uuid").fetchall()
    out["rows"] = [list(row) for row in rows]
    print(json.dumps(out))
    """
)


def test_a_postgres_rehearsal_leaves_no_workflow_and_its_fork_compiles_nothing_again(
    database_url: str,
) -> None:
    """Rehearsed once per database (asked again, it does nothing), on the database itself: no
    thread, no connection and no DBOS left, the dialect set up, and none of the rehearsal's
    rows left. A forked attempt connecting ahead gets that engine and compiles no statement
    the rehearsal had not compiled."""
    server, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    argv = [sys.executable, "-c", REHEARSED_POSTGRES, database_url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["rehearsed"] is True and out["again"] is True
    assert out["threads"] == 1 and out["dbos"] is False and out["registry"] is False
    assert out["connections"] == 0 and out["dialect_ready"] is True
    compiled = out["compiled"]
    assert isinstance(compiled, int) and compiled >= 10
    child = out["child"]
    assert child == {"result": 42, "same": True, "ahead": 3, "compiled": compiled}, child
    assert out["rows"] == [["run-1", "run", "SUCCESS"]]


def test_a_postgres_rehearsal_on_a_missing_database_keeps_nothing(database_url: str) -> None:
    """The database does not exist: nothing is kept (attempts make their own engine, as
    before), it is not tried again, and no thread is left."""
    script = (
        "import sys, threading\n"
        "from relay_notebook.runner import dbos_engines\n"
        "url = sys.argv[1]\n"
        "print(dbos_engines.rehearse_postgres(url), dbos_engines.tried_postgres(url),\n"
        "      dbos_engines._rehearsed_pg[url] is not None, threading.active_count())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, database_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "False", "1"]


def test_a_postgres_rehearsal_waits_for_no_lock_longer_than_its_limit(database_url: str) -> None:
    """Another session holds a lock the rehearsal needs (as a relay of the workspace could, to
    stall the warm parent that forks the next attempts): the rehearsal gives up after its
    limit, keeps nothing and leaves no thread; the engine's later sessions carry no limit."""
    server, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    script = textwrap.dedent(
        """
        import json, sys, threading, time
        from dbos import DBOS
        from relay_notebook.runner import dbos_engines

        url = sys.argv[1]
        DBOS(config={"name": "relay-setup", "system_database_url": url})
        DBOS.launch()  # DBOS's tables, as the worker's own DBOS makes them
        DBOS.destroy(destroy_registry=True)
        print("ready", flush=True)
        sys.stdin.readline()  # the table is locked now
        started = time.monotonic()
        kept = dbos_engines.rehearse_postgres(url)
        print(json.dumps({"kept": kept, "seconds": time.monotonic() - started,
                          "threads": threading.active_count()}), flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, database_url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        with psycopg.connect(database_url) as holder:
            holder.execute("LOCK TABLE dbos.application_versions IN ACCESS EXCLUSIVE MODE")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            holder.rollback()
        assert line, proc.communicate(timeout=30)[1]
        out = json.loads(line)
        assert out["kept"] is False and out["threads"] == 1, out
        limit_s = dbos_engines.REHEARSAL_LIMIT_MS / 1000
        assert limit_s <= out["seconds"] < limit_s + 10, out
    finally:
        proc.kill()
        proc.wait()
