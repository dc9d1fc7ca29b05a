"""Time travel in the notebook on a real IPython shell: %relay fork, lineage and diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from IPython.core.error import UsageError

from relay_notebook.views.lineage import LineageView
from tests.magics.relay_magic import magic

SHIPPING = (Path(__file__).parent.parent / "relays" / "shipping.py").read_text(encoding="utf-8")


def test_fork_a_failed_run_onto_the_fixed_cell_then_see_lineage_and_diff(ip: Any) -> None:
    """The tutorial's loop: a run fails at check, the cell is fixed, %relay fork --draft
    finishes it with two copied checkpoints, %relay lineage and %relay diff show it."""
    magic(ip, "shipping", SHIPPING)
    magic(ip, "run shipping --input '{\"n\": 6}' --wait")
    magic(ip, "shipping", SHIPPING.replace("LIMIT = 10", "LIMIT = 100"))
    result = magic(ip, "fork shipping-1 --from check --draft --wait -o fixed")
    assert result == {"shipped": 12} == ip.user_ns["fixed"]
    view = magic(ip, "lineage shipping-2")
    assert isinstance(view, LineageView)
    text = view._repr_mimebundle_()["text/plain"]
    assert text.splitlines() == [
        "shipping-1  failed",
        "└─ shipping-2  succeeded  from check · the draft code",
    ]
    frame = magic(ip, "diff shipping-1 shipping-2")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == ["fetch#1", "price#1", "check#1", "ship#1"]
    assert frame.loc["fetch#1", "differs"] == "same"
    assert frame.loc["check#1", "status shipping-1"] == "error"
    assert frame.loc["check#1", "status shipping-2"] == "checkpointed"


def test_fork_edits_come_from_json_or_notebook_variables(ip: Any) -> None:
    """--set price#1=VAR takes a notebook variable; the edited output reaches later steps."""
    magic(ip, "shipping", SHIPPING)
    magic(ip, "run shipping --input '{\"n\": 6}' --wait")
    ip.user_ns["smaller"] = 4
    assert magic(ip, "fork shipping-1 --from check --set price#1=smaller --wait") == {"shipped": 4}


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("fork shipping-1 --from nope", "fork-refused"),
        ("fork shipping-1 --from check --set price#1", "invalid-input"),
        ("fork shipping-1 --from check --set ship#1=1", "fork-refused"),
        ("fork shipping-1", "usage"),
    ],
)
def test_bad_forks_are_one_coded_line(ip: Any, line: str, code: str) -> None:
    """A call the run never made, a --set without a value or on a call that runs fresh, and a
    missing --from: one UsageError ending in its code, no traceback."""
    magic(ip, "shipping", SHIPPING)
    magic(ip, "run shipping --input '{\"n\": 6}' --wait")
    with pytest.raises(UsageError) as caught:
        magic(ip, line)
    message = str(caught.value)
    assert message.endswith(f"[{code}]") and "\n" not in message and "Traceback" not in message
