"""Write the tutorial notebooks' cells (outputs come from executing them; see the Makefile)."""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell

FRESH = code(
    "# A fresh workspace so this tutorial starts clean every time; without these two lines\n"
    "# your relays live in ./relays (or $RELAY_HOME).\n"
    "import os, tempfile\n"
    'os.environ["RELAY_HOME"] = tempfile.mkdtemp(prefix="relay-tutorial-")\n'
    "%load_ext relay_notebook"
)

NOTEBOOKS: dict[str, list[nbf.NotebookNode]] = {
    "01-first-relay.ipynb": [
        md(
            "# Your first relay\n\n"
            "A **relay** is a small durable program: a DBOS workflow `run(INPUT)` plus "
            "`@DBOS.step()` functions. In a `%%relay NAME` cell the kit saves your code as the "
            "relay's **draft**, checks it and draws its **flow graph** from the Python syntax "
            "tree — the cell is *not* executed in the kernel. `%relay run` then runs it in a "
            "supervised child process on DBOS, with its own SQLite database."
        ),
        FRESH,
        md(
            "## Author\n\nThree steps and a loop. The graph below is drawn without running anything."
        ),
        code(
            "%%relay greeter\n"
            "from dbos import DBOS\n\n"
            "@DBOS.step()\n"
            "async def normalize(name):\n"
            "    return name.strip().title()\n\n"
            "@DBOS.step()\n"
            "async def greet(name):\n"
            '    return f"Hello, {name}!"\n\n'
            "@DBOS.workflow()\n"
            "async def run(INPUT):\n"
            "    greetings = []\n"
            '    for raw in INPUT["names"]:\n'
            "        greetings.append(await greet(await normalize(raw)))\n"
            '    return {"greetings": greetings}'
        ),
        md(
            "## Mistakes are caught before anything runs\n\n"
            "Admission reports every problem at once with its cell line. Uncomment the lines "
            "to see it fail; determinism **warnings** (like reading the clock in the workflow) "
            "are shown but do not block."
        ),
        code(
            "%%relay clocky\n"
            "import time\n"
            "from dbos import DBOS\n\n"
            "@DBOS.workflow()\n"
            "async def run(INPUT):\n"
            "    # DBOS.launch()   <- uncomment: the kit launches DBOS, not your code\n"
            "    started = time.time()  # a warning: the clock differs when a run is recovered\n"
            '    return {"started": started}'
        ),
        md(
            "## Run\n\n`--wait` blocks until the run ends and returns its result; `-o greetings` "
            "also binds it to a variable. Without `--wait` the cell returns at once and the "
            "view updates live while the kernel stays free."
        ),
        code(
            'people = {"names": [" ada ", "GRACE"]}\n'
            "%relay run greeter --input people --wait -o greetings"
        ),
        code("greetings"),
        md(
            "## Read the logs\n\nEvery step call, in which attempt it ran, and whether it was reused."
        ),
        code(
            "log = %relay logs greeter-1 --json\n[(s['function_id'], s['name'], s['executed_in']) for s in log['steps']]"
        ),
    ],
    "02-crash-and-recover.ipynb": [
        md(
            "# Crash a run, then recover it\n\n"
            "Runs survive crashes: each completed step is a **checkpoint** in the run's DBOS "
            "database. Here we crash runs on purpose — `--crash after:STEP` exits the process "
            "right after STEP's checkpoint is saved; `--crash during:STEP` exits inside STEP's "
            "body, before its checkpoint — and `%relay recover` them: completed steps come back "
            "from their checkpoints, badged **reused**."
        ),
        FRESH,
        code(
            "%%relay orders\n"
            "from dbos import DBOS\n\n"
            "@DBOS.step()\n"
            "async def load(n):\n"
            "    return list(range(1, n + 1))\n\n"
            "@DBOS.step()\n"
            "async def price(item):\n"
            "    return item * 25\n\n"
            "@DBOS.step()\n"
            "def total(prices):\n"
            "    return sum(prices)\n\n"
            "@DBOS.workflow()\n"
            "async def run(INPUT):\n"
            '    items = await load(INPUT["n"])\n'
            "    prices = [await price(i) for i in items]\n"
            '    return {"prices": prices, "total": total(prices)}'
        ),
        md("## Crash after a checkpoint\n\n`price#2` is the second call of `price` (loops count)."),
        code("%relay run orders --input '{\"n\": 3}' --crash after:price#2 --wait"),
        md("The run is **interrupted** (the `relay` CLI exits with status 3). Recover it:"),
        code("%relay recover orders-1 --wait"),
        code(
            "log = %relay logs orders-1 --json\n[(s['name'], s['executed_in'], s['reused_in']) for s in log['steps']]"
        ),
        md(
            "`load`, `price#1` and `price#2` ran in attempt 1 and were reused in attempt 2; "
            "the rest ran in attempt 2. Each step body ran exactly once.\n\n"
            "## Crash in the middle of a step\n\n"
            "Now the process dies inside `total`'s body. Its checkpoint was never written, so "
            "recovery runs `total` again — this is why steps that call services must be safe "
            "to repeat (an idempotency key the service deduplicates)."
        ),
        code("%relay run orders --input '{\"n\": 2}' --crash during:total --wait"),
        code("%relay recover orders-2 --wait"),
        code(
            "log = %relay logs orders-2 --json\n[(s['name'], s['executed_in'], s['reused_in']) for s in log['steps']]"
        ),
        md(
            "## The attempt budget\n\nA run gets three process attempts and keeps its first "
            "deadline. A finished run is returned as it was — recovering it again runs nothing:"
        ),
        code("%relay recover orders-2 --wait"),
        code("log = %relay logs orders-2 --json\n[a['status'] for a in log['attempts']]"),
    ],
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = nbf.v4.new_notebook()
        nb["cells"] = cells
        nb["metadata"]["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbf.write(nb, ROOT / name)


if __name__ == "__main__":
    main()
