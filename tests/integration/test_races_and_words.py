"""Races and words, with real ``relay`` processes: deleting a relay as a run of it starts, what
deletes leave behind, two sends with one idempotency key, and a run with no attempts left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.integration.test_disk_full import relay, statuses
from tests.relays import relay_path

# an attempt that kills itself (SIGKILL) before its step's checkpoint: every attempt is lost
SUICIDE = textwrap.dedent(
    """
    import os
    import signal
    from dbos import DBOS

    @DBOS.step()
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    @DBOS.workflow()
    async def run(INPUT):
        return die()
    """
)


def start(home: Path, *args: str) -> subprocess.Popen[str]:
    """``relay --home HOME ARGS...`` started, not waited for."""
    return subprocess.Popen(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RELAY_DEBUG": ""},
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=120)
    assert "[internal-error]" not in err and "Traceback" not in err, err
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_delete_force_while_a_run_starts_leaves_no_run_without_its_relay(tmp_path: Path) -> None:
    """``relay delete five --force`` racing ``relay run five``: either the run went with the
    relay or it was refused; the relay's folder is gone whole, no run folder is left."""
    home = tmp_path / "relays"
    outcomes = set()
    for _ in range(4):
        assert relay(home, "check", str(relay_path("five"))).returncode == 0
        run = start(home, "run", "five", "--input", '{"n": 2}')
        delete = start(home, "delete", "five", "--force")
        ran, deleted = finish(run), finish(delete)
        outcomes.add((ran.returncode, deleted.returncode))
        if deleted.returncode == 0:
            assert not (home / "five").exists(), list((home / "five").rglob("*"))
        else:  # refused while the run's attempt held its lock: the relay is whole
            assert deleted.stderr.strip().endswith("[run-locked]"), deleted.stderr
            assert (home / "five" / "relay.py").is_file()
            assert relay(home, "delete", "five", "--force").returncode == 0
            assert not (home / "five").exists()
    assert outcomes, "no race was run"


def test_deletes_leave_nothing_and_run_ids_are_never_handed_out_again(tmp_path: Path) -> None:
    """A deleted run leaves its empty folder (its number stays taken) without a lock file; a
    deleted relay leaves no folder; made again, its runs number on from the old ones."""
    home = tmp_path / "relays"
    assert relay(home, "check", str(relay_path("five"))).returncode == 0
    for _ in range(2):
        assert relay(home, "run", "five", "--input", '{"n": 1}').returncode == 0
    assert relay(home, "delete", "five-1").returncode == 0
    assert list((home / "five" / "runs" / "iteration-1-hook").iterdir()) == []
    assert relay(home, "delete", "five", "--force").returncode == 0
    assert not (home / "five").exists()
    assert relay(home, "check", str(relay_path("five"))).returncode == 0
    again = relay(home, "run", "five", "--input", '{"n": 1}', "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["run_id"] == "five-3"


def test_two_sends_with_one_key_deliver_once_and_say_so(tmp_path: Path) -> None:
    """Two concurrent ``relay send``s with one idempotency key: one says delivered, the other
    that it was a duplicate; the run adds the message once."""
    home = tmp_path / "relays"
    assert relay(home, "check", str(relay_path("gate"))).returncode == 0
    assert relay(home, "run", "gate").returncode == 5  # waits for a message on "go"
    key = ("--idempotency-key", "once-42")
    sends = [start(home, "send", "gate-1", "go", "5", *key) for _ in range(2)]
    lines = [finish(p).stderr for p in sends]
    firsts = [err.splitlines()[0] for err in lines]
    assert sum("was delivered before (same idempotency key)" in f for f in firsts) == 1, lines
    assert sum(" delivered;" in f and "before" not in f for f in firsts) == 1, lines
    logs = relay(home, "logs", "gate-1", "--json")
    assert statuses(home) == {"gate-1": "succeeded"}, logs.stdout[-2000:]
    result = json.loads((home / "gate/runs/iteration-1-hook/relay_result.json").read_text())
    assert result == {"total": 5, "gates": 1}


def test_a_run_with_no_attempts_left_is_not_told_to_recover(tmp_path: Path) -> None:
    """Each attempt SIGKILLs itself: the first two say ``relay recover``; the third says the
    attempts are used up and to fork or start anew, which recover's refusal says too."""
    home = tmp_path / "relays"
    source = tmp_path / "suicide.py"
    source.write_text(SUICIDE)
    assert relay(home, "check", str(source)).returncode == 0
    ends = [relay(home, "run", "suicide")]
    ends += [relay(home, "recover", "suicide-1") for _ in range(2)]
    assert [p.returncode for p in ends] == [3, 3, 3], [p.stderr for p in ends]
    for proc in ends[:2]:
        assert "Recover it with: relay recover suicide-1" in proc.stderr, proc.stderr
    last = ends[2].stderr
    assert "relay recover" not in last and "used all 3 of its attempts" in last, last
    assert "relay fork suicide-1 --from" in last and "relay run suicide" in last, last
    refused = relay(home, "recover", "suicide-1")
    assert refused.stderr.strip().endswith("[attempt-budget-exhausted]"), refused.stderr
    assert "relay fork suicide-1 --from" in refused.stderr
