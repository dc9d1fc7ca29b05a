"""Safe change in the notebook on a real IPython shell: %relay check --replay, %relay test."""

from __future__ import annotations

from typing import Any

import pandas as pd

from relay_notebook.commands.crash_each import CrashEachReport
from tests.magics.relay_magic import magic
from tests.relays import relay_source


def test_crash_each_is_a_table_and_the_replay_check_a_frame(ip: Any) -> None:
    """%relay test five --crash-each returns one row per crash point (-o binds the report);
    %relay check five --replay returns one row per recorded run."""
    five = relay_source("five")
    magic(ip, "five", five)
    frame = magic(ip, "test five --crash-each --input '{\"n\": 1}' -o report")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["point"]) == [
        "after:fetch#1",
        "during:fetch#1",
        "after:add#1",
        "during:add#1",
    ]
    assert set(frame["result"]) == {"same"}
    report = ip.user_ns["report"]
    assert isinstance(report, CrashEachReport) and report.ok
    assert "five: 4 crash points, ok" in ip.last_stdout
    renamed = five.replace("def add(", "def plus(").replace("add(total", "plus(total")
    magic(ip, "five", renamed)
    checked = magic(ip, "check five --replay")
    assert isinstance(checked, pd.DataFrame)
    assert set(checked["verdict"]) == {"incompatible"}
    # the message and the DBOS.patch_async hint are printed whole, not cut in a cell
    shown = ip.last_stdout
    assert "the new code calls plus at line" in shown and 'DBOS.patch_async("use-plus")' in shown
    line = next(n for n, text in enumerate(renamed.splitlines(), 1) if "plus(total" in text)
    assert set(checked["replay_ends_at"]) == {f"plus (line {line})"}, checked
    # every recorded run of five finished: they differ, but recovery never replays them
    assert set(checked["recovery"]) == {"-"}
    runs = len(checked)
    assert (
        f"five: the draft replays 0 of {runs} recorded runs; {runs} finished runs differ: "
        "recovery never replays a finished run, a fork from before the difference would"
    ) in shown
