"""relay fork, lineage, diff and runs --tree from a terminal, as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SHIPPING = Path(__file__).parents[1] / "relays" / "shipping.py"


def relay(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_fork_a_failed_run_onto_the_fixed_draft_from_the_terminal(tmp_path: Path) -> None:
    """A failed run, the draft fixed, relay fork --draft: exit 0, the result, two copied
    calls; relay runs --tree and relay lineage draw the fork; relay diff names what changed;
    a call the run never made exits 1 with [fork-refused]."""
    home = tmp_path / "relays"
    source = tmp_path / "shipping.py"
    source.write_text(SHIPPING.read_text())
    failed = relay(home, "run", str(source), "--input", '{"n": 6}')
    assert failed.returncode == 1 and "over the limit of 10" in failed.stderr
    source.write_text(SHIPPING.read_text().replace("LIMIT = 10", "LIMIT = 100"))
    assert relay(home, "check", str(source)).returncode == 0  # saves the fixed draft
    forked = relay(home, "fork", "shipping-1", "--from", "check", "--draft", "--json")
    assert forked.returncode == 0, forked.stderr
    outcome = json.loads(forked.stdout)
    assert outcome["run_id"] == "shipping-2" and outcome["result"] == {"shipped": 12}
    tree = relay(home, "runs", "--tree").stdout.splitlines()
    assert tree == [
        "shipping-1  failed",
        "└─ shipping-2  succeeded  from check · the draft code",
    ]
    assert relay(home, "lineage", "shipping-2").stdout.splitlines() == tree
    # its two calls were copied from shipping-1, not reused: relay runs does not count them
    listed = {r["run_id"]: r for r in json.loads(relay(home, "runs", "--json").stdout)}
    assert listed["shipping-2"]["reused"] == 0 and listed["shipping-1"]["reused"] == 0
    # relay logs says which calls the fork copied, as the run graph does
    logs = relay(home, "logs", "shipping-2").stdout.splitlines()
    copied = [line.split()[1] for line in logs if "copied from shipping-1" in line]
    assert copied == ["fetch", "price"], logs
    diff = relay(home, "diff", "shipping-1", "shipping-2", "--json")
    rows = {r["call"]: r["differs"] for r in json.loads(diff.stdout)}
    assert rows["fetch#1"] == [] and rows["ship#1"] == ["only in shipping-2"]
    refused = relay(home, "fork", "shipping-1", "--from", "ship", "--draft")
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith("[fork-refused]")
    assert "its calls: fetch#1, price#1, check#1" in refused.stderr
