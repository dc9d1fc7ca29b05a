"""A warm parent of the test's own, started from its environment as it is now."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from relay_notebook.runner.warm import let_go_warm_parent, restart_warm_parent


@contextlib.contextmanager
def fresh_warm_parent() -> Iterator[None]:
    """A warm parent started now, from this process's environment as it is now, ready and
    able to confine (else the test is skipped); let go afterwards, so that the next test
    starts one from its usual environment."""
    let_go_warm_parent(restart_warm_parent())
    parent = restart_warm_parent()
    try:
        assert parent.wait_ready(120), "the warm parent did not start"
        if not parent.can_confine():
            pytest.skip(f"no Landlock or namespaces here: {parent.info}")
        yield
    finally:
        let_go_warm_parent(parent)
