"""Every error a magic raises, on a real IPython shell: coded lines, magic wording, no traceback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from tests.relays import relay_source

#: a hint that tells a notebook user to type a terminal command
CLI_HINT = re.compile(r"(?<![%\w])relay (run|runs|recover|logs|grant|reconcile|check|delete)\b")
CODED = re.compile(r"\[[a-z]+(-[a-z0-9]+)*\]$")
BAD_CELL = relay_source("bad")


def usage_error(ip: Any, source: str) -> str:
    """Run ``source`` as a cell; it must fail with a UsageError shown without a traceback,
    each of its lines ending with a stable code and no hint worded for a terminal."""
    with capture_output() as captured:
        result = ip.run_cell(source)
    error = result.error_in_exec
    assert isinstance(error, UsageError), (source, error)
    shown = captured.stdout + captured.stderr
    assert "Traceback" not in shown and "UsageError" in shown, shown
    message = str(error)
    for line in message.splitlines():
        assert CODED.search(line), (source, line)
    assert not CLI_HINT.search(message), (source, message)
    return message


@pytest.fixture
def nap(ip: Any) -> Any:
    """The shell with relay ``nap`` saved."""
    with capture_output():
        ip.run_cell_magic("relay", "nap --no-graph", relay_source("nap"))
    return ip


def test_lines_without_a_command_or_with_a_bad_one_are_usage(nap: Any) -> None:
    """`%relay`, an unknown command, a missing argument, unbalanced quotes: [usage]."""
    for line in ["%relay", "%relay frobnicate", "%relay recover", "%relay run nap --input '{"]:
        assert usage_error(nap, line).endswith("[usage]")
    assert "%relay --help" in usage_error(nap, "%relay")


def test_bad_input_text_and_files_are_invalid_input(nap: Any, tmp_path: Path) -> None:
    """Bad --input JSON, a missing or malformed --input-file: one [invalid-input] line."""
    (tmp_path / "bad.json").write_text('{"seconds": ')
    for line in [
        "%relay run nap --input '{\"seconds\": }'",
        f"%relay run nap --input-file {tmp_path / 'missing.json'}",
        f"%relay run nap --input-file {tmp_path / 'bad.json'}",
        "%relay reconcile nap-1 --result '{oops'",
    ]:
        message = usage_error(nap, line)
        assert message.endswith("[invalid-input]") and "\n" not in message, message
    assert "missing.json" in usage_error(
        nap, f"%relay run nap --input-file {tmp_path}/missing.json"
    )


def test_cell_names_and_options_are_checked(ip: Any) -> None:
    """`%%relay My Flow` says names cannot contain spaces; no name or a bad option is [usage]."""
    cell = relay_source("nap")
    message = usage_error(ip, f"%%relay My Flow\n{cell}")
    assert message == "relay names cannot contain spaces; try my_flow [invalid-relay-name]"
    assert usage_error(ip, f"%%relay\n{cell}").endswith("[usage]")
    assert usage_error(ip, f"%%relay --publish\n{cell}").endswith("[usage]")
    assert usage_error(ip, f"%%relay nap --bogus\n{cell}").endswith("[usage]")
    assert usage_error(ip, f"%%relay no.dots\n{cell}").endswith("[invalid-relay-name]")


def test_admission_failures_list_each_problem_with_its_code(ip: Any) -> None:
    """A cell failing admission: a line per problem with its cell line, then [admission-failed]."""
    message = usage_error(ip, f"%%relay bad\n{BAD_CELL}")
    lines = message.splitlines()
    assert any(line.startswith("cell line 5: error:") for line in lines)
    assert lines[-1].endswith("[admission-failed]") and "2 errors" in lines[-1]
    message = usage_error(ip, "%relay run bad")
    assert "%relay check bad" in message and message.endswith("[admission-failed]")


def test_hints_inside_the_notebook_are_magics(nap: Any) -> None:
    """Missing runs, bad run ids and refusals tell the user which %relay line to type."""
    assert "List runs with: %relay runs nap" in usage_error(nap, "%relay logs nap-9")
    assert "%relay runs" in usage_error(nap, "%relay recover not-a-run")
    with capture_output():
        nap.run_line_magic("relay", "run nap --wait")
    message = usage_error(nap, "%relay reconcile nap-1 --result 1")
    assert "Recover it with: %relay recover nap-1" in message
    assert message.endswith("[nothing-to-reconcile]")
    message = usage_error(nap, "%relay delete nap")
    assert "%relay delete RUN" in message and "%relay delete nap --force" in message
    assert message.endswith("[relay-has-runs]")


def test_a_cell_that_cannot_be_published_is_one_coded_line(nap: Any) -> None:
    """`%%relay NAME --publish` refused by publish (a reserved file name): coded, no traceback."""
    home = nap.magics_manager.registry["RelayMagics"].workspace.home
    (home / "nap" / "RELEASE.json").write_text("{}")
    message = usage_error(nap, f"%%relay nap --publish\n{relay_source('nap')}")
    assert "RELEASE.json" in message and message.endswith("[invalid-target]")
