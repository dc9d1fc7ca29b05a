"""The run record, ``run.json``: what a run is bound to and how its attempts went."""

from __future__ import annotations

__all__ = ["MAX_ATTEMPTS"]

#: a run's budget of process attempts (run.json's ``max_attempts``; older runs lack it)
MAX_ATTEMPTS = 3
