"""Shared fixtures: a fresh workspace per test and the example relays in tests/relays/."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_notebook.workspace import Workspace

RELAYS = Path(__file__).parent / "relays"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """An empty workspace in a fresh temporary folder."""
    return Workspace(tmp_path / "relays")


@pytest.fixture
def invoice_source() -> str:
    """The SPEC §2 invoice relay."""
    return (RELAYS / "invoice.py").read_text(encoding="utf-8")
