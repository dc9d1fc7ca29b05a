"""The suite's files, longest first: how `make test`'s two workers finish together.

`make test` hands whole files to two workers (``--dist loadfile``) in collection order
(``--no-loadscope-reorder``). Started longest first, the last file to start is a short one,
and the two workers end within a file's length of each other instead of one of them running
the longest file alone at the end.

The lengths are ``tests/file_seconds.json``: each file's seconds in a whole run, kept by
``pytest_sessionfinish`` in pytest's cache after every run of the whole suite and copied into
the repository with ``python tools/file_seconds.py``. A file not listed yet (a new one) counts
as ``NEW_FILE_SECONDS``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = ROOT / "tests" / "file_seconds.json"
CACHE_KEY = "relay/file_seconds"
#: a file the weights do not list yet: about a median integration file
NEW_FILE_SECONDS = 20.0
#: a run of at least this many files counts as a whole run (its times are kept)
WHOLE_RUN_FILES = 60


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_longest_first(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: files by their seconds, longest first; tests of a file in
    their own order (a notebook's cells must run in order)."""
    try:
        weights = json.loads(WEIGHTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    position = {id(item): n for n, item in enumerate(items)}
    items.sort(
        key=lambda item: (
            -float(weights.get(_file(item.nodeid), NEW_FILE_SECONDS)),
            _file(item.nodeid),
            position[id(item)],
        )
    )


class FileSeconds:
    """Each file's seconds in this run (setup, call and teardown of its tests)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def add(self, report: pytest.TestReport) -> None:
        self.seconds[_file(report.nodeid)] += report.duration

    def keep(self, config: pytest.Config) -> None:
        """In pytest's cache, after a whole run (``tools/file_seconds.py`` copies it)."""
        if getattr(config, "cache", None) is not None and len(self.seconds) >= WHOLE_RUN_FILES:
            rounded = {name: round(s, 1) for name, s in sorted(self.seconds.items())}
            config.cache.set(CACHE_KEY, rounded)
