"""The worker-pool benchmark still runs end to end (``--quick``) and prints its numbered rows."""

from __future__ import annotations

import pytest

from tests.integration.benchmark_output import labels, numbered, quick


@pytest.mark.slow
def test_quick_workers_benchmark_prints_every_row() -> None:
    """`bench_workers.py --quick`, one round of 2 runs and a 20-step loop measured twice (the
    rows, not the figures: kept small for the suite's time), exits 0 and prints the throughput
    rows, the steps/s row and the warm pool's rows against a spawning worker, with the DBOS
    queue settings, the judged rows' intervals, and the loop's rate without the sandbox
    beside; one round decides no row, so each judged row says unsure."""
    out = quick(
        "bench_workers", "--repeats", "1", "--runs", "2", "--steps", "20", "--loop-samples", "2",
        timeout=600,
    )  # fmt: skip
    rows = numbered(out, 2)
    assert labels(rows) == [
        "1 kit, 1 worker",
        "1 kit, 2 workers",
        "1 kit, 4 workers",
        "1 bare DBOS, 1 worker",
        "2 20-step relay",
    ], out
    assert all("runs/s" in line for line in rows[:4]), out
    assert "steps/s" in rows[4] and rows[4].rstrip().endswith("unsure"), rows[4]  # one round
    assert "PostgreSQL: " in out and "fsync on" in out
    warm = [line for line in out.splitlines() if line.startswith("3 warm pool")]
    assert labels(warm) == ["3 warm pool, runs/s", "3 warm pool, CPU per run"], out
    assert all(line.rstrip().endswith("unsure") for line in warm), warm
    lines = out.splitlines()
    at = lines.index("intervals of the judged medians (low-high, their coverage, samples):")
    judged = {line.split("  ")[1]: line.rsplit("n=", 1)[1] for line in lines[at + 1 : at + 5]}
    assert judged == {
        "2 20-step relay against bare DBOS": "2)",  # the loop, twice a round
        "3 warm pool, runs/s against spawned": "1)",
        "3 warm pool, CPU per run against spawned": "1)",
        "4 CPU per queued run": "1)",
    }, out
    assert lines[at + 5].startswith("(a row of 1 sample says unsure whatever its figures"), out
    assert "worker_concurrency 2, polling_interval_sec 0.5" in out
    without = [line for line in out.splitlines() if line.startswith("info: row 2 without")]
    assert len(without) == 1 and "steps/s" in without[0] and "x bare DBOS" in without[0], out
