"""Determinism lint: warnings for effects a relay's workflow bodies perform, from the AST."""

from __future__ import annotations

import ast
import textwrap

import pytest

from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source import lint
from relay_notebook.source.lint import lint_source

IMPORTS = """\
import asyncio
import datetime
import datetime as dt
import os
import random
import secrets
import socket
import subprocess
import time
import urllib.request
import uuid
from datetime import date
from os import environ
from pathlib import Path
from time import time as now

import httpx
import numpy as np
import requests
from dbos import DBOS
"""
RUN_LINE = IMPORTS.count("\n") + 4  # the first line of run's body


def in_run(*statements: str, imports: str = IMPORTS) -> str:
    """A module whose workflow `run` executes ``statements`` starting at RUN_LINE."""
    body = "".join(f"    {s}\n" for s in statements)
    return f"{imports}\n@DBOS.workflow()\nasync def run(INPUT):\n{body}    return None\n"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def found(diagnostics: list[Diagnostic]) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in diagnostics]


INVOICE = """\
from dbos import DBOS
from agentworks import agent

@DBOS.step(name="extract_invoice")
async def extract_invoice(text):
    return await agent(name="extract", system_prompt="Extract invoice fields as JSON.",
                       user_message=text, output_schema={"type": "object"})

@DBOS.workflow(max_recovery_attempts=3)
async def run(INPUT):
    invoice = await extract_invoice(INPUT["text"])
    for item in sorted(set(invoice["items"])):
        await DBOS.sleep_async(1)
    return {"invoice": invoice}
"""


def test_a_deterministic_relay_gets_no_warning() -> None:
    """A relay whose effects all live in steps gets no warning at all."""
    assert lint_source(INVOICE) == []


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        ("t = time.time()", "nondeterministic-time"),
        ("t = time.monotonic()", "nondeterministic-time"),
        ("t = time.perf_counter_ns()", "nondeterministic-time"),
        ("t = datetime.datetime.now()", "nondeterministic-time"),
        ("t = dt.datetime.utcnow()", "nondeterministic-time"),
        ("t = date.today()", "nondeterministic-time"),
        ("t = now()", "nondeterministic-time"),
        ("t = time.strftime('%Y')", "nondeterministic-time"),
        ("n = random.random()", "nondeterministic-random"),
        ("n = random.choice(INPUT['items'])", "nondeterministic-random"),
        ("n = secrets.token_hex(8)", "nondeterministic-random"),
        ("n = np.random.rand()", "nondeterministic-random"),
        ("n = os.urandom(8)", "nondeterministic-random"),
        ("u = uuid.uuid4()", "nondeterministic-uuid"),
        ("u = str(uuid.uuid1())", "nondeterministic-uuid"),
        ("k = os.environ['API_KEY']", "env-read-in-workflow"),
        ("k = os.environ.get('API_KEY')", "env-read-in-workflow"),
        ("k = os.getenv('API_KEY')", "env-read-in-workflow"),
        ("k = 'API_KEY' in os.environ", "env-read-in-workflow"),
        ("k = environ['API_KEY']", "env-read-in-workflow"),
        ("f = open('data.txt')", "io-in-workflow"),
        ("f = Path('data.txt').read_text()", "io-in-workflow"),
        ("f = Path('data.txt').open()", "io-in-workflow"),
        ("r = requests.get(INPUT['url'])", "io-in-workflow"),
        ("r = await httpx.AsyncClient().get(INPUT['url'])", "io-in-workflow"),
        ("r = urllib.request.urlopen(INPUT['url'])", "io-in-workflow"),
        ("s = socket.create_connection(('example.com', 80))", "io-in-workflow"),
        ("p = subprocess.run(['ls'])", "io-in-workflow"),
        ("p = os.system('ls')", "io-in-workflow"),
        ("for x in set(INPUT['items']): pass", "set-iteration"),
        ("for x in {1, 2, 3}: pass", "set-iteration"),
        ("xs = [x for x in {y for y in INPUT['items']}]", "set-iteration"),
        ("for x in list(set(INPUT['items'])): pass", "set-iteration"),
        ("await asyncio.sleep(1)", "sleep-in-workflow"),
        ("time.sleep(1)", "sleep-in-workflow"),
        ("w = DBOS.list_workflows()", "introspection-in-workflow"),
        ("w = await DBOS.list_workflow_steps_async(INPUT['id'])", "introspection-in-workflow"),
        ("w = DBOS.get_workflow_status(INPUT['id'])", "introspection-in-workflow"),
        ("w = await DBOS.retrieve_workflow_async(INPUT['id'])", "introspection-in-workflow"),
    ],
)
def test_each_effect_in_run_is_one_warning_at_its_line(statement: str, code: str) -> None:
    """Every kind of effect in the workflow body yields exactly its code at its line."""
    diagnostics = lint_source(in_run(statement))
    assert found(diagnostics) == [(code, RUN_LINE)]
    assert diagnostics[0].severity == "warning"
    assert "the workflow `run`" in diagnostics[0].message


@pytest.mark.parametrize(
    "statement",
    [
        "rng = random.Random(42)",
        "rng = np.random.default_rng(7)",
        "u = uuid.uuid5(uuid.NAMESPACE_URL, INPUT['url'])",
        "t = time.strftime('%Y', time.gmtime(INPUT['epoch']))",
        "for x in sorted(set(INPUT['items'])): pass",
        "n = len(set(INPUT['items']))",
        "n = sum(x for x in set(INPUT['items']))",
        "for k in dict.fromkeys(INPUT['items']): pass",
        "await DBOS.sleep_async(5)",
        "s = DBOS.workflow_id",
        "print(INPUT)",
    ],
)
def test_deterministic_lookalikes_get_no_warning(statement: str) -> None:
    """Seeded generators, sorted sets, name-based UUIDs and DBOS's own sleep are not flagged."""
    assert lint_source(in_run(statement)) == []


def test_a_variable_holding_a_set_is_flagged_when_iterated() -> None:
    """Iterating a local name that is only ever bound to a set is flagged at the loop."""
    source = in_run("seen = set()", "seen |= {1}", "for s in seen: pass")
    assert found(lint_source(source)) == [("set-iteration", RUN_LINE + 2)]
    rebound = in_run("seen = set()", "seen = sorted(seen)", "for s in seen: pass")
    assert lint_source(rebound) == []


def test_one_warning_per_offending_call() -> None:
    """Two clock reads on one line are two warnings; one qualified call is never counted twice."""
    diagnostics = lint_source(in_run("t = time.time() + time.time()"))
    assert [(d.line, d.col) for d in diagnostics] == [(RUN_LINE, 8), (RUN_LINE, 22)]
    assert len(lint_source(in_run("t = datetime.datetime.now(datetime.timezone.utc)"))) == 1


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        ("t = time.time()", "move it into a @DBOS.step function and call that step"),
        ("k = os.getenv('K')", "agentworks `variables`"),
        ("for x in {1, 2}: pass", "sorted(...)"),
        ("await asyncio.sleep(1)", "DBOS.sleep_async"),
        ("w = DBOS.list_workflows()", "relay logs RUN"),
    ],
)
def test_messages_name_the_call_and_the_fix(code: str, fix: str) -> None:
    """Each warning is one sentence naming what it saw and what to change."""
    (diagnostic,) = lint_source(in_run(code))
    assert fix in diagnostic.message
    assert diagnostic.message.endswith(".")
    assert diagnostic.code in lint.CODES


def test_step_bodies_are_exempt() -> None:
    """Effects inside @DBOS.step, @DBOS.transaction and @tool functions are not flagged."""
    source = src(
        """
        import time, random, requests
        from dbos import DBOS
        from agentworks import tool

        @DBOS.step()
        async def fetch(url):
            time.sleep(1)
            return requests.get(url).text, time.time(), random.random()

        @DBOS.transaction()
        def save(row):
            return open("rows.txt", "a").write(row)

        @tool
        def lookup(order_id: str) -> str:
            return requests.get(order_id).text

        @DBOS.workflow()
        async def run(INPUT):
            page = await fetch(INPUT["url"])
            save(page)
            lookup("x")
            return page
        """
    )
    assert lint_source(source) == []


#: a helper run calls, and the helper it calls (not the unused one)
TRANSITIVE = src(
    """
    import time
    from dbos import DBOS

    def stamp():
        return time.time()

    async def prepare(x):
        return {"x": x, "at": stamp()}

    def unused():
        return time.time()

    @DBOS.step()
    async def save(x):
        return stamp()

    @DBOS.workflow()
    async def run(INPUT):
        data = await prepare(INPUT)
        return await save(data)
    """
)

#: a child workflow, linted like run under its own name
CHILD_WORKFLOW = src(
    """
    import random
    from dbos import DBOS

    @DBOS.workflow()
    async def child(x):
        return random.random()

    @DBOS.workflow()
    async def run(INPUT):
        return await child(INPUT)
    """
)


@pytest.mark.parametrize(
    ("source", "code", "line", "said"),
    [
        pytest.param(TRANSITIVE, "nondeterministic-time", 5,
                     "`stamp`, which the workflow `run` calls", id="helpers-called-from-run"),
        pytest.param(CHILD_WORKFLOW, "nondeterministic-random", 6, "the workflow `child`",
                     id="every-module-level-workflow"),
    ],
)  # fmt: skip
def test_code_a_workflow_runs_is_linted_and_named(
    source: str, code: str, line: int, said: str
) -> None:
    """Helpers run calls (transitively) and every module-level workflow are linted; the message
    names the function and the workflow it runs in."""
    diagnostics = lint_source(source)
    assert found(diagnostics) == [(code, line)]
    assert said in diagnostics[0].message


def test_legacy_step_bodies_passed_to_ctx_step_are_exempt() -> None:
    """Functions and lambdas handed to `ctx.step` are step bodies, so their effects are fine."""
    source = src(
        """
        import time
        import requests

        async def run(INPUT, ctx):
            def fetch():
                return requests.get(INPUT["url"]).text
            page = await ctx.step("fetch", fetch)
            stamp = await ctx.step("stamp", lambda: time.time())
            started = time.time()
            return {"page": page, "stamp": stamp}
        """
    )
    assert found(lint_source(source)) == [("nondeterministic-time", 9)]


def test_aliases_resolve_through_imports() -> None:
    """Import aliases are followed, and an unrelated function of the same name is not flagged."""
    source = src(
        """
        from random import randint as pick
        import os as operating_system
        from dbos import DBOS

        def time():
            return 0

        @DBOS.workflow()
        async def run(INPUT):
            n = pick(1, 6)
            k = operating_system.environ["HOME"]
            return time() + n
        """
    )
    assert found(lint_source(source)) == [
        ("nondeterministic-random", 10),
        ("env-read-in-workflow", 11),
    ]


@pytest.mark.parametrize(
    ("statement", "line"),
    [
        ('print("loading relay")', 4),
        ('DATA = open("data.json").read()', 4),
        ('KEY = os.environ["API_KEY"]', 4),
        ("CLIENT = httpx.Client()", 4),
        ("if os.getenv('DEBUG'):\n    print('debug')", 4),
    ],
)
def test_module_level_effects_are_toplevel_side_effects(statement: str, line: int) -> None:
    """Module-level calls and effects run on every import, so they are flagged where they are."""
    source = f"import os\nimport httpx\n\n{statement}\n" + in_run("pass", imports="")
    diagnostics = lint_source(source)
    assert {(d.code, d.line) for d in diagnostics} == {("toplevel-side-effect", line)} | (
        {("toplevel-side-effect", 5)} if "debug" in statement else set()
    )
    assert all("every import" in d.message for d in diagnostics)


def test_declarations_at_module_level_are_not_side_effects() -> None:
    """Imports, constants, regexes, loggers, classes and the main guard are not flagged."""
    source = src(
        """
        import logging
        import re
        from dbos import DBOS

        LIMIT = 1000
        PATTERN = re.compile(r"[0-9]+")
        logger = logging.getLogger(__name__)

        class Invoice:
            currency = "EUR"

        @DBOS.workflow()
        async def run(INPUT):
            return LIMIT

        if __name__ == "__main__":
            print("not run on import")
        """
    )
    assert lint_source(source) == []


def test_forbidden_dbos_calls_are_left_to_admission() -> None:
    """A module-level DBOS.launch() is an admission error, not also a lint warning."""
    assert lint_source("from dbos import DBOS\nDBOS.launch()\n") == []


def test_unparsable_source_has_no_lint_warnings() -> None:
    """Source with a syntax error yields no warnings: admission reports it."""
    assert lint_source("def run(INPUT:\n") == []


def test_output_is_sorted_and_identical_across_calls() -> None:
    """The same source gives the same warnings in the same order, from text or a parsed tree."""
    source = in_run("k = os.getenv('A')", "t = time.time()", "for x in {1}: pass")
    first = lint_source(source)
    assert first == sorted(first)
    assert lint_source(ast.parse(source)) == first
    assert [d.to_dict() for d in lint_source(source)] == [d.to_dict() for d in first]
    assert [d.line for d in first] == [RUN_LINE, RUN_LINE + 1, RUN_LINE + 2]


AWAITS = """\
import asyncio
from dbos import DBOS


@DBOS.step()
async def fetch(x):
    return x


async def helper(x):
    return fetch(x)


@DBOS.workflow()
async def run(INPUT):
    value = fetch(1)
    fetch(2)
    ok = await fetch(3)
    both = await asyncio.gather(fetch(4), *[fetch(i) for i in range(3)])
    also = await helper(5)
    pending = [fetch(i) for i in range(2)]
    return fetch(6)
"""


def test_an_async_step_called_without_await_is_a_warning_with_its_line_and_fix() -> None:
    """`value = fetch(x)`, a bare `fetch(x)`, a list of unawaited calls and a returned call are
    flagged at their lines; awaited, gathered and helper-returned calls are not."""
    found = [d for d in lint_source(AWAITS) if d.code == "missing-await"]
    lines = AWAITS.splitlines()
    expected = [
        i + 1
        for i, text in enumerate(lines)
        if text.strip()
        in (
            "value = fetch(1)",
            "fetch(2)",
            "pending = [fetch(i) for i in range(2)]",
            "return fetch(6)",
        )
    ]
    assert [d.line for d in found] == expected
    assert found[0].severity == "warning"
    assert "calls the async step `fetch` without `await`" in found[0].message
    assert "write `await fetch(...)`" in found[0].message
    assert "cannot pickle 'coroutine' object" in found[0].message


def test_admission_reports_the_missing_await_as_a_warning(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A draft with a missing await is admitted, with the warning in its check report."""
    from relay_notebook import commands
    from relay_notebook.workspace import Workspace

    ws = Workspace(tmp_path / "relays")
    ws.save_draft("late", AWAITS)
    report = commands.check(ws, "late")
    assert report.ok
    assert "missing-await" in {d.code for d in report.diagnostics}
