"""Admission: the errors that stop a relay's source, decided from the AST alone."""

from __future__ import annotations

import ast
import re
import textwrap

import pytest

from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.source import admission, lint
from relay_notebook.source.admission import admit_source, check_source, entrypoint_kind
from tests.relays import relay_source

INVOICE = relay_source("invoice")

LEGACY_SYNC = """\
def run(INPUT, ctx):
    answer = ctx.call_agent("summarize", INPUT["text"])
    return {"answer": answer}
"""

LEGACY_ASYNC = """\
import requests

async def run(INPUT, ctx):
    page = await ctx.step("fetch", lambda: requests.get(INPUT["url"]).text)
    return {"page": page}
"""


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def found(diagnostics: list[Diagnostic]) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in diagnostics]


def workflow(body: str = "return INPUT", *, header: str = "from dbos import DBOS\n") -> str:
    return header + f"\n@DBOS.workflow()\nasync def run(INPUT):\n    {body}\n"


def test_spec_invoice_example_is_admitted_without_any_diagnostic() -> None:
    """The SPEC's invoice relay passes admission and the lint with nothing to report."""
    assert check_source(INVOICE) == []
    assert entrypoint_kind(INVOICE) == "workflow"


def test_syntax_error_reports_pythons_reason_and_position_alone() -> None:
    """A syntax error is reported at its line and column with Python's reason, and nothing else."""
    source = "from dbos import DBOS\nDBOS.launch()\ndef run(INPUT)\n    return 1\n"
    diagnostics = check_source(source)
    assert found(diagnostics) == [("syntax-error", 3)]
    assert diagnostics[0].col == 14
    assert "expected ':'" in diagnostics[0].message
    assert diagnostics[0].severity == "error"


def test_undecodable_text_is_a_syntax_error_on_its_line() -> None:
    """Text Python cannot encode (a lone surrogate) is a syntax error on the line it sits on."""
    assert found(check_source("x = 1\ny = '\ud800'\n")) == [("syntax-error", 2)]


@pytest.mark.parametrize(
    ("source", "code", "line", "said"),
    [
        # a module without `run` is told to define the workflow entrypoint
        pytest.param("from dbos import DBOS\n\nVALUE = 1\n", "missing-entrypoint", 1,
                     "@DBOS.workflow() async def run(INPUT)", id="missing-entrypoint"),
        # an `async def run(INPUT)` without @DBOS.workflow() is told to add the decorator
        pytest.param("async def run(INPUT):\n    return INPUT\n", "entrypoint-not-workflow", 1,
                     "@DBOS.workflow()", id="undecorated-async-run"),
        # a `run` decorated @DBOS.step() is told to replace the decorator
        pytest.param("from dbos import DBOS\n\n@DBOS.step()\nasync def run(INPUT):\n    return 1\n",
                     "entrypoint-not-workflow", 4, "replace the step decorator",
                     id="run-decorated-as-a-step"),
        # a plain `def run(INPUT)` is told both to decorate it and to make it async
        pytest.param("def run(INPUT):\n    return 1\n", "entrypoint-not-workflow", 1, "async def",
                     id="sync-undecorated-run"),
        # defining `run` twice is reported where it is defined again, naming the first line
        pytest.param(workflow() + "\n@DBOS.workflow()\nasync def run(INPUT):\n    return 2\n",
                     "duplicate-entrypoint", 8, "first at line 4", id="duplicate-run"),
        # `@DBOS.workflow` without parentheses is an error at the decorator, not a missing
        # workflow
        pytest.param("from dbos import DBOS\n\n@DBOS.workflow\nasync def run(INPUT):\n"
                     "    return 1\n", "dbos-decorator-not-called", 3, "`@DBOS.workflow()`",
                     id="bare-workflow-decorator"),
    ],
)  # fmt: skip
def test_a_wrong_entrypoint_is_one_error_at_its_line_saying_what_to_do(
    source: str, code: str, line: int, said: str
) -> None:
    """A missing, undecorated, misdecorated or duplicated `run` is one admission error at the
    line to fix, whose message says how."""
    diagnostics = admit_source(source)
    assert found(diagnostics) == [(code, line)]
    assert said in diagnostics[0].message


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("def main(INPUT):\n    return 1\n\nrun = main\n", 4),
        ("from helpers import run\n", 1),
        ("class Holder:\n    async def run(self, INPUT):\n        return 1\n", 2),
        ("if True:\n    async def run(INPUT):\n        return 1\n", 2),
    ],
)
def test_run_that_is_not_a_toplevel_function_points_at_its_line(source: str, line: int) -> None:
    """A `run` bound some other way, or nested in a block, is reported where it is."""
    diagnostics = admit_source(source)
    assert found(diagnostics) == [("missing-entrypoint", line)]
    assert f"line {line}" in diagnostics[0].message


def test_sync_workflow_entrypoint_is_admitted() -> None:
    """A `def run(INPUT)` decorated as a workflow is admitted, as DBOS runs it."""
    source = "from dbos import DBOS\n\n@DBOS.workflow()\ndef run(INPUT):\n    return INPUT\n"
    assert admit_source(source) == []
    assert entrypoint_kind(source) == "workflow"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ("", "change the parameters"),
        ("INPUT, ctx, extra", "change the parameters"),
        ("*args", "change the parameters"),
        ("INPUT, **options", "remove the `**options`"),
        ("INPUT=None", "remove the default values"),
        ("INPUT, *, strict", "remove the keyword-only parameters"),
    ],
)
def test_wrong_parameters_are_an_entrypoint_signature_error(params: str, expected: str) -> None:
    """Parameters other than `(INPUT)` or `(INPUT, ctx)` are rejected, saying what to change."""
    source = f"from dbos import DBOS\n\n@DBOS.workflow()\nasync def run({params}):\n    return 1\n"
    diagnostics = admit_source(source)
    assert found(diagnostics) == [("entrypoint-signature", 4)]
    assert expected in diagnostics[0].message
    assert f"run({params})" in diagnostics[0].message


def test_any_single_parameter_name_is_accepted() -> None:
    """The one parameter of `run` may have any name."""
    assert admit_source(workflow().replace("INPUT", "payload")) == []


def test_legacy_form_decorated_as_workflow_is_rejected() -> None:
    """A `run(INPUT, ctx)` decorated @DBOS.workflow() is told to drop the decorator."""
    source = "from dbos import DBOS\n\n@DBOS.workflow()\nasync def run(INPUT, ctx):\n    return 1\n"
    diagnostics = admit_source(source)
    assert found(diagnostics) == [("entrypoint-signature", 4)]
    assert "legacy" in diagnostics[0].message
    assert entrypoint_kind(source) is None


@pytest.mark.parametrize("source", [LEGACY_SYNC, LEGACY_ASYNC])
def test_legacy_programs_are_admitted_sync_or_async(source: str) -> None:
    """Legacy `run(INPUT, ctx)` programs pass admission and the lint, sync or async."""
    assert check_source(source) == []
    assert entrypoint_kind(source) == "legacy"


@pytest.mark.parametrize(
    ("header", "decorator"),
    [
        ("from dbos import DBOS", "@DBOS.workflow()"),
        ("from dbos import DBOS", "@DBOS.workflow(max_recovery_attempts=3)"),
        ("import dbos", "@dbos.DBOS.workflow()"),
        ("import dbos as d", "@d.DBOS.workflow(name='invoice')"),
        ("from dbos import DBOS as D", "@D.workflow()"),
        ("from dbos._dbos import DBOS", "@DBOS.workflow()"),
    ],
)
def test_workflow_decorator_is_recognized_in_every_spelling(header: str, decorator: str) -> None:
    """Aliased and qualified spellings of @DBOS.workflow() are all recognized."""
    source = f"{header}\n\n{decorator}\nasync def run(INPUT):\n    return INPUT\n"
    assert admit_source(source) == []
    assert entrypoint_kind(source) == "workflow"


def test_bare_step_decorator_must_be_called() -> None:
    """`@DBOS.step` without parentheses on a step is an error at that decorator."""
    source = workflow(header="from dbos import DBOS\n\n@DBOS.step\nasync def fetch(x):\n    pass\n")
    assert found(admit_source(source)) == [("dbos-decorator-not-called", 3)]


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        ("DBOS.launch()", "dbos-launch-forbidden"),
        ("DBOS.destroy(destroy_registry=True)", "dbos-destroy-forbidden"),
        ("DBOS.reset_system_database()", "dbos-destroy-forbidden"),
        ("DBOS(config={'name': 'relay'})", "dbos-config-forbidden"),
        ("DBOSConfig(name='relay')", "dbos-config-forbidden"),
        ("dbos.DBOS.launch()", "dbos-launch-forbidden"),
        ("D.launch()", "dbos-launch-forbidden"),
        ("dbos.DBOS(config=cfg)", "dbos-config-forbidden"),
        ("atexit.register(DBOS.destroy)", "dbos-destroy-forbidden"),
    ],
)
@pytest.mark.parametrize("place", ["toplevel", "run", "helper", "step", "main"])
def test_dbos_lifecycle_calls_are_forbidden_anywhere(statement: str, code: str, place: str) -> None:
    """Launching, destroying or configuring DBOS is an error wherever it appears."""
    header = "import atexit\nimport dbos\nfrom dbos import DBOS, DBOSConfig\n"
    header += "from dbos import DBOS as D\n"
    bodies = {
        "toplevel": f"{statement}\n",
        "helper": f"def helper():\n    {statement}\n",
        "step": f"@DBOS.step()\nasync def helper():\n    {statement}\n",
        "main": f'if __name__ == "__main__":\n    {statement}\n',
        "run": "",
    }
    source = (
        header + bodies[place] + workflow(statement if place == "run" else "return 1", header="")
    )
    line = next(n for n, text in enumerate(source.splitlines(), 1) if statement in text)
    diagnostics = admit_source(source)
    assert found(diagnostics) == [(code, line)]
    assert "remove it" in diagnostics[0].message
    assert [d for d in check_source(source) if d.severity == "error"] == diagnostics


def test_forbidden_call_column_points_at_the_call() -> None:
    """The column of a forbidden call is where the call starts in its line."""
    diagnostics = admit_source(workflow("DBOS.launch()"))
    assert [(d.line, d.col) for d in diagnostics] == [(5, 4)]


def test_dbos_used_without_import_is_reported_at_its_first_use() -> None:
    """Using `DBOS` without importing it is reported once, at its first use."""
    diagnostics = admit_source(workflow(header="") + "\n@DBOS.step()\nasync def s():\n    pass\n")
    assert found(diagnostics) == [("dbos-not-imported", 2)]
    assert "from dbos import DBOS" in diagnostics[0].message


def test_star_import_may_provide_dbos() -> None:
    """A star import could provide `DBOS`, so it is not reported as missing."""
    assert admit_source(workflow(header="from dbos import *\n")) == []


def test_every_problem_is_reported_at_once_in_line_order() -> None:
    """Several independent problems are all reported in one pass, sorted by line."""
    source = src(
        """
        from dbos import DBOS
        DBOS.launch()

        def cleanup():
            DBOS.destroy()

        @DBOS.step
        async def fetch(x):
            return x

        @DBOS.workflow()
        def run(INPUT, ctx, extra):
            return 1
        """
    )
    assert found(admit_source(source)) == [
        ("dbos-launch-forbidden", 2),
        ("dbos-destroy-forbidden", 5),
        ("dbos-decorator-not-called", 7),
        ("entrypoint-signature", 12),
    ]


def test_admit_source_reports_errors_only_and_check_source_adds_warnings() -> None:
    """Determinism warnings appear in check_source but never in admit_source."""
    source = workflow("return time.time()", header="import time\nfrom dbos import DBOS\n")
    assert admit_source(source) == []
    checked = check_source(source)
    assert [(d.code, d.severity) for d in checked] == [("nondeterministic-time", "warning")]


def test_check_source_sorts_by_position_and_names_the_file() -> None:
    """check_source output is sorted by (line, col, code) and carries the given file name."""
    source = "import time\nprint(time.time())\n\nasync def run(INPUT):\n    return time.time()\n"
    diagnostics = check_source(source, file="cell.py")
    assert diagnostics == sorted(diagnostics, key=lambda d: (d.line, d.col, d.code))
    assert found(diagnostics) == [
        ("toplevel-side-effect", 2),
        ("entrypoint-not-workflow", 4),
        ("nondeterministic-time", 5),
    ]
    assert all(d.format().startswith("cell.py:") for d in diagnostics)


def test_entrypoint_kind_accepts_a_parsed_module_and_rejects_non_entrypoints() -> None:
    """entrypoint_kind reads a parsed module too, and says None without a valid entrypoint."""
    assert entrypoint_kind(ast.parse(INVOICE)) == "workflow"
    assert entrypoint_kind(ast.parse(LEGACY_SYNC)) == "legacy"
    assert entrypoint_kind("def run(INPUT:\n") is None
    assert entrypoint_kind("VALUE = 1\n") is None
    assert entrypoint_kind("async def run(INPUT):\n    return 1\n") is None
    assert entrypoint_kind("from dbos import DBOS\n@DBOS.step()\ndef run(INPUT): pass\n") is None


BAD_SOURCES = [
    "def run(INPUT)\n",
    "VALUE = 1\n",
    "from dbos import DBOS\n@DBOS.workflow()\ndef run(INPUT, *a):\n    DBOS.launch()\n",
    "async def run(INPUT):\n    DBOS(config=1)\n",
    "from dbos import DBOS\n@DBOS.step\nasync def run(INPUT): pass\nasync def run(INPUT): pass\n",
]


@pytest.mark.parametrize("source", BAD_SOURCES)
def test_every_error_message_is_one_sentence_with_a_listed_code(source: str) -> None:
    """Each error is a single sentence ending in what to do, under a code listed in CODES."""
    for diagnostic in admit_source(source):
        assert diagnostic.code in admission.CODES
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", diagnostic.code)
        assert diagnostic.message[0].isupper() or diagnostic.message.startswith("`")
        assert diagnostic.message.endswith(".")
        assert ": " in diagnostic.message


def test_admission_and_lint_codes_are_disjoint_and_described() -> None:
    """Admission and lint codes never collide, and every code has a one-line description."""
    assert not set(admission.CODES) & set(lint.CODES)
    for description in [*admission.CODES.values(), *lint.CODES.values()]:
        assert description and "\n" not in description
