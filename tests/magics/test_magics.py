"""The %%relay and %relay magics on a real IPython shell."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from relay_notebook.views.mime import GRAPH_MIME, CheckView, GraphView, RunsView
from tests.relays import relay_source

GOOD = relay_source("doubler")

SLOW = relay_source("slow")


def test_relay_cell_saves_checks_and_draws_without_executing(ip: Any, tmp_path: Path) -> None:
    """%%relay saves the draft, runs no code, and returns the flow graph view."""
    marker = tmp_path / "EXECUTED"
    cell = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n" + GOOD
    view = ip.run_cell_magic("relay", "doubler", cell)
    assert isinstance(view, GraphView)
    bundle = view._repr_mimebundle_()
    assert {GRAPH_MIME, "image/svg+xml", "text/plain"} <= set(bundle)
    assert bundle["text/plain"].startswith("flow graph of doubler:")
    assert any(n["label"] == "double" for n in bundle[GRAPH_MIME]["nodes"])
    assert (
        Path(ip.magics_manager.registry["RelayMagics"].workspace.home) / "doubler" / "relay.py"
    ).read_text() == cell
    assert not marker.exists()


def test_admission_errors_name_cell_lines(ip: Any) -> None:
    """A bad cell raises one UsageError listing every problem with its cell line."""
    bad = relay_source("bad")
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("relay", "bad", bad)
    text = str(info.value)
    assert "cell line 5: error:" in text and "[dbos-launch-forbidden]" in text
    assert "cell line 4: error:" in text
    assert "Traceback" not in text


def test_lint_warnings_are_shown_but_do_not_block(ip: Any) -> None:
    """A clock read in the workflow is a warning; the graph is still drawn."""
    cell = GOOD.replace("    out = []", "    import time\n    started = time.time()\n    out = []")
    with capture_output() as captured:
        view = ip.run_cell_magic("relay", "clocky", cell)
    assert isinstance(view, GraphView)
    assert any("nondeterministic-time" in o.data.get("text/plain", "") for o in captured.outputs)


def test_bad_magic_lines_are_one_line_usage_errors(ip: Any) -> None:
    """Unknown options and subcommands are UsageErrors of one line."""
    for line in ["frobnicate", "run", "run doubler --crash sideways:x"]:
        with pytest.raises(UsageError) as info:
            ip.run_line_magic("relay", line)
        assert "\n" not in str(info.value)
    with pytest.raises(UsageError, match="needs a relay name"):
        ip.run_cell_magic("relay", "", GOOD)


def test_run_wait_binds_the_result(ip: Any) -> None:
    """%relay run --wait -o VAR blocks, returns the result and binds it."""
    ip.run_cell_magic("relay", "doubler", GOOD)
    ip.user_ns["order"] = {"xs": [1, 2]}
    with capture_output():
        result = ip.run_line_magic("relay", "run doubler --input order --wait -o result")
    assert result == {"out": [2, 4]} and ip.user_ns["result"] == {"out": [2, 4]}


def test_input_as_json_and_as_braced_variable(ip: Any) -> None:
    """--input takes JSON, or {{var}} (IPython leaves {var} for the magic to look up)."""
    ip.run_cell_magic("relay", "doubler", GOOD)
    with capture_output():
        assert ip.run_line_magic("relay", """run doubler --input '{"xs": [3]}' --wait""") == {
            "out": [6]
        }
        ip.user_ns["o"] = {"xs": [5]}
        assert ip.run_line_magic("relay", "run doubler --input {{o}} --wait") == {"out": [10]}
    with pytest.raises(UsageError, match="neither JSON nor the name of a notebook variable"):
        ip.run_line_magic("relay", "run doubler --input nosuchvar --wait")


def test_run_returns_at_once_and_the_kernel_stays_responsive(ip: Any) -> None:
    """Without --wait, run returns while the child works; the view ends succeeded."""
    ip.run_cell_magic("relay", "slow", SLOW)
    with capture_output() as captured:
        started = time.monotonic()
        ip.run_line_magic("relay", """run slow --input '{"seconds": 1.5}' -o result""")
        returned_after = time.monotonic() - started
        view = ip.magics_manager.registry["RelayMagics"].views[-1]
        assert not view.handle.done()  # the magic returned before the run ended
        assert ip.run_cell("1 + 1").result == 2  # another cell runs meanwhile
        outcome = view.wait(60)
    assert outcome.status == "succeeded" and ip.user_ns["result"] == {"slept": 1.5}
    assert returned_after < 1.5
    assert (
        repr(view) == 'run slow-1: succeeded · attempt 1 of 3 · 1 executed — result: {"slept": 1.5}'
    )
    texts = [o.data.get("text/plain", "") for o in captured.outputs]
    assert any(t.startswith("run slow-1: running") for t in texts)


def test_crash_recover_runs_logs(ip: Any) -> None:
    """Crash a run on purpose, recover it, and list it: reused checkpoints show."""
    ip.run_cell_magic("relay", "doubler", GOOD)
    with capture_output():
        ip.run_line_magic(
            "relay", """run doubler --input '{"xs": [1, 2, 3]}' --crash after:double#2 --wait"""
        )
        view = ip.magics_manager.registry["RelayMagics"].views[-1]
        assert view.outcome.status == "interrupted"
        assert ip.run_line_magic("relay", "recover doubler-1 --wait") == {"out": [2, 4, 6]}
    recovered = ip.magics_manager.registry["RelayMagics"].views[-1]
    assert repr(recovered) == (
        "run doubler-1: succeeded · attempt 2 of 3 · 1 executed, 2 reused "
        "— recovered from attempt 1's crash"
    )
    runs = ip.run_line_magic("relay", "runs doubler")
    assert isinstance(runs, RunsView)
    assert runs.text().split()[:4] == ["doubler-1", "succeeded", "attempts", "2"]
    log = ip.run_line_magic("relay", "logs doubler-1 --json")
    assert [s["reused_in"] for s in log["steps"]] == [[2], [2], []]


def test_static_subcommands(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """graph, check, publish, releases, verify, grant/revoke and vault work from the notebook."""
    ip.run_cell_magic("relay", "doubler", GOOD)
    assert isinstance(ip.run_line_magic("relay", "graph doubler"), GraphView)
    assert ip.run_line_magic("relay", "graph doubler --json")["schema"] == "relay-graph/v1"
    with capture_output() as out:
        ip.run_line_magic("relay", "check doubler")
        ip.run_line_magic("relay", "publish doubler")
        ip.run_line_magic("relay", "publish doubler")
        ip.run_line_magic("relay", "releases doubler")
        ip.run_line_magic("relay", "verify doubler")
        ip.run_line_magic("relay", "revoke doubler")
        ip.run_line_magic("relay", "grant doubler")
    text = out.stdout
    assert "doubler: admitted" in text and "doubler: published v1" in text
    assert "unchanged; already published as v1" in text and ": ok" in text
    assert "access revoked" in text and "access granted" in text
    monkeypatch.setattr("getpass.getpass", lambda prompt: "s3cret-value")
    with capture_output() as out:
        ip.run_line_magic("relay", "vault set API_TOKEN")
        ip.run_line_magic("relay", "vault list")
    assert "API_TOKEN" in out.stdout and "s3cret-value" not in out.stdout


def test_check_view_lines() -> None:
    """CheckView numbers relay.py lines as cell lines (the magic line comes first)."""
    from relay_notebook.errors.diagnostics import Diagnostic

    view = CheckView("r", [Diagnostic(3, 0, "x-y", "Do this.", "warning")], line_offset=1)
    assert view.lines() == ["cell line 4: warning: Do this. [x-y]"]


def test_help_is_the_docstring(ip: Any) -> None:
    """%relay? shows user documentation with a runnable example."""
    doc = ip.magics_manager.registry["RelayMagics"].relay_line.__doc__
    assert "%relay run invoice --input order" in doc
    with capture_output() as out:
        ip.run_line_magic("relay", "-h")
    assert "usage: %relay" in out.stdout
