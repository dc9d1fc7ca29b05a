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

# a warm parent's part (rehearse), then a forked attempt's (a run on its own database)
REHEARSED = textwrap.dedent(
    """
    import asyncio, json, os, sqlite3, sys, tempfile, threading
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
    folder = Path(tempfile.mkdtemp())
    r, w = os.pipe()
    if os.fork() == 0:  # as a forked attempt does (runner.child)
        from dbos import DBOS, SetWorkflowID
        database = folder / "run.sqlite"
        copy_template(database)
        given = dbos_engines.sqlite_engine_for(database)
        config = {"name": "relay", "system_database_url": f"sqlite:///{database}",
                  "application_version": "v1", "executor_id": "x", "log_level": "WARNING"}
        if given is not None:
            config["system_database_engine"] = given

        @DBOS.step()
        async def double(x):
            return 2 * x

        @DBOS.workflow()
        async def run(x):
            return await double(x)

        async def go():
            with SetWorkflowID("run-1"):
                return await run(21)

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
    argv = [sys.executable, "-c", REHEARSED, "template" if template else "none"]
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
