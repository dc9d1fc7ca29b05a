"""``%relay run --queue`` and ``%relay workers`` on a real shell, a real worker and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from relay_notebook.commands import QueuedRun
from tests.polling import wait_until

STEADY = """import asyncio
from dbos import DBOS


@DBOS.step()
async def double(x):
    return 2 * x


@DBOS.workflow()
async def run(INPUT):
    return {"value": await double(INPUT["x"])}
"""


def test_queue_waits_for_a_worker_and_binds_the_result(
    ip: Any, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--database-url`` holds for the session; ``--queue --wait -o`` returns the pool's result."""
    monkeypatch.setenv("RELAY_DATABASE_URL", "")  # restored (unset) after the test
    ip.run_cell_magic("relay", "steady", STEADY)
    home = str(tmp_path / "relays")
    worker = subprocess.Popen(
        [sys.executable, "-m", "relay_notebook.cli", "--home", home, "--database-url",
         database_url, "worker", "--id", "nb-worker", "--lease", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        ip.run_line_magic("relay", f"--database-url {database_url} workers")
        value = ip.run_line_magic("relay", "run steady --queue --input '{\"x\": 21}' --wait -o res")
        assert value == {"value": 42} and ip.user_ns["res"] == {"value": 42}
        queued = ip.run_line_magic("relay", "run steady --queue --input '{\"x\": 1}'")
        assert isinstance(queued, QueuedRun) and queued.wait(60).result == {"value": 2}
        wait_until(
            lambda: "nb-worker" in list(ip.run_line_magic("relay", "workers")["executor_id"]),
            timeout=30,
            interval=0.2,
            what="nb-worker in %relay workers",
        )
        table = ip.run_line_magic("relay", "workers")
        assert list(table["executor_id"]) == ["nb-worker"] and bool(table["alive"][0])
    finally:
        worker.kill()
        worker.wait()


def test_a_bad_database_url_is_a_usage_error(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL that is not postgresql:// is refused as a usage error with its code."""
    monkeypatch.setenv("RELAY_DATABASE_URL", "")  # restored (unset) after the test
    with pytest.raises(UsageError, match="invalid-database-url"):
        ip.run_line_magic("relay", "--database-url mysql://h/db runs")
