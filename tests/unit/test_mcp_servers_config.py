"""mcp_servers.yaml beyond stdio: url: servers with headers, vault references in env and
headers, and the one coded line `relay check` (and admission) reports for an invalid file."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentworks.errors import MCPError, MCPServersError
from agentworks.mcp_servers import load_mcp_servers, resolve_secrets, secret_names
from relay_notebook import commands
from relay_notebook.commands.analysis_cache import cached_check
from relay_notebook.errors import AdmissionError
from relay_notebook.runner.crash import CrashSpec, parse_crash_spec
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import call_key
from relay_notebook.workspace import Workspace

MCP_RELAY = """\
from dbos import DBOS
from agentworks import mcp


@DBOS.workflow()
async def run(INPUT):
    return await mcp(server="docs", resource="docs://guide")
"""
PLAIN_RELAY = """\
from dbos import DBOS


@DBOS.workflow()
async def run(INPUT):
    return INPUT
"""
BROKEN = """\
servers:
  docs:
    url: http://127.0.0.1:8000/mcp
    env: {TOKEN: vault:DOCS_TOKEN}
"""


def declare(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "mcp_servers.yaml").write_text(textwrap.dedent(text), encoding="utf-8")


def refusal(home: Path, text: str) -> MCPServersError:
    declare(home, text)
    with pytest.raises(MCPServersError) as caught:
        load_mcp_servers(home)
    return caught.value


def test_a_url_server_keeps_its_headers_as_vault_references(tmp_path: Path) -> None:
    """A url: server is streamable HTTP; its headers keep `${vault:NAME}` as written."""
    declare(
        tmp_path,
        """\
        servers:
          docs:
            url: http://127.0.0.1:8000/mcp
            headers: {Authorization: "Bearer ${vault:DOCS_TOKEN}", X-Team: relays}
            call_timeout: 5
        """,
    )
    docs = load_mcp_servers(tmp_path)["docs"]
    assert (docs.transport, docs.url, docs.command) == ("http", "http://127.0.0.1:8000/mcp", "")
    assert dict(docs.headers) == {"Authorization": "Bearer ${vault:DOCS_TOKEN}", "X-Team": "relays"}
    assert docs.secrets() == ["DOCS_TOKEN"] and docs.call_timeout == 5.0


def test_a_stdio_server_names_vault_secrets_in_its_env(tmp_path: Path) -> None:
    """`env: {TOKEN: vault:NAME}` is a reference; the config never holds a value."""
    declare(tmp_path, "servers:\n  git: {command: python, env: {TOKEN: vault:GIT_TOKEN, A: b}}\n")
    git = load_mcp_servers(tmp_path)["git"]
    assert git.transport == "stdio" and dict(git.env) == {"TOKEN": "vault:GIT_TOKEN", "A": "b"}
    assert git.secrets() == ["GIT_TOKEN"]


def test_references_resolve_whole_or_embedded() -> None:
    """`vault:NAME` is the whole value; `${vault:NAME}` is replaced inside a longer one."""
    vault = {"A": "alpha-1", "B": "beta-22"}
    values = {"x": "vault:A", "y": "Bearer ${vault:B}", "z": "plain vault-ish", "w": "${vault:A}"}
    assert resolve_secrets(values, vault.__getitem__) == {
        "x": "alpha-1", "y": "Bearer beta-22", "z": "plain vault-ish", "w": "alpha-1"
    }  # fmt: skip
    assert secret_names("Bearer ${vault:B} ${vault:A}") == ["B", "A"]
    assert secret_names("vault:A") == ["A"] and secret_names("no secret") == []


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        (
            "servers:\n  d:\n    command: python\n    url: http://127.0.0.1:1/mcp\n",
            2,
            "servers.d must be a mapping with either command: (a stdio server) or url:",
        ),
        ("servers:\n  d:\n    relays: '*'\n", 2, "servers.d must be a mapping with either"),
        (BROKEN, 4, "servers.docs.env is a setting of stdio servers (command:)"),
        (
            "servers:\n  d:\n    command: python\n    headers: {A: b}\n",
            4,
            "servers.d.headers is a setting of url: servers",
        ),
        (
            "servers:\n  d:\n    url: ftp://127.0.0.1/mcp\n",
            3,
            "servers.d.url must be the server's http:// or https:// address",
        ),
        (
            "servers:\n  d:\n    url: http://h/mcp?key=vault:K\n",
            3,
            "a secret goes in headers:, never in the URL",
        ),
        (
            "servers:\n  d:\n    command: python\n    env:\n      TOKEN: vault:my token\n",
            5,
            "servers.d.env.TOKEN names no valid secret",
        ),
        (
            "servers:\n  d:\n    url: http://h/mcp\n    headers:\n      A: Bearer vault:K\n",
            5,
            "servers.d.headers.A holds a vault reference that is not ${vault:NAME}",
        ),
        (
            "servers:\n  d:\n    url: http://h/mcp\n    headers: {'bad name': x}\n",
            4,
            "servers.d.headers must map header names to strings",
        ),
    ],
)
def test_an_invalid_declaration_names_its_line_and_what_to_write(
    tmp_path: Path, text: str, line: int, expected: str
) -> None:
    """Each mistake is an `mcp-servers-invalid` error naming the line and the setting."""
    error = refusal(tmp_path, text)
    assert isinstance(error, MCPError) and error.code == "mcp-servers-invalid"
    assert error.line == line and expected in error.problem, error.problem
    assert str(error).startswith(f"{tmp_path.resolve() / 'mcp_servers.yaml'}, line {line}: ")
    assert str(error).endswith("[mcp-servers-invalid]")


def test_the_error_survives_pickling(tmp_path: Path) -> None:
    """A child's MCPServersError crosses a process boundary with its line and problem."""
    error = refusal(tmp_path, BROKEN)
    again = pickle.loads(pickle.dumps(error))
    assert (again.line, again.problem, str(again)) == (error.line, error.problem, str(error))


def test_relay_check_reports_an_invalid_file_as_one_coded_line(tmp_path: Path) -> None:
    """A relay that uses MCP fails the check with one line naming the file, its line, the
    problem and what to type next; admission of a run refuses it the same way."""
    ws = Workspace(tmp_path / "relays")
    ws.save_draft("reader", MCP_RELAY)
    declare(ws.home, BROKEN)
    report = commands.check(ws, "reader")
    assert not report.ok
    [line] = [d.format() for d in report.errors]
    assert line.startswith("../mcp_servers.yaml:4:0: error: The workspace's mcp_servers.yaml is")
    assert "servers.docs.env is a setting of stdio servers" in line
    assert line.endswith("Then run 'relay check reader'. [mcp-servers-invalid]")
    with pytest.raises(AdmissionError) as caught:
        commands.run(ws, "reader")
    assert [d.code for d in caught.value.diagnostics] == ["mcp-servers-invalid"]


def test_a_relay_without_mcp_is_only_warned(tmp_path: Path) -> None:
    """A relay that never mentions MCP is admitted, with the file's problem as a warning."""
    ws = Workspace(tmp_path / "relays")
    ws.save_draft("plain", PLAIN_RELAY)
    declare(ws.home, BROKEN)
    report = commands.check(ws, "plain")
    assert report.ok and [d.code for d in report.warnings] == ["mcp-servers-invalid"]


def test_a_fixed_file_is_checked_again_not_read_from_the_cache(tmp_path: Path) -> None:
    """The listing's cached check sees the file change: fixed, the relay is no longer broken."""
    ws = Workspace(tmp_path / "relays")
    ws.save_draft("reader", MCP_RELAY)
    declare(ws.home, BROKEN)
    assert not cached_check(ws, ws.load_draft("reader")).ok
    declare(ws.home, "servers:\n  docs: {url: 'http://127.0.0.1:8000/mcp'}\n")
    assert cached_check(ws, ws.load_draft("reader")).ok


def test_the_relay_check_command_exits_1_with_the_coded_line(tmp_path: Path) -> None:
    """`relay check NAME` prints the line and `rejected`, and exits 1."""
    ws = Workspace(tmp_path / "relays")
    ws.save_draft("reader", MCP_RELAY)
    declare(ws.home, "servers:\n  docs:\n    url: http://127.0.0.1:8000/mcp\n    cwd: x\n")
    done = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home), "check", "reader"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("../mcp_servers.yaml:4:0: error: ")
    assert lines[0].endswith("[mcp-servers-invalid]") and "servers.docs.cwd" in lines[0]
    assert lines[-1] == "reader: rejected (1 errors, 0 warnings)"


def test_the_flow_graph_names_each_mcp_operation_as_its_step() -> None:
    """Tool, resource, prompt and listing calls are mcp nodes whose call keys are the step
    names the run records, so the run view paints them on the flow graph."""
    source = textwrap.dedent(
        """\
        from dbos import DBOS
        from agentworks import mcp


        @DBOS.workflow()
        async def run(INPUT):
            await mcp(server="docs", tool="lookup", arguments={"term": INPUT})
            await mcp(server="docs", resource="docs://guide")
            await mcp(server="docs", prompt="review", arguments={"text": "x"})
            return await mcp(server="docs", listing="prompts")
        """
    )
    nodes = [n for n in build_flow_graph(source, relay="reader").nodes if n.type == "mcp"]
    assert [n.label for n in nodes] == [
        "docs/lookup", "docs/docs://guide", "docs/review", "docs/prompts"
    ]  # fmt: skip
    assert [call_key(n) for n in nodes] == [
        "mcp:docs.lookup",
        "mcp:docs.resource:docs://guide",
        "mcp:docs.prompt:review",
        "mcp:docs.list:prompts",
    ]


def test_crash_points_can_name_any_mcp_operation() -> None:
    """`--crash` takes the step names of resource, prompt and listing calls, URI included."""
    assert parse_crash_spec("during:mcp:docs.resource:docs://guide#2") == CrashSpec(
        "during", "mcp:docs.resource:docs://guide", 2
    )
    assert parse_crash_spec("after:mcp:docs.prompt:review").step == "mcp:docs.prompt:review"
    assert parse_crash_spec("after:mcp:docs.list:tools").step == "mcp:docs.list:tools"
