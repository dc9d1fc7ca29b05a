"""A real IPython shell with the extension loaded, on a fresh workspace per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An InteractiveShell whose relay workspace is a temporary folder."""
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "relays"))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "relay_notebook")
    shell.run_line_magic("reload_ext", "relay_notebook")  # a fresh workspace for this test
    yield shell
    shell.user_ns.pop("result", None)
