"""A fresh IPython shell per test, with the extension loaded, on a fresh workspace per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.shells import relay_shell


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A new InteractiveShell (its own user namespace, config and magics) whose relay
    workspace is a temporary folder; nothing a test leaves in it reaches the next test."""
    with relay_shell(tmp_path / "relays", monkeypatch) as shell:
        yield shell
