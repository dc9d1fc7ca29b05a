"""MCP beyond stdio in real runs: a streamable-HTTP server on loopback (bearer token from the
vault) and a stdio server given a vault secret in its environment, the token in no stored byte."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentworks.redact import secret_forms
from relay_notebook import commands
from relay_notebook.history import read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.runner import RunOutcome
from relay_notebook.workspace import Manifest, Workspace

SERVERS = Path(__file__).parents[1] / "servers"
TOKEN = "docs-tok-9f3a1c77e2b54d08"
ENV_TOKEN = "probe-tok-5b2e8d14c9a7f360"

RELAY = """\
from dbos import DBOS
from agentworks import mcp


@DBOS.workflow()
async def run(INPUT):
    hit = await mcp(server="docs", tool="lookup", arguments={"term": INPUT})
    guide = await mcp(server="docs", resource="docs://guide")
    prompt = await mcp(server="docs", prompt="review", arguments={"text": "a relay"})
    listed = await mcp(server="docs", listing="resources")
    return {"hit": hit, "guide": guide, "prompt": prompt,
            "resources": [r["uri"] for r in listed]}
"""


@dataclass(frozen=True)
class DocsServer:
    """The HTTP MCP server the test started: its URL and the file counting its tool calls."""

    url: str
    calls: Path

    def tool_calls(self) -> int:
        return int(self.calls.read_text()) if self.calls.exists() else 0


@pytest.fixture
def docs_server(tmp_path: Path) -> Iterator[DocsServer]:
    """tests/servers/mcp_docs_http.py on 127.0.0.1, requiring ``Bearer TOKEN``."""
    calls = tmp_path / "server-state" / "calls"
    calls.parent.mkdir()
    env = {**os.environ, "DOCS_TOKEN": TOKEN, "DOCS_CALLS": str(calls)}
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "mcp_docs_http.py")], stdout=subprocess.PIPE, env=env
    )
    try:
        assert process.stdout is not None
        port = json.loads(process.stdout.readline())["port"]
        yield DocsServer(f"http://127.0.0.1:{port}/mcp", calls)
    finally:
        process.terminate()
        process.wait(30)


def declare(ws: Workspace, text: str) -> None:
    ws.home.mkdir(parents=True, exist_ok=True)
    (ws.home / "mcp_servers.yaml").write_text(textwrap.dedent(text), encoding="utf-8")


def with_docs(ws: Workspace, server: DocsServer) -> None:
    declare(
        ws,
        f"""\
        servers:
          docs:
            url: {server.url}
            headers: {{Authorization: "Bearer ${{vault:DOCS_TOKEN}}"}}
        """,
    )
    commands.vault_set(ws, "DOCS_TOKEN", TOKEN)
    ws.save_draft("reader", RELAY)


def stored_files(ws: Workspace) -> Iterator[Path]:
    """Every file the kit keeps under the workspace but the vault (where secrets belong)."""
    for path in ws.home.rglob("*"):
        if path.is_file() and not path.is_symlink() and ".relay_vault" not in path.parts:
            yield path


def holding(ws: Workspace, value: str) -> list[str]:
    """The stored files holding ``value`` in any form the leak check knows (as it is, escaped,
    hex, base64, URL-encoded, reversed)."""
    forms = {form.encode() for form in secret_forms(value, encoded=True).values()}
    return [
        str(path.relative_to(ws.home))
        for path in stored_files(ws)
        if any(form in path.read_bytes() for form in forms)
    ]


def test_a_relay_uses_tools_resources_and_prompts_of_an_http_server(
    confined: tuple[str, Workspace], docs_server: DocsServer
) -> None:
    """A sandboxed relay (forked or spawned) calls a tool, reads a resource, gets a prompt and
    lists resources of a streamable-HTTP server on loopback whose bearer token comes from the
    vault; each is a step of the run with a receipt."""
    _, workspace = confined
    with_docs(workspace, docs_server)
    out: RunOutcome = commands.run(workspace, "reader", run_input="durable").wait(120)
    assert out.status == "succeeded", out.error
    assert out.result == {
        "hit": {"term": "durable", "found": True, "calls": 1},
        "guide": "# Guide\nRelays are durable programs.",
        "prompt": {
            "description": "Ask for a review of one text",
            "messages": [{"role": "user", "content": "Review this in a kind tone: a relay"}],
        },
        "resources": ["docs://guide"],
    }
    steps = [s.name for s in read_run_log(workspace, out.run_id).steps]
    assert steps == [
        "mcp:docs.lookup",
        "mcp:docs.resource:docs://guide",
        "mcp:docs.prompt:review",
        "mcp:docs.list:resources",
    ]
    receipts = read_run_log(workspace, out.run_id).receipts
    assert [(r.kind, r.name, r.state, r.replay_safe) for r in receipts] == [
        ("mcp", "docs.lookup", "done", False),
        ("mcp", "docs.resource:docs://guide", "done", True),
        ("mcp", "docs.prompt:review", "done", True),
        ("mcp", "docs.list:resources", "done", True),
    ]
    assert holding(workspace, TOKEN) == []


def test_recovery_reuses_the_completed_http_tool_call(
    workspace: Workspace, docs_server: DocsServer
) -> None:
    """Crashed right after the HTTP tool call, the run recovers without calling the tool again
    and answers as an uninterrupted run would."""
    with_docs(workspace, docs_server)
    first = commands.run(
        workspace, "reader", run_input="relay", crash="after:mcp:docs.lookup"
    ).wait(120)
    assert first.status == "interrupted" and docs_server.tool_calls() == 1
    out = commands.recover(workspace, first.run_id).wait(120)
    assert out.status == "succeeded", out.error
    assert docs_server.tool_calls() == 1
    assert out.result["hit"] == {"term": "relay", "found": True, "calls": 1}
    events = read_events(find_run(workspace, out.run_id).events)
    reused = [e["step"] for e in events if e["kind"] == "step_reused" and e["attempt"] == 2]
    assert reused == ["mcp:docs.lookup"]
    assert holding(workspace, TOKEN) == []


def test_a_read_interrupted_mid_call_is_simply_made_again(
    workspace: Workspace, docs_server: DocsServer
) -> None:
    """Killed during a resource read (no result saved), the run recovers by reading it again:
    reads are replay-safe, so no reconciliation is asked for; the tool call before is reused."""
    with_docs(workspace, docs_server)
    first = commands.run(
        workspace, "reader", run_input="relay", crash="during:mcp:docs.resource:docs://guide"
    ).wait(120)
    assert first.status == "interrupted"
    out = commands.recover(workspace, first.run_id).wait(120)
    assert out.status == "succeeded", out.error
    assert out.result["guide"].startswith("# Guide") and docs_server.tool_calls() == 1
    receipts = read_run_log(workspace, out.run_id).receipts
    guide = [r for r in receipts if r.name == "docs.resource:docs://guide"]
    assert [(r.state, r.attempt) for r in guide] == [("done", 2)]


def test_a_wrong_vault_token_is_refused_by_the_server_and_never_shown(
    workspace: Workspace, docs_server: DocsServer
) -> None:
    """With a wrong token in the vault the server refuses the session; the run fails naming
    the server and what to check, without the token anywhere."""
    with_docs(workspace, docs_server)
    wrong = "not-the-docs-token-1234"
    commands.vault_set(workspace, "DOCS_TOKEN", wrong)
    out = commands.run(workspace, "reader", run_input="x").wait(120)
    assert out.status == "failed"
    message = json.dumps(out.error)
    assert "MCP server 'docs' at http://127.0.0.1:" in message
    assert "it answered HTTP 401, refusing the credentials sent" in message
    assert wrong not in message and holding(workspace, wrong) == []
    assert docs_server.tool_calls() == 0


def test_a_stdio_server_gets_its_token_from_the_vault_and_nothing_keeps_it(
    workspace: Workspace,
) -> None:
    """``env: {TOKEN: vault:PROBE_TOKEN}`` hands the vault value to the server process, and no
    file under the workspace (run folders, DBOS database, logs, ledger, receipts) holds it."""
    workspace.home.mkdir(parents=True)
    shutil.copy(SERVERS / "mcp_env_probe.py", workspace.home / "mcp_env_probe.py")
    declare(
        workspace,
        """\
        servers:
          probe:
            command: python
            args: [mcp_env_probe.py]
            env: {TOKEN: vault:PROBE_TOKEN}
        """,
    )
    commands.vault_set(workspace, "PROBE_TOKEN", ENV_TOKEN)
    workspace.save_draft(
        "prober",
        textwrap.dedent(
            """\
            from dbos import DBOS
            from agentworks import mcp


            @DBOS.workflow()
            async def run(INPUT):
                return await mcp(server="probe", tool="token_check")
            """
        ),
    )
    out = commands.run(workspace, "prober").wait(120)
    assert out.status == "succeeded", out.error
    assert out.result == {"present": True, "sha256": hashlib.sha256(ENV_TOKEN.encode()).hexdigest()}
    assert (workspace.home / "mcp_servers.yaml").read_text().count("vault:PROBE_TOKEN") == 1
    assert len(list(stored_files(workspace))) > 10  # run folder, database, ledger, logs
    vault = workspace.home / ".relay_vault" / "secrets.json"
    assert ENV_TOKEN.encode() in vault.read_bytes()  # where it belongs: the scan would see it
    assert holding(workspace, ENV_TOKEN) == []


def test_a_secret_missing_from_the_vault_fails_the_run_with_how_to_set_it(
    workspace: Workspace,
) -> None:
    """A server naming a vault secret that is not set fails the run with `relay vault set`."""
    workspace.home.mkdir(parents=True)
    shutil.copy(SERVERS / "mcp_env_probe.py", workspace.home / "mcp_env_probe.py")
    declare(
        workspace,
        """\
        servers:
          probe: {command: python, args: [mcp_env_probe.py], env: {TOKEN: vault:NOT_SET_YET}}
        """,
    )
    workspace.save_draft(
        "prober",
        "from dbos import DBOS\nfrom agentworks import mcp\n\n\n@DBOS.workflow()\n"
        'async def run(INPUT):\n    return await mcp(server="probe", tool="token_check")\n',
    )
    out = commands.run(workspace, "prober").wait(120)
    assert out.status == "failed"
    message = json.dumps(out.error)
    assert "vault secret 'NOT_SET_YET'" in message and "relay vault set NOT_SET_YET" in message


def test_an_http_server_that_is_not_listening_fails_the_run_with_what_to_check(
    workspace: Workspace, docs_server: DocsServer
) -> None:
    """A url: server nobody listens at fails the run naming the server, its URL and the
    settings to check (the HTTP client's error, which holds the headers, is not kept)."""
    with_docs(workspace, docs_server)
    text = (workspace.home / "mcp_servers.yaml").read_text()
    port = docs_server.url.split(":")[2].split("/")[0]
    with socket.socket() as probe:  # a loopback port nothing listens at
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    (workspace.home / "mcp_servers.yaml").write_text(text.replace(port, str(free)))
    out = commands.run(workspace, "reader", run_input="x").wait(120)
    assert out.status == "failed"
    message = json.dumps(out.error)
    assert f"MCP server 'docs' at http://127.0.0.1:{free}/mcp did not open a session" in message
    assert "secret-leak" not in message and holding(workspace, TOKEN) == []


def test_an_agent_uses_an_attached_tool_of_the_http_server(
    workspace: Workspace, docs_server: DocsServer
) -> None:
    """`agent(mcp=[{"server": "docs"}])` exposes the HTTP server's tools to the model; the
    scripted model's call reaches the server and its result is in the agent's receipt."""
    with_docs(workspace, docs_server)
    script = {
        "librarian": [
            {"tool_calls": [{"name": "docs__lookup", "arguments": {"term": "durable"}}]},
            {"content": {"answer": "yes"}},
        ]
    }
    workspace.save_draft(
        "asker",
        textwrap.dedent(
            """\
            from dbos import DBOS
            from agentworks import agent


            @DBOS.workflow()
            async def run(INPUT):
                return await agent(name="librarian", user_message="is it durable?",
                                   mcp=[{"server": "docs"}], output_schema={"type": "object"})
            """
        ),
        Manifest(model="scripted:fixtures.json"),
    )
    (workspace.relay_dir("asker") / "fixtures.json").write_text(json.dumps(script))
    out = commands.run(workspace, "asker").wait(120)
    assert out.status == "succeeded", out.error
    assert out.result == {"answer": "yes"} and docs_server.tool_calls() == 1
    [receipt] = find_run(workspace, out.run_id).path.glob("execution/call-*/receipt.json")
    calls = json.loads(receipt.read_text())["tool_calls"]
    assert [(c["tool"], c["result"]["found"]) for c in calls] == [("docs__lookup", True)]
    assert holding(workspace, TOKEN) == []
