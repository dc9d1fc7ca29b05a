"""Waiting runs in the notebook on a real IPython shell: %relay send answers a run, and while
the extension is loaded its kernel resumes a durable sleep once it is due."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

from relay_notebook.record.folders import find_run
from relay_notebook.record.run_record import RunRecord
from tests.magics.relay_magic import magic
from tests.polling import wait_until
from tests.relays import relay_source


@pytest.fixture
def waiting_ip(ip: Any) -> Any:
    ip.run_line_magic("config", "RelayMagics.wait_grace = 0.5")
    return ip


def test_send_answers_a_waiting_run_and_binds_its_result(waiting_ip: Any) -> None:
    ip = waiting_ip
    magic(ip, "refund", relay_source("refund"))
    assert magic(ip, 'run refund --input \'{"order": "N-1"}\' --wait') is None
    folder = find_run(ip.find_magic("relay").__self__.workspace, "refund-1")
    assert RunRecord.load(folder).status == "waiting"
    ip.user_ns["answer"] = {"approved": True, "note": "from a cell"}
    result = magic(ip, "send refund-1 approval answer --wait -o paid")
    assert "delivered; the run resumes (attempt 2)" in ip.last_stdout
    assert result == {"status": "paid", "paid": 40, "note": "from a cell"} == ip.user_ns["paid"]
    with pytest.raises(UsageError, match=r"refund-1 succeeded.*run-not-waiting"):
        magic(ip, "send refund-1 approval '{\"approved\": true}'")


def test_the_kernel_resumes_a_due_sleep_while_the_extension_is_loaded(waiting_ip: Any) -> None:
    ip = waiting_ip
    magic(ip, "snooze", relay_source("snooze"))
    magic(ip, "run snooze --input '{\"seconds\": 2}' --wait")
    folder = find_run(ip.find_magic("relay").__self__.workspace, "snooze-1")
    assert RunRecord.load(folder).status == "waiting"
    wait_until(
        lambda: RunRecord.load(folder).status == "succeeded",
        timeout=60,
        what="the kernel's waker to resume the due sleep",
    )
    assert [a.status for a in RunRecord.load(folder).attempts] == ["waiting", "succeeded"]
