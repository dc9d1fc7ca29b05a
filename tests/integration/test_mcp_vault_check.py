"""`relay check` warns of each vault secret a workspace MCP server names that is not set: one
coded line naming the server, the setting, the secret and the command to set it, never a value;
the same line in `%%relay`'s and REST's check, and a real run proves the warning right."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.utils.capture import capture_output
from test_mcp_http import holding
from test_rest_api import seeded_server

from relay_notebook import commands
from relay_notebook.commands.analysis_cache import cached_check
from relay_notebook.workspace import Workspace
from tests.shells import relay_shell

SERVERS = Path(__file__).parents[1] / "servers"
VALUE = "probe-vault-7c1e94d2ab36f805"
SERVERS_YAML = """\
servers:
  probe:
    command: python
    args: [mcp_env_probe.py]
    env: {TOKEN: vault:PROBE_TOKEN, MODE: plain}
  docs:
    url: http://127.0.0.1:9/mcp
    headers:
      Authorization: "Bearer ${vault:DOCS_TOKEN}"
    relays: [reader]
"""
PROBER = """\
from dbos import DBOS
from agentworks import mcp


@DBOS.workflow()
async def run(INPUT):
    return await mcp(server="probe", tool="token_check")
"""
READER = PROBER.replace('server="probe", tool="token_check"', 'server="docs", tool="lookup"')
PLAIN = "from dbos import DBOS\n\n\n@DBOS.workflow()\nasync def run(INPUT):\n    return INPUT\n"
PROBE_LINE = (
    "../mcp_servers.yaml:5:0: warning: MCP server 'probe' takes env.TOKEN from vault secret "
    "'PROBE_TOKEN', which is not set in the workspace vault: a run of prober that starts "
    "'probe' would stop there. Set it with: relay vault set PROBE_TOKEN  (or %relay vault set "
    "PROBE_TOKEN). [mcp-secret-unset]"
)


def seed(home: Path) -> None:
    """The probe server's script, the declarations, and a relay for each server and none."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVERS / "mcp_env_probe.py", home / "mcp_env_probe.py")
    (home / "mcp_servers.yaml").write_text(SERVERS_YAML, encoding="utf-8")
    ws = Workspace(home)
    ws.save_draft("prober", PROBER)
    ws.save_draft("reader", READER)
    ws.save_draft("plain", PLAIN)


def relay(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The `relay` CLI on the workspace, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), *args],
        input=stdin, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def seeded(workspace: Workspace) -> Workspace:
    seed(workspace.home)
    return workspace


@pytest.fixture
def shell(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A real IPython shell with the extension loaded, on the test's workspace."""
    with relay_shell(workspace.home, monkeypatch) as ip:
        yield ip


def test_relay_check_warns_until_the_secret_is_set_and_a_run_proves_it(seeded: Workspace) -> None:
    """`relay check` admits the relay with one warning line; a run indeed fails for the unset
    secret; after `relay vault set` the check is clean and the run gets the value, which no
    output and no stored file holds."""
    home = seeded.home
    checked = relay(home, "check", "prober")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [PROBE_LINE, "prober: admitted (0 errors, 1 warnings)"]
    as_json = json.loads(relay(home, "check", "prober", "--json").stdout)
    assert as_json["ok"] is True and as_json["warnings"] == 1
    assert [(d["code"], d["severity"], d["file"], d["line"]) for d in as_json["diagnostics"]] == [
        ("mcp-secret-unset", "warning", "../mcp_servers.yaml", 5)
    ]

    failed = commands.run(seeded, "prober").wait(120)
    assert failed.status == "failed"
    assert "relay vault set PROBE_TOKEN" in json.dumps(failed.error)

    stored = relay(home, "vault", "set", "PROBE_TOKEN", stdin=VALUE + "\n")
    assert stored.returncode == 0, stored.stderr
    again = relay(home, "check", "prober")
    assert again.stdout.splitlines() == ["prober: admitted (0 errors, 0 warnings)"]
    done = commands.run(seeded, "prober").wait(120)
    assert done.status == "succeeded", done.error
    assert done.result == {"present": True, "sha256": hashlib.sha256(VALUE.encode()).hexdigest()}
    for shown in (checked, stored, again):
        assert VALUE not in shown.stdout + shown.stderr
    assert holding(seeded, VALUE) == []


def test_a_header_secret_is_warned_only_for_the_relays_that_may_use_its_server(
    seeded: Workspace,
) -> None:
    """`docs` (relays: [reader]) is warned for reader, by its header; prober is warned only
    of `probe`'s secret; a relay that never uses MCP is not warned."""
    [line] = [
        d.format() for d in commands.check(seeded, "reader").diagnostics if "docs" in d.message
    ]
    assert line.startswith("../mcp_servers.yaml:9:0: warning: MCP server 'docs' takes ")
    assert "headers.Authorization from vault secret 'DOCS_TOKEN'" in line
    assert "a run of reader that connects to 'docs' would stop there" in line
    assert line.endswith(
        "relay vault set DOCS_TOKEN  (or %relay vault set DOCS_TOKEN). [mcp-secret-unset]"
    )
    assert [
        d.message for d in commands.check(seeded, "prober").diagnostics if "docs" in d.message
    ] == []
    assert commands.check(seeded, "plain").diagnostics == []


def test_a_secret_the_run_reads_from_the_environment_is_not_warned(
    seeded: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's `vault()` falls back to a secret-looking environment variable (8 characters or
    more): the check counts it as set, as the run would."""
    monkeypatch.setenv("PROBE_TOKEN", VALUE)
    assert commands.check(seeded, "prober").warnings == []
    monkeypatch.setenv("PROBE_TOKEN", "short")  # too short: a run does not read it
    assert [d.code for d in commands.check(seeded, "prober").warnings] == ["mcp-secret-unset"]


def test_the_cached_check_of_a_listing_sees_the_vault_change(seeded: Workspace) -> None:
    """The analysis cache keys on which secrets are unset: set, the warning is gone."""
    draft = seeded.load_draft("prober")
    assert [d.code for d in cached_check(seeded, draft).warnings] == ["mcp-secret-unset"]
    assert [d.code for d in cached_check(seeded, draft).warnings] == ["mcp-secret-unset"]
    commands.vault_set(seeded, "PROBE_TOKEN", VALUE)
    assert cached_check(seeded, draft).warnings == []
    assert holding(seeded, VALUE) == []


def test_a_relay_cell_and_relay_check_in_the_notebook_show_the_warning(
    seeded: Workspace, shell: Any
) -> None:
    """`%%relay prober` saves and admits the cell, displaying the warning line; `%relay check`
    returns the same line."""
    with capture_output() as cell:
        shell.run_cell_magic("relay", "prober --no-graph", PROBER)
    shown = [o.data["text/plain"] for o in cell.outputs]
    assert any(PROBE_LINE in text for text in shown), shown
    with capture_output():
        view = shell.run_line_magic("relay", "check prober")
    assert view.lines() == [PROBE_LINE]


def test_rest_shows_the_warning_in_the_relays_check(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`GET relay/api/relays/prober` has the warning in its check report, the value nowhere."""
    with seeded_server(tmp_path_factory, "vault-check", seed) as server:
        body = server.call("GET", "/relays/{name}", {"name": "prober"}).body
        check = body["check"]
        assert check["ok"] is True and check["warnings"] == 1
        [found] = check["diagnostics"]
        assert (found["code"], found["line"]) == ("mcp-secret-unset", 5)
        assert found["message"] + f" [{found['code']}]" == PROBE_LINE.split(": warning: ")[1]
