"""``%relay events RUN [-o VAR]`` and a live run view's events, on a real IPython shell."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from relay_notebook.history.run_events import read_run_events
from relay_notebook.views.mime import GRAPH_MIME
from tests.magics.relay_magic import magic
from tests.relays import relay_source


@pytest.fixture
def streamed(ip: Any) -> Any:
    """The shell after run streamer-1 wrote three stream values and its progress event."""
    with capture_output():
        ip.run_cell_magic("relay", "streamer --no-graph", relay_source("streamer"))
    magic(ip, """run streamer --input '{"parts": 3, "pause": 0.05}' --wait""")
    return ip


def test_events_are_a_table_and_o_binds_the_values(streamed: Any) -> None:
    """The table has a row per event and stream value; ``-o VAR`` binds them as values."""
    table = magic(streamed, "events streamer-1 -o published")
    assert isinstance(table, pd.DataFrame)
    assert list(table["kind"]) == ["event", "stream", "stream", "stream"]
    assert list(table[table["kind"] == "stream"]["value"]) == ["part 0", "part 1", "part 2"]
    assert streamed.user_ns["published"] == {
        "events": {"progress": {"done": 3}},
        "streams": {"output": ["part 0", "part 1", "part 2"]},
    }
    ws = streamed.magics_manager.registry["RelayMagics"].workspace
    assert (
        magic(streamed, "events streamer-1 --json") == read_run_events(ws, "streamer-1").to_dict()
    )


def test_the_run_view_shows_the_streamed_values(streamed: Any) -> None:
    """The run view's last state carries the stream's newest values and the event, and its
    SVG fallback shows them under the header."""
    view = streamed.magics_manager.registry["RelayMagics"].views[-1]
    bundle = view.monitor.bundle()
    events = bundle[GRAPH_MIME]["run"]["events"]
    assert [v["preview"] for v in events["streams"][0]["values"]] == [
        '"part 0"',
        '"part 1"',
        '"part 2"',
    ]
    assert 'stream output (3, closed): "part 2"' in bundle["image/svg+xml"].replace("&quot;", '"')
    stream_node = next(n for n in bundle[GRAPH_MIME]["nodes"] if n["type"] == "stream")
    assert stream_node["details"]["stream"]["count"] == 3


def test_events_of_an_unknown_run_is_one_line(ip: Any) -> None:
    """A run that does not exist is a usage error naming it, not a traceback."""
    with pytest.raises(UsageError, match="nope-1"):
        magic(ip, "events nope-1")
