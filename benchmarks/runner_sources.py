"""The contestants' code for ``bench_runner.py``: the kit relays and the bare DBOS script.

The kit relays and the bare script define the same steps and take their workflows' bodies from
one table (``BODIES``), so the two sides run the same work; only the machinery around it differs.
"""

from __future__ import annotations

STEPS = """from dbos import DBOS


@DBOS.step()
async def step_a(x):
    return x + 1


@DBOS.step()
async def step_b(x):
    return x * 2


@DBOS.step()
async def tick(i):
    return i
"""

#: the workflows' bodies: the kit relays' ``run`` and the bare script's workflow of that name
BODIES = {
    "one": """\
    return {"value": await step_a(INPUT["x"])}
""",
    "two": """\
    a = await step_a(INPUT["x"])
    return {"value": await step_b(a)}
""",
    "loop": """\
    total = 0
    for i in range(INPUT["steps"]):
        total += await tick(i)
    return {"total": total}
""",
}

RELAYS = {
    name: STEPS + f"\n\n@DBOS.workflow()\nasync def run(INPUT):\n{body}"
    for name, body in BODIES.items()
}

#: how a bare DBOS script configures DBOS on its SQLite file ``DB``: a statement of its ``main``
#: (this one and ``profile_step.py``'s, so the bare contestants run DBOS alike)
BARE_DBOS_CONFIG = """\
    DBOS(config={
        "name": "bench",
        "system_database_url": "sqlite:///" + os.path.abspath(DB),
        "application_version": "bench-v1",
        "executor_id": "local",
        "log_level": "WARNING",
    })
"""

BARE_SCRIPT = (
    '''"""Bare DBOS: the benchmark's relays, no kit. Usage: bare.py MODE DIR [INPUT]."""
import time

PHASES = {"start": time.time()}
import asyncio
import json
import os
import sqlite3
import sys

from dbos import DBOS, SetWorkflowID

PHASES["imported"] = time.time()
MODE, FOLDER = sys.argv[1], sys.argv[2]
DB = os.path.join(FOLDER, "dbos.sqlite")
WORKFLOW_ID = "bench-1"


@DBOS.step()
async def step_a(x):
    return x + 1


@DBOS.step()
async def step_b(x):
    if MODE == "crash":
        sys.stdout.flush()
        os._exit(86)
    return x * 2


@DBOS.step()
async def tick(i):
    return i
'''
    + "".join(
        f"\n\n@DBOS.workflow()\nasync def {name}(INPUT):\n{body}" for name, body in BODIES.items()
    )
    + """

async def main():
    if MODE != "loop-default" and not os.path.exists(DB):
        conn = sqlite3.connect(DB)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()
"""
    + BARE_DBOS_CONFIG
    + """    PHASES["configured"] = time.time()
    DBOS.launch()
    PHASES["launched"] = time.time()
    if MODE == "recover":
        handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)
        result = await handle.get_result(polling_interval_sec=0.01)
    else:
        workflow = {"one": one, "two": two, "crash": two}.get(MODE, loop)
        with SetWorkflowID(WORKFLOW_ID):
            result = await workflow(json.loads(sys.argv[3]))
    PHASES["done"] = time.time()
    with open(os.path.join(FOLDER, "result.json"), "w") as out:
        json.dump({"result": result, "phases": PHASES}, out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


asyncio.run(main())
"""
)
