"""A real IPython shell with the kit's extension loaded, on a workspace of the test's choosing."""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config


@contextlib.contextmanager
def relay_shell(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A new InteractiveShell (its own user namespace, config and magics) whose relay workspace
    is ``home`` (``RELAY_HOME``); nothing a test leaves in it reaches the next test."""
    monkeypatch.setenv("RELAY_HOME", str(home))
    InteractiveShell.clear_instance()  # the singleton: get_ipython() and display() find it
    # history in memory: no file under ~/.ipython and no saving thread per shell
    shell = InteractiveShell.instance(config=Config(HistoryManager={"hist_file": ":memory:"}))
    shell.run_line_magic("load_ext", "relay_notebook")
    try:
        yield shell
    finally:
        atexit.unregister(shell.atexit_operations)
        shell.atexit_operations()  # clears the namespaces, closes the history
        shell.cleanup()  # sys.modules["__main__"] as it was before this shell
        InteractiveShell.clear_instance()
