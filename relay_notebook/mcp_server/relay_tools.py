"""The tools on relays: list them, save a draft from source, check it (and replay-check it
against recorded runs), draw its flow graph, and crash it at every point (``test
--crash-each``). A relay is named, never a file path: the server reads no file it is sent."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import Field

from relay_notebook import commands
from relay_notebook.commands import crash_each, inputs
from relay_notebook.commands.api_requests import checked_source
from relay_notebook.mcp_server.app import RelayMCPServer, Supervision
from relay_notebook.mcp_server.outputs import (
    CheckResult,
    CrashEachResult,
    DraftResult,
    GraphResult,
    RelaysResult,
)

__all__ = ["OVERWRITES", "READ_ONLY", "STARTS", "RelayName", "RunId", "register_relay_tools"]

#: the annotations of a tool that changes nothing (it may start a sandboxed replay)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
#: a tool that replaces what was there (the same call again changes nothing more)
OVERWRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
#: a tool that adds runs or attempts: nothing is lost, and a second call does more
STARTS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)

RelayName = Annotated[
    str, Field(min_length=1, max_length=64, description="a relay's name, e.g. invoice")
]
RunId = Annotated[str, Field(min_length=1, max_length=100, description="a run id, e.g. invoice-3")]


def register_relay_tools(server: RelayMCPServer, served: Supervision) -> None:
    """Add the relay tools to ``server``; they act on ``served.workspace``."""
    ws = served.workspace

    @server.command_tool(READ_ONLY)
    def list_relays() -> RelaysResult:
        """The workspace's relays: releases, runs, access; a draft failing admission is
        broken, with its first problem (relay relays --json)."""
        return RelaysResult(relays=served.clean([r.to_dict() for r in commands.relays(ws)]))

    @server.command_tool(OVERWRITES)
    def save_draft(
        relay: RelayName,
        source: Annotated[
            str,
            Field(description="the whole relay.py: a DBOS workflow `run(INPUT)`, at most 1 MiB"),
        ],
    ) -> DraftResult:
        """Save SOURCE as relay RELAY's draft (replacing the draft's relay.py), then check it
        as relay check does; a draft that fails admission is saved but cannot run."""
        draft = ws.save_draft(relay, checked_source(relay, source))
        report = commands.check_draft(draft).to_dict()
        return DraftResult.model_validate(
            served.clean({"relay": relay, "saved": True, "check": report})
        )

    @server.command_tool(READ_ONLY)
    def check(
        relay: RelayName,
        replay: Annotated[
            bool,
            Field(description="also replay the code against recorded runs in a sandbox copy"),
        ] = False,
        runs: Annotated[
            list[str] | None,
            Field(description="with replay: these run ids (default: the relay's recent runs)"),
        ] = None,
        release: Annotated[
            str | None,
            Field(description="with replay: a release (vN, hash, latest), not the draft"),
        ] = None,
    ) -> CheckResult:
        """Admission and the determinism lint of the draft (relay check NAME); with replay,
        whether each recorded run would replay on the code (relay check NAME --replay)."""
        if not replay:
            return CheckResult.model_validate(
                served.clean(commands.check_draft(ws.load_draft(relay)).to_dict())
            )
        ws.load_draft(relay)
        reports = commands.replay(ws, relay, runs or None, release=release)
        ok = not any(r.blocks_recovery for r in reports)  # as `relay check --replay` exits
        return CheckResult.model_validate(
            served.clean(
                {
                    "relay": relay,
                    "code": release or "draft",
                    "ok": ok,
                    "compatible": ok,
                    "runs": [r.to_dict() for r in reports],
                }
            )
        )

    @server.command_tool(READ_ONLY)
    def graph(relay: RelayName) -> GraphResult:
        """The relay's flow graph from its draft's code: steps, agent and MCP calls, branches
        and loops, laid out (relay graph NAME --json, relay-graph/v1)."""
        flow = commands.graph_of_draft(ws.load_draft(relay)).to_dict()
        return GraphResult.model_validate(served.clean(flow))

    @server.command_tool(STARTS)
    def test_crash_each(
        relay: RelayName,
        input: Annotated[Any, Field(description="the run input (JSON; default {})")] = None,
    ) -> CrashEachResult:
        """Run the relay cleanly, then crash it after and during every call and recover each
        run, comparing results (relay test NAME --crash-each); slow: one run per point."""
        ws.load_draft(relay)
        run_input = {} if input is None else inputs.checked_value(input, "Field 'input'")
        report = crash_each.crash_each(ws, relay, run_input)
        plain = json.loads(json.dumps(report.to_dict(), default=repr))
        return CrashEachResult.model_validate(served.clean(plain))
