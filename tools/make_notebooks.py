"""Write the tutorial notebooks' cells (outputs come from executing them; see the Makefile)."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat as nbf

ROOT = Path(__file__).resolve().parents[1] / "notebooks"
md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell

#: the tutorial's own workspace, a hidden folder beside the notebook (under the Jupyter
#: server's root, so the side panel can show it); ``NN`` becomes the tutorial's number
HOME = ".relay-tutorial-NN"
WORKSPACE = (
    f'os.environ["RELAY_HOME"] = os.path.abspath("{HOME}")\n'
    'shutil.rmtree(os.environ["RELAY_HOME"], ignore_errors=True)\n'
    'os.makedirs(os.environ["RELAY_HOME"])\n'
)

FRESH = code(
    f"# This tutorial's own workspace, made afresh each time: the hidden folder {HOME}\n"
    "# beside this notebook, which the Relays side panel shows. Without these lines your\n"
    "# relays live in ./relays (or $RELAY_HOME).\n"
    "import os, shutil\n" + WORKSPACE + "%load_ext relay_notebook"
)

#: the orders relay of notebooks 02 and 05, around its price step and its workflow's return
ORDERS_HEAD = (
    "%%relay orders\n"
    "from dbos import DBOS\n\n"
    "@DBOS.step()\n"
    "async def load(n):\n"
    "    return list(range(1, n + 1))\n\n"
)
ORDERS_TAIL = (
    "@DBOS.step()\n"
    "def total(prices):\n"
    "    return sum(prices)\n\n"
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    '    items = await load(INPUT["n"])\n'
    "    prices = [await price(i) for i in items]\n"
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
            ORDERS_HEAD
            + "@DBOS.step()\nasync def price(item):\n    return item * 25\n\n"
            + ORDERS_TAIL
            + '    return {"prices": prices, "total": total(prices)}'
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


MCP_SERVER = """from mcp.server.mcpserver import MCPServer

server = MCPServer("inventory")


@server.tool()
def stock(sku: str) -> dict:
    \"\"\"Units in stock for a SKU.\"\"\"
    return {"sku": sku, "units": {"A-1": 7}.get(sku, 0)}


if __name__ == "__main__":
    server.run("stdio")
"""

NOTEBOOKS["03-agents-and-tools.ipynb"] = [
    md(
        "# Agents, tools and MCP\n\n"
        "Relays call models and tools through the `agentworks` adapter: `agent(...)` runs a "
        "conversation to its final message, with Python `@tool` functions and MCP servers "
        "attached. Here every model turn comes from a **scripted provider** (a JSON file beside "
        'the relay), so the tutorial is deterministic and offline; `model="openai:MODEL"` talks '
        "to any OpenAI-compatible server instead."
    ),
    FRESH,
    md(
        "## A typed tool\n\nA Pydantic model gives the tool its JSON schema and validates the input at the boundary."
    ),
    code(
        "%%relay quotes\n"
        "from dbos import DBOS\n"
        "from pydantic import BaseModel\n"
        "from agentworks import agent, tool\n\n"
        "class Item(BaseModel):\n"
        "    sku: str\n"
        "    quantity: int\n\n"
        "@tool\n"
        "def price(item: Item) -> dict:\n"
        '    """The price of an order line."""\n'
        '    return {"sku": item.sku, "total": item.quantity * 25}\n\n'
        "@DBOS.step()\n"
        "async def quote(text):\n"
        '    return await agent(name="quoter", model="scripted:script.json",\n'
        '                       system_prompt="Quote the order as JSON.", user_message=text,\n'
        '                       tools=[price], output_schema={"type": "object", "required": ["total"]})\n\n'
        "@DBOS.workflow()\n"
        "async def run(INPUT):\n"
        '    return await quote(INPUT["text"])'
    ),
    md("The script: the model first asks for the `price` tool, then answers with JSON."),
    code(
        "import json, os, pathlib\n"
        "home = pathlib.Path(os.environ['RELAY_HOME'])\n"
        "script = {'quoter': [\n"
        "    {'tool_calls': [{'name': 'price', 'arguments': {'sku': 'A-1', 'quantity': 4}}]},\n"
        "    {'content': {'sku': 'A-1', 'total': 100}},\n"
        "]}\n"
        "_ = (home / 'quotes' / 'script.json').write_text(json.dumps(script, indent=2))"
    ),
    code('%relay run quotes --input \'{"text": "4 of A-1"}\' --wait'),
    md(
        "Each agent call leaves a **receipt**: the resolved model, every message, each tool call with its arguments and result."
    ),
    code(
        "receipt = json.loads((home / 'quotes/runs/iteration-1-hook/execution/call-1/receipt.json').read_text())\n"
        "receipt['model'], receipt['turns'], [(c['tool'], c['result']) for c in receipt['tool_calls']]"
    ),
    md(
        "The same folder in the files view: each agent call's folder is labelled by its agent, "
        "step and attempt, with previews (JSON pretty-printed). `%relay files quotes-1 call-1` "
        "shows one call."
    ),
    code("%relay files quotes-1"),
    md(
        "## An MCP server\n\n"
        "MCP servers are declared once per workspace (`mcp_servers.yaml`) and started over stdio "
        "when a run first uses them. This one is written right here."
    ),
    code(
        "(home / 'inventory.py').write_text(MCP_SERVER)\n"
        "(home / 'mcp_servers.yaml').write_text('servers:\\n  inventory:\\n    command: python\\n    args: [inventory.py]\\n')\n"
        "print((home / 'inventory.py').read_text())"
    ),
    code(
        "%%relay stock\n"
        "from dbos import DBOS\n"
        "from agentworks import mcp\n\n"
        "@DBOS.workflow()\n"
        "async def run(INPUT):\n"
        '    return await mcp(server="inventory", tool="stock", arguments={"sku": INPUT["sku"]})'
    ),
    code('%relay run stock --input \'{"sku": "A-1"}\' --wait'),
    md(
        "Called from the workflow body, the MCP call became a step of its own, `mcp:inventory.stock`:"
    ),
    code("log = %relay logs stock-1 --json\n[s['name'] for s in log['steps']]"),
]
NOTEBOOKS["03-agents-and-tools.ipynb"][1] = code(FRESH.source + f"\nMCP_SERVER = {MCP_SERVER!r}")

SHOP = (
    "%%relay shop --allow={service.endpoint}\n"
    "import json, urllib.request\n"
    "from dbos import DBOS\n"
    "from agentworks import agent, tool, vault\n\n"
    "def post(url, body):\n"
    '    req = urllib.request.Request(url + "/orders", data=json.dumps(body).encode(), method="POST",\n'
    '        headers={"Content-Type": "application/json", "Authorization": "Bearer " + vault("ORDER_TOKEN")})\n'
    "    with urllib.request.urlopen(req, timeout=10) as r:\n"
    "        return json.load(r)\n\n"
    "@DBOS.step()\n"
    "async def place(url, key):\n"
    '    """Safe: the service deduplicates the idempotency key."""\n'
    '    return post(url, {"sku": "A-1", "quantity": 1, "idempotency_key": key})\n\n'
    "@DBOS.step()\n"
    "async def clerk(url, key):\n"
    "    @tool\n"
    "    def order(sku: str) -> dict:\n"
    '        """Place an order."""\n'
    '        return post(url, {"sku": sku, "quantity": 1, "idempotency_key": key})\n'
    '    return await agent(name="clerk", model="scripted:clerk.json", user_message="order A-1", tools=[order])\n\n'
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    '    if INPUT["how"] == "safe":\n'
    '        return await place(INPUT["url"], INPUT["key"])\n'
    '    return await clerk(INPUT["url"], INPUT["key"])'
)

NOTEBOOKS["04-uncertain-calls.ipynb"] = [
    md(
        "# Uncertain calls\n\n"
        "A step that dies after calling a service but before its checkpoint runs again on "
        "recovery. That is fine for a **safe** action — a service that deduplicates an "
        "idempotency key — but an agent or MCP call interrupted that way is **uncertain**: it "
        "may or may not have had its effect. Recovery then stops with `needs_reconciliation` "
        "until you say what happened."
    ),
    FRESH,
    md(
        "A small order service on loopback: it counts every attempt and creates one order per idempotency key. Its token goes in the workspace **vault** (in your own notebook, `%relay vault set ORDER_TOKEN` asks for it without echoing or storing it in the notebook). A relay reaches the outside but none of this machine's own servers, so the `%%relay` line below declares this one: `--allow={service.endpoint}`."
    ),
    code(
        "from relay_notebook import commands\n"
        "from relay_notebook.commands.lab import OrderService\n"
        "from relay_notebook.workspace import Workspace\n"
        "service = OrderService(token='tutorial-token')\n"
        "commands.vault_set(Workspace(os.environ['RELAY_HOME']), 'ORDER_TOKEN', 'tutorial-token')"
    ),
    code(SHOP),
    code(
        "import json, os, pathlib\n"
        "(pathlib.Path(os.environ['RELAY_HOME']) / 'shop' / 'clerk.json').write_text(json.dumps({'clerk': [\n"
        "    {'tool_calls': [{'name': 'order', 'arguments': {'sku': 'A-1'}}]}, {'content': 'ordered'}]}))\n"
        "safe = {'how': 'safe', 'url': service.url, 'key': 'k-1'}\n"
        "risky = {'how': 'agent', 'url': service.url, 'key': 'k-2'}"
    ),
    md(
        "## A safe action is simply retried\n\nThe process dies inside `place`, after the service answered:"
    ),
    code("%relay run shop --input safe --crash during:place --wait"),
    code("%relay recover shop-1 --wait"),
    code("service.attempts_for('k-1'), len(service.book.orders)"),
    md(
        "Two attempts reached the service and it created **one** order: the idempotency key did its job.\n\n## An uncertain agent call stops recovery"
    ),
    code("%relay run shop --input risky --crash during:agent:clerk --wait"),
    code("%relay recover shop-2 --wait"),
    code("%relay reconcile shop-2"),
    md(
        "The service's own records show the order exists. Reconcile with that result (or `--retry` if the call is safe to repeat), then recover:"
    ),
    code("order = service.book.orders['k-2']\n%relay reconcile shop-2 --result order"),
    code("%relay recover shop-2 --wait"),
    code("service.attempts_for('k-2'), len(service.book.orders)"),
    md(
        "The agent was not called again. Two more ways to make calls recoverable:\n\n"
        "- `replay_safe=True` on `agent(...)`, `mcp(...)` or `ctx.step(...)`: you assert the call "
        "may run twice (a read, or a deduplicated write).\n"
        '- `agent(..., recovery="restart")`: the agent restarts after a crash while every '
        "completed `@tool` call is reused from a journal; a tool interrupted mid-call is settled "
        "by its `@tool(recover=lookup)` receipt lookup."
    ),
    code("service.stop()"),
]

PRICING = (
    "from dbos import DBOS\n\n"
    "@DBOS.step()\n"
    "async def price(n):\n"
    "    return n * {factor}\n\n"
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    '    return {{"price": await price(INPUT["n"])}}'
)

NOTEBOOKS["06-releases-and-bindings.ipynb"] = [
    md(
        "# Releases and bindings\n\n"
        "`%relay publish` freezes a draft under a SHA-256 of its files. A run of a release runs "
        "exactly those frozen files; editing the draft never changes a release. A run is also "
        "**bound** at its first attempt to its input, variables, source, the kit's code and the "
        "Python/DBOS/SQLAlchemy versions: recovering with any of them changed is refused, with "
        "the reason."
    ),
    FRESH,
    code("%%relay pricing --publish\n" + PRICING.format(factor=10)),
    md("Prices go up: change the draft and publish again. A new version; the old one is intact."),
    code("%%relay pricing --publish --no-graph\n" + PRICING.format(factor=12)),
    code("%relay releases pricing"),
    code("%relay run pricing --release v1 --input '{\"n\": 5}' --wait"),
    code("%relay run pricing --input '{\"n\": 5}' --wait"),
    code("%relay verify pricing"),
    md("## A changed binding\n\nCrash a run of the draft, edit the draft, and try to recover:"),
    code("%relay run pricing --input '{\"n\": 1}' --crash after:price --wait"),
    code("%%relay pricing --no-graph\n" + PRICING.format(factor=15)),
    code("try:\n    %relay recover pricing-3\nexcept Exception as exc:\n    print(exc)"),
    md("Restore the source the run was bound to, and recovery goes on:"),
    code("%%relay pricing --no-graph\n" + PRICING.format(factor=12)),
    code("%relay recover pricing-3 --wait"),
]

NOTEBOOKS["07-legacy-programs.ipynb"] = [
    md(
        "# Legacy `run(INPUT, ctx)` programs\n\n"
        "Programs written against the older Context API keep working: `ctx.call_agent`, "
        "`ctx.call_mcp`, `await ctx.step(name, fn, arguments={...})`, `ctx.vault` and "
        "`ctx.variables`. With `relay_durability: dbos` (the default) each of those calls is "
        "checkpointed as a whole. Their flow graph comes from `# @relay` comments."
    ),
    FRESH,
    code(
        "%%relay greeter\n"
        '# @relay node {"id": "in", "type": "input", "label": "Name"}\n'
        '# @relay node {"id": "shout", "type": "script", "label": "Shout"}\n'
        '# @relay node {"id": "out", "type": "output", "label": "Greeting"}\n'
        '# @relay edge {"from": "in", "to": "shout"}\n'
        '# @relay edge {"from": "shout", "to": "out"}\n\n'
        "def shout(name):\n"
        '    return name.upper() + "!"\n\n'
        "async def run(INPUT, ctx):\n"
        '    loud = await ctx.step("shout", shout, arguments={"name": INPUT["name"]})\n'
        '    return {"greeting": "Hello, " + loud}'
    ),
    code('%relay run greeter --input \'{"name": "ada"}\' --wait'),
    code("log = %relay logs greeter-1 --json\n[s['name'] for s in log['steps']]"),
    md(
        "## Annotation mistakes get guidance, never a half-drawn graph\n\n"
        "An invalid set of `# @relay` comments is reported one problem per line, and the graph "
        "falls back to what the code shows; running and publishing are never blocked."
    ),
    code(
        "%%relay sloppy\n"
        '# @relay node {"id": "9lives", "type": "agent", "label": ""}\n'
        '# @relay edge {"from": "9lives", "to": "nowhere"}\n\n'
        "async def run(INPUT, ctx):\n"
        "    return {}"
    ),
]

NOTEBOOKS["08-recovery-lab.ipynb"] = [
    md(
        "# The recovery lab\n\n"
        "Five canonical scenarios, each a button: crash after a checkpoint; crash during a safe "
        "action; crash during an uncertain action; revoke access after a crash; complete without "
        "a crash. The lab shows attempts, reused checkpoints, the order service's attempts, the "
        "orders it created, and agent receipts. Everything is real: processes exit, SQLite "
        "checkpoints, an HTTP order service on loopback."
    ),
    FRESH,
    code("%relay lab"),
    md("The same scenarios without buttons — what the lab does when you click:"),
    code(
        "from relay_notebook.commands.lab import Lab\n"
        "from relay_notebook.workspace import Workspace\n"
        "lab = Lab(Workspace(os.environ['RELAY_HOME']))\n"
        "first = lab.start('after-checkpoint')\n"
        "first.status"
    ),
    code("lab.recover(first.run_id).status"),
    code(
        "report = lab.report(first.run_id)\n{k: report[k] for k in ('attempts', 'reused', 'service_attempts', 'orders')}"
    ),
    code(
        "run = lab.start('revoke')  # crashes, then revokes access\nlab.recover(run.run_id).status"
    ),
    code("lab.grant()\nlab.recover(run.run_id).status"),
    code("lab.service.stop()"),
]


NOTEBOOKS["05-execution-logs.ipynb"] = [
    md(
        "# Exploring execution logs\n\n"
        "A run's record is DBOS's own history (workflow and step ids, checkpoints, timing) "
        "joined with the kit's ledger (attempts, which steps were executed or reused in which "
        "attempt, every retry with its error, receipts). Reading it never changes the run, and "
        "works while the run is going."
    ),
    FRESH,
    code(
        ORDERS_HEAD
        + (
            "@DBOS.step(retries_allowed=True, max_attempts=3, interval_seconds=0.01)\n"
            "async def price(item):\n"
            "    if item == 2 and DBOS.step_status.current_attempt == 0:\n"
            '        raise ConnectionError("price service busy")\n'
            "    return item * 25\n\n"
        )
        + ORDERS_TAIL
        + (
            "    if len(prices) > 2:\n"
            '        return {"total": total(prices), "big": True}\n'
            '    return {"total": total(prices)}'
        )
    ),
    code("%relay run orders --input '{\"n\": 3}' --crash after:price#2 --wait"),
    md(
        "## The recovery preview\n\nBefore recovering, see what will happen: which checkpoints will be reused, what runs again, and any uncertain call that would stop recovery."
    ),
    code("%relay preview orders-1"),
    code("%relay recover orders-1 --wait"),
    md(
        "## The log\n\n`%relay logs` shows each attempt and each step call: the attempts it ran in, where it was reused, and failed tries of retried steps."
    ),
    code("%relay logs orders-1"),
    md("## As DataFrames\n\nRuns, steps, attempts, events and receipts are pandas DataFrames."),
    code(
        "%relay steps orders-1 -o steps\n"
        "steps[['function_id', 'name', 'status', 'executed_in', 'reused_in', 'retries']]"
    ),
    code(
        "%relay attempts orders-1 -o attempts\n"
        "attempts[['attempt', 'status', 'executed', 'reused']]"
    ),
    md(
        "## A timeline\n\nSteps per attempt on a time axis; reused checkpoints and retries are marked (hover for details)."
    ),
    code("# NBVAL_IGNORE_OUTPUT\n%relay timeline orders-1"),
    md(
        "## Run graphs\n\nOne node per executed step call (loop iterations separately, reused ones badged), and the path the run took overlaid on the static flow graph: which branch, how many iterations, what was never reached."
    ),
    code(
        "# NBVAL_IGNORE_OUTPUT\n"
        "import os\n"
        "from relay_notebook import commands\n"
        "from relay_notebook.history import build_run_graph, overlay_run, read_run_log\n"
        "from relay_notebook.views.mime import GraphView\n"
        "from relay_notebook.workspace import Workspace\n"
        "workspace = Workspace(os.environ['RELAY_HOME'])\n"
        "log = read_run_log(workspace, 'orders-1')\n"
        "GraphView(build_run_graph(log))  # each call's duration is in its details"
    ),
    code("GraphView(overlay_run(commands.graph(workspace, 'orders'), log))"),
]


NOTEBOOKS["09-workers.ipynb"] = [
    md(
        "# Beyond one machine: PostgreSQL and a worker pool\n\n"
        "With `RELAY_DATABASE_URL` set, runs keep their DBOS state in one PostgreSQL database "
        "instead of a SQLite file each. `relay worker` processes (on any machine that shares "
        "the workspace folder) take queued runs from a DBOS queue. When a worker dies, the "
        "others wait for its lease to expire and finish its runs from their checkpoints.\n\n"
        "This tutorial starts a private PostgreSQL server of its own (from Debian's "
        "`postgresql` package); with your own server, set `RELAY_DATABASE_URL` to it instead."
    ),
    code(
        f"# This tutorial's own workspace ({HOME}, beside this notebook, made afresh)\n"
        "# and a private PostgreSQL server\n"
        "import os, shutil\n" + WORKSPACE + "from contextlib import ExitStack\n"
        "from relay_notebook.testing import postgres_server\n"
        "cleanup = ExitStack()\n"
        "server = cleanup.enter_context(postgres_server())\n"
        'os.environ["RELAY_DATABASE_URL"] = server.database_url("tutorial")\n'
        "%load_ext relay_notebook"
    ),
    md("A relay that takes a few seconds: eight steps of a quarter second each."),
    code(
        "%%relay steady\n"
        "import asyncio\n"
        "from dbos import DBOS\n\n"
        "@DBOS.step()\n"
        "async def work(i):\n"
        "    await asyncio.sleep(0.25)\n"
        "    return i * i\n\n"
        "@DBOS.workflow()\n"
        "async def run(INPUT):\n"
        "    total = 0\n"
        '    for i in range(INPUT["n"]):\n'
        "        total += await work(i)\n"
        '    return {"total": total}'
    ),
    md(
        "## Start two workers\n\n"
        "A worker is a long-running process: `relay worker` in a terminal. Here they are "
        "started from Python, with a short lease (2 s) so the tutorial does not wait long."
    ),
    code(
        "import subprocess, sys, time\n\n"
        "def start_worker(name):\n"
        "    return subprocess.Popen(\n"
        '        [sys.executable, "-m", "relay_notebook.cli", "worker", "--id", name, "--lease", "2"],\n'
        "        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\n"
        'workers = {name: start_worker(name) for name in ("worker-a", "worker-b")}\n'
        "while True:  # until both hold a live lease\n"
        "    table = %relay workers\n"
        "    if len(table) == 2 and table.alive.all():\n"
        "        break\n"
        "    time.sleep(0.2)\n"
        'table[["executor_id", "alive", "running", "concurrency"]]'
    ),
    md(
        "## Queue a run, then kill the worker running it\n\n"
        "`%relay run --queue` returns at once; the run waits on the queue for a worker."
    ),
    code("queued = %relay run steady --queue --input '{\"n\": 8}'"),
    code(
        "from relay_notebook.history import read_run_log\n"
        "from relay_notebook.workspace import Workspace\n"
        "ws = Workspace(os.environ['RELAY_HOME'], database_url=os.environ['RELAY_DATABASE_URL'])\n\n"
        "def attempts():\n"
        "    return read_run_log(ws, queued.run_id).attempts\n\n"
        "# wait until three steps are done, then SIGKILL the worker executing the run\n"
        'while sum(1 for s in read_run_log(ws, queued.run_id).steps if s.status == "checkpointed") < 3:\n'
        "    time.sleep(0.05)\n"
        "victim = attempts()[0].executor_id\n"
        "workers[victim].kill()\n"
        "workers[victim].wait()\n"
        'print("killed the worker running attempt 1")'
    ),
    md(
        "Its child process ended with it. The other worker notices the expired lease, puts "
        "the run back on the queue with DBOS's own recovery, and finishes it: the finished "
        "steps come back from their checkpoints."
    ),
    code("outcome = queued.wait(timeout=60)\noutcome.status, outcome.result"),
    code("[(a.attempt, a.status, a.lost, a.executor_id != victim) for a in attempts()]"),
    code(
        "log = read_run_log(ws, queued.run_id)\n"
        "reused = [s.function_id for s in log.steps if s.reused_in]\n"
        'print("at least 3 checkpoints reused:", len(reused) >= 3)\n'
        'print("every step body ran:", all(s.executed_in for s in log.steps))'
    ),
    md("## Clean up"),
    code(
        "for proc in workers.values():\n"
        "    proc.kill()\n"
        "    proc.wait()\n"
        "cleanup.close()  # stops the PostgreSQL server and removes its files"
    ),
]

SHIPPING = (
    "from dbos import DBOS\n\n"
    "LIMIT = {limit}\n\n"
    "@DBOS.step()\n"
    "async def fetch(n):\n"
    "    return n\n\n"
    "@DBOS.step()\n"
    "async def price(n):\n"
    "    return n * 2\n\n"
    "@DBOS.step()\n"
    "async def check(total):\n"
    "    if total > LIMIT:\n"
    '        raise ValueError(f"total {{total}} is over the limit of {{LIMIT}}")\n'
    "    return total\n\n"
    "@DBOS.step()\n"
    "async def ship(total):\n"
    '    return {{"shipped": total}}\n\n'
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    '    n = await fetch(INPUT["n"])\n'
    "    total = await price(n)\n"
    "    total = await check(total)\n"
    "    return await ship(total)"
)

NOTEBOOKS["10-time-travel.ipynb"] = [
    md(
        "# Time travel: fork a run from any step\n\n"
        "A run failed at step 3 of 4. You look at what steps 1 and 2 returned, fix the bug, "
        "and want to go on **from step 3** without paying for steps 1 and 2 again (in real "
        "relays they are agent calls: money and minutes). `%relay fork RUN --from STEP#N` "
        "makes a **new run** whose calls before `STEP#N` are copied checkpoints of the "
        "parent (DBOS's own `fork_workflow`), badged **copied**; the chosen call and everything "
        "after it run fresh. The parent stays as it was: a failed run is never rerun."
    ),
    FRESH,
    code("%%relay shipping\n" + SHIPPING.format(limit=10)),
    md("`n = 6` prices at 12, over the limit: the run fails at `check`."),
    code("%relay run shipping --input '{\"n\": 6}' --wait"),
    md(
        "## Fix the step, fork from it\n\n"
        "Raise the limit in the cell (the draft changes), then fork the failed run from "
        "`check` onto the fixed draft. `fetch` and `price` are copied, not run again: before "
        "a fork onto other code, the kit checks that the new code still calls the copied steps."
    ),
    code("%%relay shipping\n" + SHIPPING.format(limit=100)),
    code("%relay fork shipping-1 --from check --draft --wait"),
    md("## Lineage and diff\n\nWhere the fork came from, and what differs call by call:"),
    code("%relay lineage shipping-2"),
    code("%relay diff shipping-1 shipping-2"),
    md(
        "## Edit a copied output\n\n"
        "`--set STEP#N=JSON` replaces what a copied call returned before the fork starts "
        "(an edit is badged on its node); `--input` replaces the input. Here `price` is "
        "pretended to have returned 8:"
    ),
    code("%relay fork shipping-1 --from check --draft --set price#1=8 --wait"),
    code("%relay lineage shipping-1"),
]

SHOP = (
    "from dbos import DBOS\n\n"
    "@DBOS.step()\n"
    "def price(sku):\n"
    "    return 10\n\n"
    "@DBOS.step()\n"
    "def {pack}(sku):\n"
    "    return sku\n\n"
    "@DBOS.step()\n"
    "def ship(total):\n"
    '    return {{"shipped": total}}\n\n'
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    "    total = 0\n"
    '    for sku in INPUT["items"]:\n'
    "        total += price(sku)\n"
    "{call}"
    "    return ship(total)"
)

NOTEBOOKS["11-safe-change.ipynb"] = [
    md(
        "# Safe change: replay checks, guarantees, crash-each\n\n"
        "A durable run that is still going (interrupted, waiting for a recovery) replays its "
        "recorded history on recovery: DBOS hands back each checkpoint to the call at the same "
        "position, and checks the call's name. Code that no longer calls the same steps in the "
        "same order breaks such runs. The **replay check** finds that before you ship, by "
        "letting DBOS replay new code against recorded runs in a sandbox copy."
    ),
    FRESH,
    md(
        "## A release and an interrupted run\n\n"
        "Each call node carries a **guarantee** tag: `≥1×` for a step (at least once: a crash "
        "after its body ran but before its checkpoint was saved runs it again)."
    ),
    code("%%relay shop\n" + SHOP.format(pack="pack", call="        pack(sku)\n")),
    code("%relay publish shop"),
    code(
        '%relay run shop --release v1 --input \'{"items": ["a", "b"]}\' --crash after:pack#1 --wait'
    ),
    md(
        "## A change that would break it\n\n"
        "Rename `pack` to `wrap`. The replay check replays the draft against the relay's "
        "recorded runs and points at the first call that no longer matches, with its node and "
        "line, and says how `DBOS.patch` would keep old runs on the old path."
    ),
    code("%%relay shop\n" + SHOP.format(pack="wrap", call="        wrap(sku)\n")),
    code("%relay check shop --replay"),
    md(
        "## Make it compatible with `DBOS.patch`\n\n"
        "Runs recorded before the change keep calling `pack`; new runs call `wrap`. (In an "
        "async workflow, `await DBOS.patch_async(...)`.) Both functions stay in the module."
    ),
    code(
        "%%relay shop\n"
        + SHOP.format(
            pack="wrap",
            call=(
                '        if await DBOS.patch_async("use-wrap"):\n'
                "            wrap(sku)\n"
                "        else:\n"
                "            pack(sku)\n"
            ),
        ).replace(
            "@DBOS.step()\ndef ship",
            "@DBOS.step()\ndef pack(sku):\n    return sku\n\n@DBOS.step()\ndef ship",
        )
    ),
    code("%relay check shop --replay"),
    md(
        "Publishing checks the previous release's in-flight runs the same way, and warns when "
        "one would not replay on the new release:"
    ),
    code("%relay publish shop"),
    md(
        "## Crash it everywhere\n\n"
        "`%relay test NAME --crash-each` (`relay test` in a terminal, JSON with `--json`) runs the relay once cleanly, then crashes it after and "
        "during every call, recovers each run, and reports any result that differs (something "
        "not deterministic in the workflow body, or a step not safe to repeat) and the bodies "
        "that ran twice (steps that must be idempotent). The same exists as a pytest plugin for "
        "your own tests (`relay_harness.crash_each`)."
    ),
    code('%relay test shop --crash-each --input \'{"items": ["a"]}\''),
]

REFUND = (
    "from dbos import DBOS\n"
    "from agentworks import agent\n\n"
    "@DBOS.step()\n"
    "async def draft(order, reason):\n"
    '    return await agent(name="clerk", model="scripted:script.json",\n'
    '                       system_prompt="Draft a refund as JSON.",\n'
    '                       user_message=f"Order {order}: {reason}",\n'
    '                       output_schema={"type": "object", "required": ["amount"]})\n\n'
    "@DBOS.step()\n"
    "def pay(order, amount, note):\n"
    '    return {"order": order, "paid": amount, "note": note}\n\n'
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    '    refund = await draft(INPUT["order"], INPUT["reason"])\n'
    '    await DBOS.set_event_async("draft", refund)\n'
    '    answer = await DBOS.recv_async("approval", timeout_seconds=24 * 3600)\n'
    '    if not answer or not answer.get("approved"):\n'
    '        return {"order": INPUT["order"], "refunded": False}\n'
    '    return pay(INPUT["order"], refund["amount"], answer.get("note"))'
)

NOTEBOOKS["12-approvals.ipynb"] = [
    md(
        "# Approvals: runs that wait for people\n\n"
        "Agent programs stop for people: *draft the refund, wait for a manager's approval, "
        "then pay*. A relay waits with DBOS's own durable primitives: `DBOS.recv` (a message "
        "on a topic), `DBOS.sleep` (a timer), and it shows its progress with `DBOS.set_event` "
        "and `DBOS.write_stream`. A run blocked in a wait for longer than a short grace (3 s "
        "by default; 1 s here) **ends its attempt with status `waiting`**: no process is held "
        "while it waits, for minutes or days. A message, or its due timer, resumes it in a new "
        "attempt that replays to the wait from checkpoints."
    ),
    code(FRESH.source + "\n%config RelayMagics.wait_grace = 1"),
    md(
        "## A relay that waits for a manager\n\n"
        "An agent drafts the refund (a scripted model here, as in tutorial 03), the draft is "
        "published as the run's `draft` event, and the workflow waits for a message on topic "
        "`approval`. The flow graph draws the event and the wait as their own nodes."
    ),
    code("%%relay refund\n" + REFUND),
    code(
        "import json, os, pathlib\n"
        "home = pathlib.Path(os.environ['RELAY_HOME'])\n"
        "script = {'clerk': [{'content': {'amount': 40, 'text': 'Refund 40 EUR: item arrived broken.'}}]}\n"
        "_ = (home / 'refund' / 'script.json').write_text(json.dumps(script))"
    ),
    code('%relay run refund --input \'{"order": "A-17", "reason": "arrived broken"}\' --wait'),
    md(
        "The run **waits**: its attempt ended after drafting, and the header says what it "
        "waits for and how to answer. No process runs for it now:"
    ),
    code("%relay runs refund"),
    md(
        "## Approve it\n\n"
        "`%relay send RUN TOPIC JSON` delivers the message durably with DBOS (`relay send` in a "
        "terminal, `POST /runs/RUN/messages` over REST) and resumes the run: `draft` comes back "
        "from its checkpoint (the agent is not called again), the message reaches the "
        "workflow, and `pay` runs."
    ),
    code('%relay send refund-1 approval \'{"approved": true, "note": "ok, Ann"}\' --wait'),
    md(
        "A second send with the same `--idempotency-key` would deliver nothing twice; a "
        "message to a finished run is refused."
    ),
    md("## A rejected refund\n\nThe relay's own logic decides what a rejection means:"),
    code('%relay run refund --input \'{"order": "B-2", "reason": "changed my mind"}\' --wait'),
    code("%relay send refund-2 approval '{\"approved\": false}' --wait"),
    md(
        "## A durable sleep\n\n"
        "`DBOS.sleep` longer than the grace also ends the attempt. Its timer is kept by DBOS; "
        "when it is due the run resumes: here in this kernel (the extension wakes due runs "
        "while it is loaded), on a machine without a kernel with `relay wake` (e.g. from "
        "cron) or any `relay` command, and on PostgreSQL by the worker pool. Waiting counts "
        "neither against the run's attempt budget nor against its deadline."
    ),
    code(
        "%%relay reminder\n"
        "from dbos import DBOS\n\n"
        "@DBOS.step()\n"
        "def note(text):\n"
        "    return text\n\n"
        "@DBOS.workflow()\n"
        "async def run(INPUT):\n"
        '    first = note("asked the customer")\n'
        "    await DBOS.sleep_async(3)\n"
        '    return {"first": first, "then": note("followed up")}'
    ),
    code("%relay run reminder --wait"),
    md("`%relay wait RUN` blocks until the run has finished, through its waits:"),
    code("%relay wait reminder-1"),
    code("%relay logs reminder-1"),
]

NOTEBOOKS["13-dbos-programs.ipynb"] = [
    md(
        "# DBOS programs as relays\n\n"
        "A program written as DBOS's documentation writes one is a relay with two changes: its "
        "entry point is named `run(INPUT)`, and DBOS's configuration and `DBOS.launch()` are "
        "left to the kit. Everything else stays DBOS's: sync workflows, queues declared at "
        "the top, child workflows, datasource transactions."
    ),
    FRESH,
    md(
        "## A queue fanning out child workflows\n\n"
        "The queue is registered at module level, as DBOS 3.4 documents it (the kit makes the "
        "call right after it launches DBOS). `run` is a **sync** workflow: `@DBOS.workflow() "
        "def run` runs in a thread, as DBOS runs one. The flow graph draws the child workflow "
        "`process` as its own node, followed by the child's steps."
    ),
    code(
        "%%relay fan\n"
        "from dbos import DBOS\n\n"
        "# one child at a time, polled every 0.1 s\n"
        'queue = DBOS.register_queue("tasks", worker_concurrency=1, polling_interval_sec=0.1)\n\n'
        "@DBOS.step()\n"
        "def process_task(task):\n"
        "    return task * 10\n\n"
        "@DBOS.step()\n"
        "def finish(task, value):\n"
        "    return value + task\n\n"
        "@DBOS.workflow()\n"
        "def process(task):\n"
        "    return finish(task, process_task(task))\n\n"
        "@DBOS.workflow()\n"
        "def run(INPUT):\n"
        '    handles = [queue.enqueue(process, task) for task in INPUT["tasks"]]\n'
        '    return {"results": [handle.get_result() for handle in handles]}'
    ),
    md(
        "## Crashed inside a child's step\n\n"
        "Every step of a child is a crash point, numbered over the attempt: `process_task#2` "
        "would be the second `process_task` call, whichever child makes it. Here the process "
        "is killed right after the first child's `process_task` is checkpointed, while the "
        "parent waits for its children."
    ),
    code("%relay run fan --input '{\"tasks\": [1, 2, 3]}' --crash after:process_task#1 --wait"),
    md(
        "Recovery finishes the parent and every child from their checkpoints: the parent's "
        "three enqueue calls and the first child's `process_task` come back reused, no step "
        "body runs twice, and the result is the one bare DBOS gives."
    ),
    code("%relay recover fan-1 --wait"),
    md(
        "## A datasource transaction\n\n"
        "DBOS 3's transactions belong to a datasource made at the top of the program "
        "(`SQLAlchemyDatasource.create(url)`; a relative SQLite path is the run's own folder). "
        "Each `@ds.transaction()` is drawn as a step marked with its datasource and the "
        "guarantee *exactly once*: it commits together with its checkpoint. The removed "
        "`@DBOS.transaction` is refused at admission, naming the datasource API."
    ),
    code(
        "%%relay greetings\n"
        "import sqlalchemy as sa\n"
        "from dbos import DBOS, SQLAlchemyDatasource\n\n"
        'ds = SQLAlchemyDatasource.create("sqlite:///app.sqlite")\n\n'
        "@ds.transaction()\n"
        "def create_table():\n"
        '    ds.sql_session().execute(sa.text("CREATE TABLE IF NOT EXISTS greetings (name TEXT)"))\n\n'
        '@ds.transaction(name="greet")\n'
        "def insert_greeting(name):\n"
        '    ds.sql_session().execute(sa.text("INSERT INTO greetings VALUES (:n)"), {"n": name})\n'
        "    return name\n\n"
        "@ds.transaction()\n"
        "def count_greetings():\n"
        '    return ds.sql_session().execute(sa.text("SELECT count(*) FROM greetings")).scalar()\n\n'
        "@DBOS.step()\n"
        "def shout(name):\n"
        "    return name.upper()\n\n"
        "@DBOS.workflow()\n"
        "def run(INPUT):\n"
        "    create_table()\n"
        '    for name in INPUT["names"]:\n'
        "        insert_greeting(shout(name))\n"
        '    return {"count": count_greetings()}'
    ),
    code('%relay run greetings --input \'{"names": ["ann", "bo"]}\' --wait'),
    md(
        "## A sync workflow with DBOS's sync APIs\n\n"
        "Both relays above are sync workflows. DBOS's sync APIs work inside one as they do "
        "under bare DBOS: here an event that reports progress and a durable sleep."
    ),
    code(
        "%%relay tally\n"
        "from dbos import DBOS\n\n"
        "@DBOS.step()\n"
        "def fetch(n):\n"
        "    return n * 2\n\n"
        "@DBOS.workflow()\n"
        "def run(INPUT):\n"
        '    values = [fetch(n) for n in range(INPUT["n"])]\n'
        '    DBOS.set_event("progress", len(values))\n'
        "    DBOS.sleep(0.1)\n"
        '    return {"values": values, "total": sum(values)}'
    ),
    code("%relay run tally --input '{\"n\": 3}' --wait"),
]

PYDANTIC_SHOP = (
    "from dbos import DBOS\n"
    "from pydantic_ai import Agent\n"
    "from pydantic_ai.durable_exec.dbos import DBOSDurability\n"
    "from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart\n"
    "from pydantic_ai.models.function import FunctionModel\n\n"
    "def reply(messages, info):\n"
    '    """An offline model: first it asks for the stock of A-1, then it answers."""\n'
    "    returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]\n"
    "    if not returned:\n"
    '        return ModelResponse(parts=[ToolCallPart("stock", {"sku": "A-1"})])\n'
    '    return ModelResponse(parts=[TextPart(f"The warehouse says: {returned[-1].content}")])\n\n'
    'agent = Agent(FunctionModel(reply, model_name="offline-clerk"), name="clerk",\n'
    '              instructions="Answer stock questions.", capabilities=[DBOSDurability()])\n\n'
    'STOCK = {"A-1": 3, "B-7": 0}\n\n'
    "@agent.tool_plain\n"
    "@DBOS.step()  # a tool that does I/O is a step of its own\n"
    "async def stock(sku: str) -> str:\n"
    '    """How many of a product the warehouse has."""\n'
    '    return f"{STOCK.get(sku, 0)} of {sku} in stock"\n\n'
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    '    result = await agent.run(INPUT["question"])\n'
    '    return {"answer": result.output}'
)

OPENAI_SHOP = (
    "from agents import Agent, Model, ModelResponse, RunConfig, Usage, function_tool\n"
    "from dbos import DBOS\n"
    "from dbos_openai_agents import DBOSRunner\n"
    "from openai.types.responses import (\n"
    "    ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText,\n"
    ")\n\n"
    "class OfflineModel(Model):\n"
    '    """The SDK\'s model interface, answered offline: a stock call, then a text."""\n\n'
    '    model = "offline-gpt"\n\n'
    "    async def get_response(self, system_instructions, input, model_settings, tools,\n"
    "                           output_schema, handoffs, tracing, **kwargs):\n"
    "        items = input if isinstance(input, list) else []\n"
    "        outputs = [i for i in items\n"
    '                   if isinstance(i, dict) and i.get("type") == "function_call_output"]\n'
    "        if not outputs:\n"
    '            output = [ResponseFunctionToolCall(type="function_call", call_id="call-1",\n'
    '                                               name="stock", arguments=\'{"sku": "A-1"}\')]\n'
    "            usage = Usage(requests=1, input_tokens=40, output_tokens=8, total_tokens=48)\n"
    "        else:\n"
    '            text = ResponseOutputText(type="output_text", annotations=[],\n'
    "                                      text=f\"The warehouse says: {outputs[-1]['output']}\")\n"
    '            output = [ResponseOutputMessage(id="msg-1", type="message", role="assistant",\n'
    '                                            status="completed", content=[text])]\n'
    "            usage = Usage(requests=1, input_tokens=61, output_tokens=12, total_tokens=73)\n"
    "        return ModelResponse(output=output, usage=usage, response_id=None)\n\n"
    "    def stream_response(self, *args, **kwargs):\n"
    '        raise NotImplementedError("offline model: no streaming")\n\n'
    'STOCK = {"A-1": 3, "B-7": 0}\n\n'
    "@function_tool\n"
    "@DBOS.step()  # a tool that does I/O is a step of its own\n"
    "async def stock(sku: str) -> str:\n"
    '    """How many of a product the warehouse has."""\n'
    '    return f"{STOCK.get(sku, 0)} of {sku} in stock"\n\n'
    'agent = Agent(name="clerk", instructions="Answer stock questions.", model=OfflineModel(),\n'
    "              tools=[stock])\n\n"
    "@DBOS.workflow()\n"
    "async def run(INPUT):\n"
    "    # offline: no traces sent to OpenAI\n"
    "    config = RunConfig(tracing_disabled=True)\n"
    '    result = await DBOSRunner.run(agent, INPUT["question"], run_config=config)\n'
    '    return {"answer": result.final_output}'
)


def agent_prices(model: str) -> nbf.NotebookNode:
    """The cell giving the tutorial's offline model a price in the workspace's prices.yaml."""
    return code(
        "import pathlib\n"
        f"prices = 'as_of: 2026-12-01\\nmodels:\\n  {model}: {{input: 2.0, output: 8.0}}\\n'\n"
        "_ = (pathlib.Path(os.environ['RELAY_HOME']) / 'prices.yaml').write_text(prices)"
    )


#: one row per run: what its model calls paid, and what it did not pay (reused or copied)
COST_TABLE = code(
    "import pandas as pd\n"
    "table = {}\n"
    "for run in ['shop-1', 'shop-2']:\n"
    "    log = %relay logs {run} --json\n"
    "    for what, key in [('paid', 'paid'), ('not paid', 'saved')]:\n"
    "        total = log['usage'][key]\n"
    "        table.setdefault(run, {}).update({\n"
    "            (what, 'calls'): total['calls'],\n"
    "            (what, 'in'): total['input_tokens'],\n"
    "            (what, 'out'): total['output_tokens'],\n"
    "            (what, 'USD'): total['cost']})\n"
    "pd.DataFrame.from_dict(table, orient='index')"
)


def agent_steps(framework: str, model: str, request: str) -> list[nbf.NotebookNode]:
    """Tutorials 14 and 15 after their relay cell: crash in the tool, recover, the log with
    the tokens, a fork with an edited model answer, the cost table."""
    ask = '--input \'{"question": "Is A-1 in stock?"}\''
    edited = '{"tool_calls": [{"tool": "stock", "args": {"sku": "B-7"}}]}'
    return [
        md(
            "Model prices come from a dated table shipped with the kit "
            "(`relay_notebook/workspace/prices.yaml`, USD per million tokens); a `prices.yaml` "
            "in the workspace overrides it model by model. The offline model gets a price "
            "here so the costs below are not zero:"
        ),
        agent_prices(model),
        md(
            "## Crash during the tool call\n\n"
            f"The run asks the model (`{request}#1`), which asks for the stock of A-1, and "
            "`--crash during:stock` kills the process inside the tool's body: the first model "
            "request is checkpointed, the tool's checkpoint is never written. The run is "
            "**interrupted**."
        ),
        code(f"%relay run shop {ask} --crash during:stock --wait"),
        md(
            "## Recover it\n\n"
            "Recovery replays the workflow from its checkpoints: the first model request comes "
            "back **reused** (the model is not asked, or paid, again), `stock` runs again (it "
            "has no checkpoint) and the second request runs for the first time. The run "
            "view paints the agent's node with its three calls, and its header sums up what "
            "the model calls cost."
        ),
        code("%relay recover shop-1 --wait"),
        md(
            "The log says where each call ran and where it was reused (`model` is a model "
            f"request, `tool` a tool call; {framework} reported the tokens), then the model "
            "calls' tokens and cost: per run, per attempt and per call, with what recovery did "
            "**not** pay because it reused the first request."
        ),
        code("%relay logs shop-1"),
        md(
            "## What if the model had said something else?\n\n"
            "`%relay fork RUN --from CALL#N --set CALL#M=JSON` makes a new run whose calls before "
            "`CALL#N` are copied from the parent, with a copied model answer replaced (badged "
            "**edited**). Here the first answer becomes a tool call for B-7 instead of A-1, and "
            "the fork starts at the tool call: `stock` and the second request run fresh on the "
            'edited answer, and the result differs. An answer is text, or `{"text": ..., '
            '"tool_calls": [{"tool": ..., "args": {...}}]}`.'
        ),
        code(f"%relay fork shop-1 --from stock#1 --set '{request}#1={edited}' --wait"),
        md(
            "## The cost table\n\n"
            "Per run, the model calls it paid for (their input and output tokens and their "
            "cost) and those it did **not** pay: `shop-1`'s recovery reused the first request, "
            "the fork `shop-2` copied it from its parent. The numbers are those of "
            "`%relay logs RUN --json`; the run view's header and `relay logs` in a terminal "
            "show them too."
        ),
        COST_TABLE,
    ]


NOTEBOOKS["14-pydantic-ai.ipynb"] = [
    md(
        "# A Pydantic AI agent as a relay\n\n"
        "Pydantic AI has durable execution on DBOS of its own: each model request becomes a "
        "DBOS step, and a tool that does I/O can be one. An agent written as Pydantic AI "
        "documents it is a relay (install `relay-notebook[pydantic-ai]`); the kit launches "
        "DBOS, the relay does not. Each model request and tool call is a call of the run, "
        "checkpointed, with its tokens and their cost. This tutorial runs offline: the model "
        "is Pydantic AI's `FunctionModel`, a Python function that answers like a model."
    ),
    FRESH,
    md(
        "## The agent\n\n"
        "An agent with one tool, `stock`, made durable with Pydantic AI's `DBOSDurability()` "
        "capability (it runs in the relay's own workflow; `DBOSAgent(agent)` works too, in a "
        "child workflow). The offline model asks for the stock of A-1, then answers with what "
        "the tool returned. The flow graph draws the agent as one node; its details list the "
        "model, the tool and the names its calls get: `clerk__model.request` for each model "
        "request, `stock` for the tool."
    ),
    code("%%relay shop\n" + PYDANTIC_SHOP),
    *agent_steps("Pydantic AI", "offline-clerk", "clerk__model.request"),
]

NOTEBOOKS["15-openai-agents.ipynb"] = [
    md(
        "# An OpenAI Agents SDK agent as a relay\n\n"
        "The OpenAI Agents SDK runs durably on DBOS with `dbos-openai-agents`: "
        "`DBOSRunner.run(agent, ...)` in a DBOS workflow makes each model request a DBOS step, "
        "and a tool that does I/O can be one. Written as that package documents it, the agent "
        "is a relay (install `relay-notebook[openai-agents]`); the kit launches DBOS, the "
        "relay does not. Each model request and tool call is a call of the run, checkpointed, "
        "with its tokens and their cost. This tutorial runs offline: the model implements the "
        "SDK's `Model` interface with scripted answers and token counts."
    ),
    FRESH,
    md(
        "## The agent\n\n"
        "An agent with one tool, `stock` (a `@function_tool` that is also a DBOS step). The "
        "offline model asks for the stock of A-1, then answers with what the tool returned. "
        "The flow graph draws the agent as one node; its details list the model, the tool and "
        "the names its calls get: `_model_call_step` for each model request (`DBOSRunner` "
        "gives every request that name), `stock` for the tool."
    ),
    code("%%relay shop\n" + OPENAI_SHOP),
    *agent_steps("the SDK", "offline-gpt", "_model_call_step"),
]


def main(names: list[str]) -> None:
    """Write every tutorial, or only those named (``python tools/make_notebooks.py 13-….ipynb``)."""
    for name, cells in NOTEBOOKS.items():
        if names and name not in names:
            continue
        nb = nbf.v4.new_notebook()
        # each tutorial its own workspace: re-running one never clears another's panel
        home = HOME.replace("NN", name[:2])
        nb["cells"] = [
            code(c.source.replace(HOME, home)) if c.cell_type == "code" else c for c in cells
        ]
        # the kernelspec Jupyter writes itself, so a tutorial opens unmodified
        nb["metadata"]["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
        }
        nbf.write(nb, ROOT / name)


if __name__ == "__main__":
    main(sys.argv[1:])
