"""The record magics, delete and broken drafts, on a real IPython shell with real runs."""

from __future__ import annotations

import html
import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from relay_notebook.views.records import RecoveryPreviewView
from relay_notebook.views.wording import duration_text
from tests.magics.relay_magic import magic
from tests.relays import relay_source

BAD_CELL = relay_source("bad")


@pytest.fixture
def crashed(ip: Any) -> Any:
    """The shell after run nap-1 crashed on purpose after its first step."""
    with capture_output():
        ip.run_cell_magic("relay", "nap --no-graph", relay_source("nap"))
    magic(ip, "run nap --crash after:nap --wait")
    return ip


def test_preview_says_what_recovery_would_do(crashed: Any) -> None:
    """`%relay preview RUN` shows the attempt recovery starts and the checkpoint it reuses."""
    view = magic(crashed, "preview nap-1")
    assert isinstance(view, RecoveryPreviewView)
    assert repr(view).startswith("recovering nap-1 starts attempt 2")
    assert "reused: 1 checkpoint (nap)" in repr(view)
    assert magic(crashed, "preview nap-1 --json")["outcome"] == "recover"
    magic(crashed, "recover nap-1 --wait")
    finished = repr(magic(crashed, "preview nap-1"))
    assert finished.startswith("recovering nap-1 returns it as it was (succeeded)")
    assert finished.endswith("Start a new run with: %relay run nap")


def test_steps_and_attempts_are_dataframes_bound_with_o(crashed: Any) -> None:
    """`%relay steps RUN -o VAR` and `%relay attempts RUN -o VAR` return and bind DataFrames."""
    magic(crashed, "recover nap-1 --wait")
    steps = magic(crashed, "steps nap-1 -o steps_df")
    assert isinstance(steps, pd.DataFrame) and crashed.user_ns["steps_df"] is steps
    assert list(steps["name"]) == ["nap", "wake"] and list(steps["reused"]) == [True, False]
    with_outputs = magic(crashed, "steps nap-1 --outputs")
    assert list(with_outputs["output_preview"]) == ["0", '{"slept": 0}']
    attempts = magic(crashed, "attempts nap-1 -o attempts_df")
    assert crashed.user_ns["attempts_df"] is attempts
    assert list(attempts["status"]) == ["interrupted", "succeeded"]
    assert attempts["crash"].iloc[0] == "after:nap#1"


def test_timeline_is_a_plotly_figure(crashed: Any) -> None:
    """`%relay timeline RUN` returns the run's timeline: a row per attempt."""
    figure = magic(crashed, "timeline nap-1")
    assert isinstance(figure, go.Figure)
    assert list(figure.layout.yaxis.categoryarray) == ["attempt 1 · interrupted"]


def test_deleting_a_live_run_is_refused_and_its_release_is_kept(crashed: Any) -> None:
    """A run with a live attempt cannot be deleted; deleting another keeps the release."""
    magic(crashed, "publish nap")
    magic(crashed, """run nap --release v1 --input '{"seconds": 0}' --wait""")
    magic(crashed, """run nap --release v1 --input '{"seconds": 60}'""")
    live = crashed.magics_manager.registry["RelayMagics"].views[-1]
    assert live.handle.run_id == "nap-3"
    with pytest.raises(UsageError, match=r"Cannot delete run nap-3: an attempt .*\[run-locked\]$"):
        crashed.run_line_magic("relay", "delete nap-3")
    live.handle.cancel(grace=1.0)
    assert magic(crashed, "delete nap-2 --json")["runs"] == ["nap-2"]
    assert [r["run_id"] for r in magic(crashed, "runs nap --json")] == ["nap-1", "nap-3"]
    verified = magic(crashed, "verify nap v1")
    assert verified is None  # printed, and the release is intact:
    ws = crashed.magics_manager.registry["RelayMagics"].workspace
    assert (ws.home / "nap" / "releases").is_dir()
    assert magic(crashed, "run nap --release v1 --wait") == {"slept": 0}
    assert [r["run_id"] for r in magic(crashed, "runs nap --json")][-1] == "nap-4"


def test_a_broken_draft_is_listed_with_its_first_problem(crashed: Any) -> None:
    """`%relay relays` marks a draft failing admission broken, naming its first diagnostic."""
    with pytest.raises(UsageError):
        crashed.run_cell_magic("relay", "bad", BAD_CELL)
    table = magic(crashed, "relays")
    rows = {r["name"]: r for r in table.to_dict(orient="records")}
    assert rows["nap"]["broken"] is False and pd.isna(rows["nap"]["problem"])
    assert rows["bad"]["broken"] is True
    assert rows["bad"]["problem"].startswith("relay.py:") and "[" in rows["bad"]["problem"]
    assert json.dumps(magic(crashed, "relays --json"))  # plain JSON, as the REST API lists
    with capture_output() as captured:
        crashed.run_line_magic("relay", "runs bad")
    assert "bad: broken draft: relay.py:" in captured.stdout
    assert captured.stdout.strip().endswith("(all problems: %relay check bad)")
    with capture_output() as captured:
        crashed.run_line_magic("relay", "runs")
    assert "bad: broken draft: relay.py:" in captured.stdout and "nap:" not in captured.stdout


def test_deleting_a_relay_takes_its_runs_only_with_force(crashed: Any) -> None:
    """`%relay delete NAME` is refused while it has runs; `--force` deletes them with it."""
    with pytest.raises(UsageError, match=r"\[relay-has-runs\]$"):
        crashed.run_line_magic("relay", "delete nap")
    deleted = magic(crashed, "delete nap --force --json")
    assert deleted == {
        "deleted": "relay",
        "target": "nap",
        "relay": "nap",
        "runs": ["nap-1"],
        "releases": 0,
    }
    assert magic(crashed, "relays --json") == []
    with capture_output():
        crashed.run_cell_magic("relay", "nap --no-graph", relay_source("nap"))
    magic(crashed, "run nap --wait")
    assert [r["run_id"] for r in magic(crashed, "runs nap --json")] == ["nap-2"]


def test_tables_show_active_time_json_values_and_ids_that_do_not_wrap(crashed: Any) -> None:
    """Runs show the attempts' time (wall beside), logs JSON values, ids on one line."""
    magic(crashed, "recover nap-1 --wait")
    (run,) = magic(crashed, "runs nap --json")
    log = magic(crashed, "logs nap-1 --json")
    assert run["active_ms"] == pytest.approx(sum(a["duration_ms"] for a in log["attempts"]), 0.01)
    assert run["duration_ms"] > run["active_ms"]  # it also waited between its two attempts
    table = magic(crashed, "runs nap")._repr_mimebundle_()["text/html"]
    took = duration_text(run["active_ms"], run["duration_ms"], run["attempts"])
    assert f'<td style="white-space:nowrap">{took}</td>' in table
    assert '<td style="white-space:nowrap"><code>nap-1</code></td>' in table
    logs = magic(crashed, "logs nap-1")._repr_mimebundle_()["text/html"]
    assert html.escape('{"slept": 0}') in logs and "&#x27;slept&#x27;" not in logs
    assert '<td style="white-space:nowrap">nap-1</td>' in logs
