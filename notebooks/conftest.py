"""nbval for the tutorials: the sanitize rules reach into JSON outputs too.

nbval compares a custom MIME type's JSON as it is, and applies ``nbval_sanitize.cfg`` to
strings only, so a run graph's per-call timings (``duration_ms`` in node details) would make
every run view differ from its stored output. This extends the comparison the way the
sanitize file means it: timings are compared as a placeholder, and the regexes apply to the
strings inside JSON outputs as well.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import pytest
from nbval.plugin import IPyNbCell

TIMING_KEYS = frozenset(
    {
        "duration_ms",
        "started_at_ms",
        "completed_at_ms",
        "ts",
        "since_ms",
        "until_ms",
        "active_ms",
        "created_at",
        "started_at",
        "ended_at",
    }
)

_sanitize_text = IPyNbCell.sanitize


def _sanitize(self: IPyNbCell, value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "TIMING" if k in TIMING_KEYS and isinstance(v, int | float) else _sanitize(self, v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_sanitize(self, v) for v in value]
    return _sanitize_text(self, value)


IPyNbCell.sanitize = _sanitize  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed cell's report carries the stderr logs of the attempts its tutorial's workspace
    made in the last two minutes: a run that ended ``interrupted`` in CI says why."""
    report = yield
    if isinstance(item, IPyNbCell) and report.failed and call.when == "call":
        since = time.time() - 120
        home = item.path.parent / f".relay-tutorial-{item.path.name[:2]}"  # see its first cell
        for folder, _, names in os.walk(home):  # the attempts' logs sit in hidden folders
            path = Path(folder, "stderr.log")
            with contextlib.suppress(OSError):
                fresh = "stderr.log" in names and path.stat().st_mtime >= since
                if fresh and (tail := path.read_text(errors="replace")[-3000:]):
                    report.sections.append((f"attempt stderr: {path}", tail))
    return report
