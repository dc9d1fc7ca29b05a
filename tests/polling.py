"""Waiting in tests: poll a condition until it holds, never sleep a fixed time for an effect."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float = 60.0,
    interval: float = 0.05,
    what: str | Callable[[], str] = "the condition",
) -> T:
    """Call ``condition`` until it returns something truthy and return that; fail after
    ``timeout`` seconds, naming ``what`` was awaited (a callable is asked only then, so it
    can read a log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            awaited = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g}s waiting for {awaited}")
        time.sleep(interval)
