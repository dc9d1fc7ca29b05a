"""The ``%relay`` subcommands that act on relays and the workspace: check, graph, test and
replay (is this code right?), publish, releases and verify (releases), relays and delete,
grant and revoke (access), vault, doctor and mcp (the agents' client configuration). A mixin
of ``RelayMagics``: each method parses nothing, calls the command layer and returns what the
cell shows.
"""

from __future__ import annotations

from typing import Any

from relay_notebook import commands
from relay_notebook.commands import inputs
from relay_notebook.magics.run_commands import MagicCommands
from relay_notebook.views import wording as surfaces
from relay_notebook.views.mime import CheckView, GraphView

__all__ = ["RelayCommands"]


class RelayCommands(MagicCommands):
    """check / graph / test / replay, publish / releases / verify, relays / delete,
    grant / revoke, vault, doctor, mcp (see the module's docstring)."""

    confine: bool
    warm_start: bool

    def _do_relays(self, args: Any) -> Any:
        found = [r.to_dict() for r in commands.relays(self.workspace)]
        if args.json:
            return found
        import pandas as pd

        columns = ["name", "releases", "latest", "runs", "access", "broken", "problem"]
        return pd.DataFrame(found, columns=columns)

    def _do_delete(self, args: Any) -> Any:
        deleted = commands.delete(self.workspace, args.target, force=args.force)
        if args.json:
            return deleted.to_dict()
        print(surfaces.deleted_line(deleted))
        return None

    def _do_graph(self, args: Any) -> Any:
        graph = commands.graph(self.workspace, args.target)
        return graph.to_dict() if args.json else GraphView(graph)

    def _do_check(self, args: Any) -> Any:
        if args.replay is not None:
            return self._do_replay(args)
        report = commands.check(self.workspace, args.target)
        if not report.diagnostics:
            print(f"{report.relay}: admitted (0 errors, 0 warnings)")
            return None
        return CheckView(report.relay, report.diagnostics, line_offset=0)

    def _do_test(self, args: Any) -> Any:
        from relay_notebook.commands import crash_each

        run_input = inputs.run_input(text=args.input, file=args.input_file, variables=self._user_ns)
        report = crash_each.crash_each(self.workspace, args.name, run_input)
        if args.output:
            self._user_ns[args.output] = report
        if args.json:
            return report.to_dict()
        lines = crash_each.report_lines(report)
        print("\n".join(lines[:1] + lines[len(report.points) + 2 :]))
        return crash_each.report_frame(report)

    def _do_replay(self, args: Any) -> Any:
        import pandas as pd

        reports = commands.replay(
            self.workspace, args.target, args.replay or None, release=args.release
        )
        code = f"release {args.release}" if args.release else "the draft"
        # what a person reads is printed whole (a table would cut the message and the
        # DBOS.patch_async hint); the table keeps the short facts, one row per run
        for r in reports:
            if not r.compatible or r.hint:
                print(f"{r.run_id} ({r.run_status}): {r.message}")
            if r.hint:
                print(f"  hint: {r.hint}")
        print(commands.replay_summary(args.target, reports, code))
        return pd.DataFrame(
            [
                {
                    "run_id": r.run_id,
                    "run_status": r.run_status,
                    "verdict": r.verdict,
                    "replay_ends_at": r.where,
                    "recovery": "would fail" if r.blocks_recovery else "-",
                }
                for r in reports
            ]
        )

    def _do_publish(self, args: Any) -> None:
        print(surfaces.published_line(commands.publish(self.workspace, args.target), "notebook"))

    def _do_releases(self, args: Any) -> None:
        found = commands.releases(self.workspace, args.name)
        print("\n".join(surfaces.releases_lines(args.name, found, "notebook")))

    def _do_verify(self, args: Any) -> None:
        reports = commands.verify(self.workspace, args.name, args.release)
        print("\n".join(surfaces.verify_lines(reports, "notebook")))

    def _do_doctor(self, args: Any) -> Any:
        from relay_notebook.commands.settings import start_report

        report = start_report(confine=self.confine, warm_start=self.warm_start)
        if args.json:
            return report.to_dict()
        print("\n".join(report.lines()))
        return None

    def _do_mcp(self, args: Any) -> None:
        """``%relay mcp``: the ``mcpServers`` JSON with which a coding agent (Claude Code,
        Jupyter AI, an IDE assistant) starts ``relay mcp`` on this notebook's workspace.

        Example::

            %relay mcp
        """
        import json

        from relay_notebook.commands.mcp_config import client_config

        print(json.dumps(client_config(self.workspace.home), indent=2))

    def _do_grant(self, args: Any) -> None:
        commands.grant(self.workspace, args.name)
        print(surfaces.access_line(args.name, True, "notebook"))

    def _do_revoke(self, args: Any) -> None:
        commands.revoke(self.workspace, args.name)
        print(surfaces.access_line(args.name, False, "notebook"))

    def _do_vault(self, args: Any) -> None:
        if args.vault_command == "list":
            for name in commands.vault_names(self.workspace):
                print(name)
            return
        import getpass

        value = getpass.getpass(f"value for {args.name} (not echoed, not saved in the notebook): ")
        commands.vault_set(self.workspace, args.name, value)
        print(f"{args.name}: stored in the vault of {self.workspace.home}")
