"""``relay worker``'s intervals (``--lease``, ``--poll``): a bad value is one usage line."""

from __future__ import annotations

import pytest

from relay_notebook.cli import main as cli_main


@pytest.mark.parametrize("flag", ["--lease", "--poll"])
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("inf", "expected a number of seconds, got 'inf'"),
        ("nan", "expected a number of seconds, got 'nan'"),
        ("0", "expected more than 0 seconds, got 0"),
        ("-1", "expected more than 0 seconds, got -1"),
        ("soon", "expected seconds, got 'soon'"),
    ],
)
def test_a_worker_interval_that_is_no_number_of_seconds_is_a_usage_line(
    flag: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(["worker", flag, value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"argument {flag}: {said}" in err and err.endswith("[usage]"), err
