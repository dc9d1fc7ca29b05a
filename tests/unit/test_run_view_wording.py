"""The run view's wording, pure: what a header says about the code, a recovery, a result, and
a syntax error's lines in a cell."""

from __future__ import annotations

from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.views.header import code_text, header_line, with_next
from relay_notebook.views.live import RESULT_PREVIEW, result_preview
from relay_notebook.views.mime import CheckView

RUN = {"run_id": "scorer-1", "relay": "scorer", "status": "succeeded", "attempt": 1}


def test_the_header_says_when_the_draft_changed_since_the_run() -> None:
    """A draft's run whose draft changed is drawn on its own code, and the header says how to
    compare; a release's run, or an unchanged draft, says nothing."""
    changed = {**RUN, "code": {"kind": "draft", "changed": True, "kept": True}}
    assert code_text(changed, "terminal") == (
        "drawn on the code this run ran; the draft has changed since — compare the draft with "
        "this run: relay check scorer --replay scorer-1"
    )
    assert "%relay check scorer --replay scorer-1" in with_next(changed)["drawn"]
    assert "drawn on the current draft" in str(
        code_text({**RUN, "code": {"kind": "draft", "changed": True, "kept": False}})
    )
    assert code_text({**RUN, "code": {"kind": "draft", "changed": False}}) is None
    assert code_text({**RUN, "code": {"kind": "release", "version": 2}}) is None
    assert "drawn" not in with_next(RUN)


def test_the_header_line_names_the_recovery_and_the_result() -> None:
    """A recovered run's line says which attempt's crash it came back from, and the result."""
    line = header_line(
        {**RUN, "attempt": 2, "recovered": "recovered from attempt 1's crash", "result": "{}"}
    )
    assert line == (
        "run scorer-1: succeeded · attempt 2 of 3 — result: {} — recovered from attempt 1's crash"
    )


def test_the_header_line_says_what_model_calls_paid() -> None:
    """A run with model calls: its tokens and cost, paid and not paid, after the recovery."""
    usage = "model calls: paid 2 calls, 101 in + 20 out tokens, 0.000362 USD"
    line = header_line({**RUN, "recovered": "recovered from attempt 1's crash", "usage": usage})
    assert line.endswith(f"— recovered from attempt 1's crash — {usage}")


def test_a_result_preview_is_one_bounded_line() -> None:
    """Results are previewed as JSON, cut with an ellipsis at RESULT_PREVIEW characters."""
    assert result_preview({"total": 12}) == '{"total": 12}'
    long = result_preview({"text": "x" * 500})
    assert len(long) == RESULT_PREVIEW and long.endswith("…")


def test_a_syntax_error_in_a_cell_names_cell_lines_only() -> None:
    """A relay.py diagnostic whose message names its line says cell lines throughout."""
    found = Diagnostic(
        line=5,
        col=0,
        code="syntax-error",
        message="Python cannot parse line 5 ('(' was never closed): fix the syntax there.",
        file="relay.py",
    )
    (line,) = CheckView("x", [found]).lines()
    assert line == (
        "cell line 6: error: Python cannot parse cell line 6 ('(' was never closed): fix the "
        "syntax there. [syntax-error]"
    )
