"""A relay under test: a throwaway workspace, runs in real subprocesses, crashes and recoveries,
and the ledger to assert on. Used by the ``relay_notebook.testing`` pytest plugin.

Design note: nothing is simulated. ``run`` starts the relay exactly as ``relay run`` does (a
supervised child process on DBOS with the run's own SQLite file), ``crash`` kills it at a named
point the way ``--crash`` does, and ``recover`` is ``relay recover``. Agent relays get the
scripted provider (``script=``: replies per agent name) and MCP servers over stdio
(``mcp_server``), so a test needs no network and no model.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from relay_notebook import commands
from relay_notebook.commands.crash_each import CrashEachReport, crash_each
from relay_notebook.commands.runs import RunLog, RunOutcome
from relay_notebook.workspace import Manifest, Workspace

__all__ = ["RelayHarness"]

SCRIPT_FILE = "fixtures.json"
TIMEOUT_S = 120.0


class RelayHarness:
    """Save relays into ``workspace``, run them, crash and recover them, read their ledger."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def save(
        self,
        name: str,
        source: str | Path,
        *,
        script: dict[str, list[dict[str, Any]]] | None = None,
        variables: dict[str, str] | None = None,
    ) -> None:
        """Save relay ``name`` from source text or a ``.py`` file; ``script`` gives its agents
        scripted replies (``{"clerk": [{"content": "done"}]}``), so no model is called."""
        text = Path(source).read_text(encoding="utf-8") if isinstance(source, Path) else source
        manifest = Manifest(
            model=f"scripted:{SCRIPT_FILE}" if script is not None else None,
            variables=variables or {},
        )
        self.workspace.save_draft(name, text, manifest)
        if script is not None:
            (self.workspace.relay_dir(name) / SCRIPT_FILE).write_text(json.dumps(script))

    def mcp_server(self, name: str, script: str | Path, *args: str, **env: str) -> None:
        """Declare an MCP server the relays reach as ``mcp(NAME, tool, ...)``: a Python script
        speaking MCP over stdio, copied into the workspace."""
        home = self.workspace.home
        home.mkdir(parents=True, exist_ok=True)
        target = home / Path(script).name
        shutil.copy(script, target)
        path = home / "mcp_servers.yaml"
        current = path.read_text(encoding="utf-8") if path.exists() else "servers:\n"
        env_text = ", ".join(f"{k}: {json.dumps(v)}" for k, v in env.items())
        arg_text = ", ".join(json.dumps(a) for a in (target.name, *args))
        current += f"  {name}:\n    command: {json.dumps(sys.executable)}\n    args: [{arg_text}]\n"
        if env:
            current += f"    env: {{{env_text}}}\n"
        path.write_text(current, encoding="utf-8")

    def run(self, name: str, input: Any = None, *, crash: str | None = None) -> RunOutcome:
        """Run ``name`` to the end of its attempt; ``crash`` (``after:STEP#N``,
        ``during:STEP``) kills the child there, leaving the run ``interrupted``."""
        outcome: RunOutcome = commands.run(self.workspace, name, run_input=input, crash=crash).wait(
            TIMEOUT_S
        )
        return outcome

    def recover(self, run_id: str) -> RunOutcome:
        """The next attempt of ``run_id``: completed steps come back from their checkpoints."""
        outcome: RunOutcome = commands.recover(self.workspace, run_id).wait(TIMEOUT_S)
        return outcome

    def logs(self, run_id: str) -> RunLog:
        """The run's record: attempts, steps with ``executed_in`` / ``reused_in``, receipts."""
        return commands.logs(self.workspace, run_id)

    def executions(self, run_id: str) -> Counter[str]:
        """How many times each call's body ran over all attempts (``{"charge#1": 2}``)."""
        return Counter({s.label: len(s.executed_in) for s in self.logs(run_id).steps})

    def crash_each(self, name: str, input: Any = None) -> CrashEachReport:
        """``relay test NAME --crash-each``: a clean run, then one crashed run per crash point,
        each recovered and compared (``report.ok``, ``report.differing``, ``report.repeated``)."""
        return crash_each(self.workspace, name, input)
