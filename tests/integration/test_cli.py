"""The `relay` CLI as a user runs it: a real process, its stdout, stderr and exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.relays import relay_path, relay_source

BAD = relay_source("bad")


def relay(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `relay --home HOME ARGS...` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "RELAY_DEBUG": ""},
        timeout=60,
    )


def assert_one_clean_error_line(proc: subprocess.CompletedProcess[str], code: str) -> None:
    """stderr ends with one `relay: error: ... [code]` line and holds no traceback."""
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("relay: error: ") and last.endswith(f"[{code}]"), proc.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "relays"


@pytest.fixture(scope="module")
def invoice_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace where invoice.py was checked (so saved), made once for the module's tests
    that only read it."""
    home = tmp_path_factory.mktemp("cli-invoice") / "relays"
    assert relay(home, "check", str(relay_path("invoice"))).returncode == 0
    return home


def test_check_a_good_file_admits_it_and_saves_the_draft(home: Path) -> None:
    """`relay check invoice.py` exits 0, says admitted, and saves the draft."""
    proc = relay(home, "check", str(relay_path("invoice")))
    assert proc.returncode == 0, proc.stderr
    assert "invoice: admitted (0 errors" in proc.stdout
    assert (home / "invoice" / "relay.py").read_text() == relay_source("invoice")


def test_check_json_reports_every_diagnostic(home: Path, tmp_path: Path) -> None:
    """`check --json` lists each problem with its line and code, and exits 1."""
    (tmp_path / "bad.py").write_text(BAD)
    proc = relay(home, "check", str(tmp_path / "bad.py"), "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["relay"] == "bad" and report["ok"] is False
    codes = {(d["code"], d["line"]) for d in report["diagnostics"] if d["severity"] == "error"}
    assert ("dbos-launch-forbidden", 4) in codes
    assert any(c == "entrypoint-not-async" or c == "entrypoint-not-workflow" for c, _ in codes)


def test_check_by_name_after_saving(invoice_home: Path) -> None:
    """A relay saved once is checked again by its name."""
    proc = relay(invoice_home, "check", "invoice")
    assert proc.returncode == 0 and "admitted" in proc.stdout


def test_graph_text_json_and_svg(invoice_home: Path) -> None:
    """`graph` prints a readable listing, a relay-graph/v1 document, or an SVG."""
    home = invoice_home
    text = relay(home, "graph", "invoice")
    assert text.returncode == 0
    assert text.stdout.startswith("flow graph of invoice:")
    assert "extract_invoice" in text.stdout
    doc = json.loads(relay(home, "graph", "invoice", "--json").stdout)
    assert doc["schema"] == "relay-graph/v1"
    assert all("x" in n and "y" in n for n in doc["nodes"])
    svg = relay(home, "graph", "invoice", "--svg").stdout
    assert svg.lstrip().startswith(("<svg", "<?xml")) and "extract_invoice" in svg


def test_publish_releases_and_verify(home: Path) -> None:
    """publish prints relay/version/hash, is idempotent, and verify confirms the files."""
    proc = relay(home, "publish", str(relay_path("invoice")), "--json")
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)
    assert first["relay"] == "invoice" and first["version"] == 1 and len(first["hash"]) == 64
    again = json.loads(relay(home, "publish", "invoice", "--json").stdout)
    assert again["hash"] == first["hash"] and again["created"] is False
    listing = relay(home, "releases", "invoice")
    assert listing.returncode == 0 and "invoice v1" in listing.stdout
    ok = relay(home, "verify", "invoice")
    assert ok.returncode == 0 and "ok" in ok.stdout


def test_verify_exits_1_on_tampering(home: Path) -> None:
    """Editing a frozen file makes `verify` name it and exit 1."""
    first = json.loads(relay(home, "publish", str(relay_path("invoice")), "--json").stdout)
    frozen = home / "invoice" / "releases" / first["hash"] / "relay.py"
    os.chmod(frozen, 0o644)
    frozen.write_text(frozen.read_text() + "\n# edited\n")
    proc = relay(home, "verify", "invoice", "v1")
    assert proc.returncode == 1
    assert "TAMPERED" in proc.stdout and "relay.py: checksum changed" in proc.stdout


def test_publish_refuses_a_relay_that_fails_admission(home: Path, tmp_path: Path) -> None:
    """A relay with admission errors is not frozen; stderr lists the problems."""
    (tmp_path / "bad.py").write_text(BAD)
    proc = relay(home, "publish", str(tmp_path / "bad.py"))
    assert proc.returncode == 1
    assert "relay.py:4:" in proc.stderr
    assert_one_clean_error_line(proc, "admission-failed")
    assert not (home / "bad" / "releases").exists()


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (["check", "nosuch"], "relay-not-found", 2),
        (["check", "../escape"], "invalid-target", 2),
        (["check", "bad name"], "invalid-relay-name", 2),
        (["check", "missing.py"], "invalid-target", 2),
        (["releases", "nosuch"], "relay-not-found", 2),
        (["verify", "nosuch"], "relay-not-found", 2),
        (["verify", "9lives"], "invalid-relay-name", 2),
        (["frobnicate"], "usage", 2),
        (["graph"], "usage", 2),
        (["graph", "x", "--json", "--svg"], "usage", 2),
    ],
)
def test_bad_input_is_one_line_with_a_code(
    home: Path, args: list[str], code: str, status: int
) -> None:
    """Every kind of bad input gives one error line with its code and exit status 2."""
    proc = relay(home, *args)
    assert proc.returncode == status
    assert_one_clean_error_line(proc, code)


def test_verify_unpublished_relay_says_to_publish(invoice_home: Path) -> None:
    """verify on a relay with no releases says how to publish one."""
    proc = relay(invoice_home, "verify", "invoice")
    assert proc.returncode == 2
    assert "relay publish invoice" in proc.stderr
    assert_one_clean_error_line(proc, "release-not-found")


def test_bad_manifest_is_reported_not_a_traceback(home: Path) -> None:
    """A broken relay.yaml is one clear line naming the bad key."""
    relay(home, "check", str(relay_path("invoice")))
    (home / "invoice" / "relay.yaml").write_text("kind: relay\nvariables:\n  n: 3\n")
    proc = relay(home, "check", "invoice")
    assert proc.returncode == 2
    assert "variables.n: expected a string" in proc.stderr
    assert_one_clean_error_line(proc, "invalid-manifest")


def test_relay_home_environment_variable(tmp_path: Path) -> None:
    """Without --home the CLI uses $RELAY_HOME."""
    env = {**os.environ, "RELAY_HOME": str(tmp_path / "ws")}
    proc = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "check", str(relay_path("invoice"))],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 0
    assert (tmp_path / "ws" / "invoice" / "relay.py").exists()


def test_analysis_never_executes_the_source(home: Path, tmp_path: Path) -> None:
    """check, graph and publish leave no trace of the relay's top-level code running."""
    marker = tmp_path / "EXECUTED"
    source = (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from dbos import DBOS\n\n"
        "@DBOS.step()\nasync def s():\n"
        f"    pathlib.Path({str(marker)!r}).write_text('step ran')\n\n"
        "@DBOS.workflow()\nasync def run(INPUT):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('workflow ran')\n"
        "    return await s()\n"
    )
    (tmp_path / "sneaky.py").write_text(source)
    for args in (
        ["check", str(tmp_path / "sneaky.py")],
        ["graph", "sneaky", "--json"],
        ["graph", "sneaky", "--svg"],
        ["publish", "sneaky"],
    ):
        proc = relay(home, *args)
        assert "Traceback" not in proc.stderr
    assert (home / "sneaky" / "releases").is_dir()
    assert not marker.exists()


LOOP = relay_source("doubler")


@pytest.fixture(scope="module")
def loop_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace where loop.py (the doubler) was checked, and no run made: made once for
    the module's commands that are refused before they run anything."""
    base = tmp_path_factory.mktemp("cli-loop")
    (base / "loop.py").write_text(LOOP)
    home = base / "relays"
    assert relay(home, "check", str(base / "loop.py")).returncode == 0
    return home


def test_run_crash_recover_runs_and_logs(home: Path, tmp_path: Path) -> None:
    """The whole loop from a terminal: run with a crash (exit 3), recover (exit 0), read logs."""
    (tmp_path / "loop.py").write_text(LOOP)
    proc = relay(
        home,
        "run",
        str(tmp_path / "loop.py"),
        "--input",
        '{"xs": [1, 2, 3]}',
        "--crash",
        "after:double#2",
        "--json",
    )
    assert proc.returncode == 3, proc.stderr
    first = json.loads(proc.stdout)
    assert first["run_id"] == "loop-1" and first["status"] == "interrupted"
    assert first["attempt"] == 1 and "relay recover loop-1" in first["error"]["message"]
    proc = relay(home, "recover", "loop-1", "--json")
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)
    assert second["result"] == {"out": [2, 4, 6]} and second["attempt"] == 2
    runs = json.loads(relay(home, "runs", "--json").stdout)
    assert [(r["run_id"], r["status"], r["attempts"], r["reused"]) for r in runs] == [
        ("loop-1", "succeeded", 2, 2)
    ]
    log = json.loads(relay(home, "logs", "loop-1", "--json").stdout)
    assert [a["status"] for a in log["attempts"]] == ["interrupted", "succeeded"]
    assert [
        (s["function_id"], s["name"], s["executed_in"], s["reused_in"]) for s in log["steps"]
    ] == [
        (1, "double", [1], [2]),
        (2, "double", [1], [2]),
        (3, "double", [2], []),
    ]
    assert all(s["retries"] == [] for s in log["steps"])
    text = relay(home, "logs", "loop-1")
    assert "executed in 1; reused in 2" in text.stdout


def test_run_prints_progress_and_the_result(home: Path, tmp_path: Path) -> None:
    """Without --json, run shows each step on stderr and the result on stdout."""
    (tmp_path / "loop.py").write_text(LOOP)
    proc = relay(home, "run", str(tmp_path / "loop.py"), "--input", '{"xs": [5]}')
    assert proc.returncode == 0
    assert "run loop-1: succeeded (attempt 1)" in proc.stdout and '"out": [\n    10' in proc.stdout
    assert "step double#1 done" in proc.stderr


def test_a_failing_relay_exits_1_with_its_traceback(home: Path, tmp_path: Path) -> None:
    """A relay that raises exits 1 and prints the error with relay.py line numbers."""
    (tmp_path / "oops.py").write_text(
        "from dbos import DBOS\n\n@DBOS.workflow()\nasync def run(INPUT):\n"
        "    raise KeyError('missing field')\n"
    )
    proc = relay(home, "run", str(tmp_path / "oops.py"))
    assert proc.returncode == 1
    assert "KeyError" in proc.stderr and 'File "relay.py", line 5, in run' in proc.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run", "nosuch"], "relay-not-found"),
        (["run", "loop", "--input", "{bad"], "invalid-input"),
        (["run", "loop", "--input-file", "/nonexistent.json"], "invalid-input"),
        (["run", "loop", "--crash", "sometime:double"], "invalid-crash-spec"),
        (["run", "loop", "--crash", "after:nosuchstep"], "invalid-crash-spec"),
        (["run", "loop", "--release", "v7"], "release-not-found"),
        (["recover", "loop-99"], "run-not-found"),
        (["recover", "not a run id"], "invalid-run-id"),
        (["logs", "loop-99"], "run-not-found"),
        (["runs", "nosuch"], "relay-not-found"),
    ],
)
def test_run_commands_reject_bad_input_clearly(loop_home: Path, args: list[str], code: str) -> None:
    """Bad run/recover/logs arguments are one line with a code and exit status 2."""
    home = loop_home
    proc = relay(home, *args)
    assert proc.returncode == 2, proc.stderr
    assert_one_clean_error_line(proc, code)
    assert not (home / "loop" / "runs").exists()
