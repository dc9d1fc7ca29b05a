"""The public surface: names exported, error codes documented, layers kept apart."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import relay_notebook
from relay_notebook import errors

ROOT = Path(__file__).resolve().parents[2]
SOURCE_MODULES = [
    "relay_notebook.source.admission",
    "relay_notebook.source.lint",
    "relay_notebook.source.annotations",
    "relay_notebook.runner.outcome",
    "relay_notebook.server.handlers",
]
CLI_CODES = {"usage", "internal-error"}


def all_codes() -> set[str]:
    """Every stable code the kit can print: error classes, diagnostics and the CLI's own."""
    codes = {
        cls.code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.RelayError)
    }
    for name in SOURCE_MODULES:
        codes |= set(importlib.import_module(name).CODES)
    import agentworks.errors
    import agentworks.tools

    codes |= {getattr(agentworks.errors, n).code for n in agentworks.errors.__all__}
    codes.add(agentworks.tools.ToolArgumentsError.code)
    return codes | CLI_CODES


def test_package_all_names_exist_and_are_sorted() -> None:
    """Everything in relay_notebook.__all__ is importable, and the list is sorted."""
    for name in relay_notebook.__all__:
        assert hasattr(relay_notebook, name), name
    assert relay_notebook.__all__ == sorted(relay_notebook.__all__)


def test_every_error_class_has_a_kebab_case_code() -> None:
    """Each RelayError subclass declares its own stable kebab-case code."""
    seen: dict[str, str] = {}
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", cls.code), name
        assert cls.code not in seen, f"{name} reuses {seen.get(cls.code)}'s code"
        seen[cls.code] = name


def test_error_codes_and_docs_are_in_step() -> None:
    """docs/errors.md lists exactly the codes the kit can emit."""
    documented = set(
        re.findall(r"^\| `([a-z0-9-]+)` \|", (ROOT / "docs/errors.md").read_text(), re.M)
    )
    codes = all_codes()
    assert not codes - documented, f"undocumented codes: {sorted(codes - documented)}"
    assert not documented - codes, f"documented but never emitted: {sorted(documented - codes)}"


def test_run_error_codes_in_the_runner_are_all_listed() -> None:
    """Every error code the child or the supervisor writes is in runner.outcome.CODES."""
    from relay_notebook.runner import outcome

    written: set[str] = set()
    for name in ("child.py", "outcome.py"):
        text = (ROOT / "relay_notebook" / "runner" / name).read_text()
        written |= set(re.findall(r'_error\(\s*"([a-z-]+)"', text))
        written |= set(re.findall(r'"code": "([a-z-]+)"', text))
    assert written and written <= set(outcome.CODES)


def test_static_commands_do_not_import_dbos_or_ipython() -> None:
    """Checking and drawing a relay loads neither DBOS nor IPython (fast, pure)."""
    probe = (
        "import sys, relay_notebook.commands, relay_notebook.cli, relay_notebook.views.svg\n"
        "print(sorted(m for m in ('dbos', 'IPython', 'ipywidgets', 'plotly') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
