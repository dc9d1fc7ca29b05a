"""The public surface: names exported, error classes with stable codes, layers kept apart."""

from __future__ import annotations

import re
import subprocess
import sys

import relay_notebook
from relay_notebook import errors


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


def test_static_commands_do_not_import_dbos_or_ipython() -> None:
    """Checking and drawing a relay loads neither DBOS nor IPython (fast, pure)."""
    probe = (
        "import sys, relay_notebook.commands, relay_notebook.cli, relay_notebook.views.svg\n"
        "print(sorted(m for m in ('dbos', 'IPython', 'ipywidgets', 'plotly') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
