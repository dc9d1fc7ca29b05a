"""The ``ip`` fixture: each magics test gets its own shell, so nothing leaks between tests."""

from __future__ import annotations

from typing import Any

from IPython.core.interactiveshell import InteractiveShell


def test_a_test_leaves_a_variable_and_a_run_result_behind(ip: Any) -> None:
    """The first test binds a variable and a magic's ``-o`` result in its shell."""
    ip.run_cell("left_behind = 1")
    ip.user_ns["result"] = {"slept": 1.5}
    assert ip.user_ns["left_behind"] == 1 and InteractiveShell.instance() is ip


def test_the_next_test_sees_none_of_it(ip: Any) -> None:
    """The next test has another shell whose namespace holds neither name."""
    assert "left_behind" not in ip.user_ns and "result" not in ip.user_ns
    assert isinstance(ip.run_cell("left_behind").error_in_exec, NameError)
    assert InteractiveShell.instance() is ip and "RelayMagics" in ip.magics_manager.registry
