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


def test_a_forks_copied_calls_are_said_copied_never_reused(tmp_path: Path) -> None:
    """A fork crashed after its first fresh call and recovered: as it runs, each copied call
    is shown copied from the parent; its outcome, relay logs (text and JSON) and relay runs
    count as reused only the call its second attempt took from its first's checkpoint."""
    home = tmp_path / "relays"
    source = tmp_path / "shipping.py"
    source.write_text(SHIPPING.read_text().replace("LIMIT = 10", "LIMIT = 100"))
    assert relay(home, "run", str(source), "--input", '{"n": 6}').returncode == 0
    crashed = relay(home, "fork", "shipping-1", "--from", "check", "--crash", "after:check")
    assert crashed.returncode != 0
    shown = [line.strip() for line in crashed.stderr.splitlines() if line.startswith("  step")]
    assert shown[:2] == [
        "step fetch#1 copied from shipping-1",
        "step price#1 copied from shipping-1",
    ]
    assert not any("reused" in line for line in shown), shown
    assert crashed.stdout.startswith("run shipping-2: interrupted (attempt 1)\n"), crashed.stdout
    recovered = relay(home, "recover", "shipping-2")
    assert recovered.returncode == 0, recovered.stderr
    # the recovery replays the copied calls again: still copied, and only check is reused
    shown = [line.strip() for line in recovered.stderr.splitlines() if "  step" in line]
    assert shown[:3] == [
        "step fetch#1 copied from shipping-1",
        "step price#1 copied from shipping-1",
        "step check#1 reused from its checkpoint",
    ], recovered.stderr
    assert len(shown) == 4 and shown[3].startswith("step ship#1 done in "), recovered.stderr
    assert recovered.stdout.startswith("run shipping-2: succeeded (attempt 2)"), recovered.stdout
    assert "1 checkpoint reused" in recovered.stdout, recovered.stdout
    logs = relay(home, "logs", "shipping-2").stdout.splitlines()
    attempts = [line.strip() for line in logs if line.startswith("  attempt")]
    assert attempts == [
        "attempt 1: interrupted, executed 1, reused 0",
        "attempt 2: succeeded, executed 1, reused 1",
    ], logs
    calls = {line.split()[1]: line for line in logs if line.startswith("     ")}
    assert calls["fetch"].endswith("copied from shipping-1"), calls
    assert calls["price"].endswith("copied from shipping-1"), calls
    assert calls["check"].endswith("executed in 1; reused in 2"), calls
    document = json.loads(relay(home, "logs", "shipping-2", "--json").stdout)
    assert [(a["attempt"], a["reused"]) for a in document["attempts"]] == [(1, []), (2, [3])]
    assert document["attempts"][1]["executed"] == [4]  # ship ran; check reused
    assert '"shipped": 12' in recovered.stdout, recovered.stdout
    listed = {r["run_id"]: r for r in json.loads(relay(home, "runs", "--json").stdout)}
    assert listed["shipping-2"]["reused"] == 1
