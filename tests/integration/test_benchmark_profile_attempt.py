"""The attempt profile still runs end to end and finds each part of an attempt by its name."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.integration.benchmark_output import BENCHMARKS

#: the parts every confined, forked attempt has (their process names: runner/namespaces.py)
PARTS = (
    "leader: sessions ahead, sandbox (relay-leader)",
    "sandbox's init (relay-init)",
    "relay's process: DBOS, workflow (relay-child)",
    "PostgreSQL server (postgres)",
)


@pytest.mark.slow
def test_the_attempt_profile_adds_up_each_part_by_its_process_name() -> None:
    """`profile_attempt.py --runs 3` exits 0 and prints CPU for the leader, the sandbox's init
    and the relay's process (found by the names the kit gives them: with those names gone,
    their rows would be missing), and at most 3 PostgreSQL sessions per run where each
    attempt opened 4 (DBOS's pool opened 7 before it shared them): the warm parent keeps its
    attempts' sessions (``runner.warm_sessions``), so of the 3 runs only the one that runs
    beside another opens its 4 (and DBOS's pool one more now and then)."""
    if shutil.which("perf") is None or os.geteuid() != 0:
        pytest.skip("the profile samples with perf record -a, as root")
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "profile_attempt.py"), "--runs", "3"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    if "could not sample here" in out:
        pytest.skip(out.strip())
    for part in PARTS:
        (row,) = [line for line in out.splitlines() if line.startswith(part)]
        total = float(row.split()[-1])
        assert total > 0, row
    sessions = re.search(r"sessions opened per queued run: ([0-9.]+)", out)
    assert sessions is not None, out
    assert float(sessions.group(1)) <= 3, out
