"""``%%relay NAME`` saves a cell as a relay; ``%relay COMMAND`` mirrors the ``relay`` CLI.

Runs never block the kernel: ``%relay run`` returns at once with a live view that the run's
supervisor thread updates; ``--wait`` blocks until the attempt ends.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from relay_notebook import commands
from relay_notebook.cli import CommandLineError, build_parser
from relay_notebook.errors import AdmissionError, InvalidInputError, RelayError
from relay_notebook.magics.runs import RunView, register_view_channel
from relay_notebook.runner.backend import ENV_VAR, resolve_backend
from relay_notebook.runner.run_input import MAX_INPUT_BYTES, parse_json_text, read_input_file
from relay_notebook.views.mime import CheckView, GraphView, RunsView
from relay_notebook.workspace import Workspace

__all__ = ["RelayMagics"]

_VARIABLE = re.compile(r"\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def _usage(exc: Exception) -> UsageError:
    return UsageError(" ".join(str(exc).split()))


@magics_class
class RelayMagics(Magics):
    """The relay magics. Examples::

    %%relay invoice
    from dbos import DBOS
    ...

    %relay run invoice --input '{"text": "..."}'
    %relay run invoice --crash after:extract_invoice
    %relay recover invoice-1
    %relay logs invoice-1
    """

    def __init__(self, shell: Any, home: str | None = None) -> None:
        super().__init__(shell)
        self.workspace = Workspace(home)
        self.views: list[RunView] = []
        # the buttons of run views reach the kernel through a comm (the workspace as it is then)
        register_view_channel(shell, lambda: self.workspace)

    # -- %%relay ------------------------------------------------------------------------------

    @cell_magic
    def relay(self, line: str, cell: str) -> Any:
        """Save the cell as relay NAME's draft (not executed), check it, and draw its flow graph.

        Usage: ``%%relay NAME [--publish] [--no-graph]``. Admission errors are reported with
        the cell's line numbers; determinism warnings are shown but do not block.

        Example::

            %%relay hello
            from dbos import DBOS

            @DBOS.workflow()
            async def run(INPUT):
                return {"hello": INPUT.get("name", "world")}
        """
        words = shlex.split(line)
        if not words or words[0].startswith("-"):
            raise UsageError("%%relay needs a relay name: %%relay NAME [--publish] [--no-graph]")
        name, flags = words[0], set(words[1:])
        unknown = flags - {"--publish", "--no-graph"}
        if unknown:
            raise UsageError(
                f"%%relay: unknown option {sorted(unknown)[0]}; use --publish and/or --no-graph"
            )
        try:
            draft = self.workspace.save_draft(name, cell)
            report = commands.check_draft(draft)
        except RelayError as exc:
            raise _usage(exc) from None
        # the cell's first line is the magic line: relay.py line N is cell line N + 1
        view = CheckView(name, report.diagnostics, line_offset=1)
        if not report.ok:
            lines = "\n".join(view.lines())
            raise UsageError(
                f"relay {name!r} was saved but failed admission:\n{lines}\n"
                f"Fix the cell and run it again."
            )
        if report.warnings:
            display(view)
        if "--publish" in flags:
            result = commands.publish(self.workspace, name)
            state = "published" if result.created else "already published as"
            print(f"{name}: {state} {result.release.ref} ({result.release.short_hash})")
        if "--no-graph" not in flags:
            return GraphView(commands.graph_of_draft(draft))
        return None

    # -- %relay ---------------------------------------------------------------------------------

    @line_magic("relay")  # type: ignore[arg-type]
    def relay_line(self, line: str) -> Any:
        """Run a relay command: the same commands as the ``relay`` CLI, shown in the notebook.

        ``%relay run NAME [--input JSON|VAR] [--crash after:STEP] [--wait] [-o VAR]``,
        ``%relay recover RUN``, ``%relay runs [NAME]``, ``%relay logs RUN``, ``%relay graph
        NAME``, ``%relay publish NAME``, ``%relay releases NAME``, ``%relay verify NAME``,
        ``%relay grant NAME``, ``%relay revoke NAME``, ``%relay reconcile RUN --result JSON |
        --retry``, ``%relay vault set NAME``, ``%relay lab``. ``%relay -h`` lists them.

        Example::

            %relay run invoice --input order --crash after:extract_invoice
        """
        parser = build_parser("%relay", notebook=True)
        try:
            args = parser.parse_args(shlex.split(line))
        except CommandLineError as exc:
            raise _usage(exc) from None
        except SystemExit:
            return None  # -h printed the help
        if args.home:
            self.workspace = Workspace(args.home)
        if args.database_url is not None:
            try:
                resolve_backend(args.database_url)
            except RelayError as exc:
                raise _usage(exc) from None
            # like --home, it holds for the rest of the session (and for the view's buttons)
            os.environ[ENV_VAR] = args.database_url
        handler = getattr(self, f"_do_{args.command}", None)
        if handler is None:
            raise UsageError(f"%relay {args.command} is not available in the notebook yet")
        try:
            return handler(args)
        except AdmissionError as exc:
            raise UsageError(
                f"relay {exc.relay!r} failed admission:\n"
                + "\n".join(d.format() for d in exc.diagnostics if d.severity == "error")
            ) from None
        except RelayError as exc:
            raise _usage(exc) from None

    # -- subcommands --------------------------------------------------------------------------

    def _input(self, text: str | None) -> Any:
        """``--input``: JSON, a notebook variable (``order`` or ``{order}``) or a Python literal."""
        if text is None:
            return {}
        m = _VARIABLE.fullmatch(text.strip())
        user_ns = self.shell.user_ns if self.shell is not None else {}
        if m and m.group(1) in user_ns:
            return user_ns[m.group(1)]
        try:
            return parse_json_text(text, "--input")
        except InvalidInputError:
            if len(text) > MAX_INPUT_BYTES:
                raise
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise UsageError(
                f"--input {text!r} is neither JSON nor the name of a notebook variable; pass "
                f'e.g. --input \'{{"text": "hi"}}\' or --input order'
            ) from None

    def _do_run(self, args: Any) -> Any:
        if args.input_file is not None:
            run_input = read_input_file(args.input_file)
        else:
            run_input = self._input(args.input)
        if args.queue:
            return self._queue(args, run_input)
        view = RunView.start(
            self.workspace,
            args.target,
            run_input=run_input,
            release=args.release,
            crash=args.crash,
            shell=self.shell,
            output=args.output,
        )
        return self._show(view, args)

    def _queue(self, args: Any, run_input: Any) -> Any:
        """``--queue``: the worker pool runs it; ``--wait`` blocks for its outcome."""
        queued = commands.enqueue(
            self.workspace, args.target, run_input=run_input, release=args.release, crash=args.crash
        )
        if not args.wait:
            print(f"run {queued.run_id}: queued for the workers (%relay logs {queued.run_id})")
            return queued
        outcome = queued.wait()
        print(f"run {outcome.run_id}: {outcome.status} (attempt {outcome.attempt})")
        if outcome.status != "succeeded":
            raise UsageError((outcome.error or {}).get("message", outcome.status))
        if args.output and self.shell is not None:
            self.shell.user_ns[args.output] = outcome.result
        return outcome.result

    def _do_workers(self, args: Any) -> Any:
        found = [w.to_dict() for w in commands.workers()]
        if args.json:
            return found
        import pandas as pd

        return pd.DataFrame(found)

    def _do_recover(self, args: Any) -> Any:
        view = RunView.recover(self.workspace, args.run_id, shell=self.shell, output=args.output)
        return self._show(view, args)

    def _show(self, view: RunView, args: Any) -> Any:
        self.views.append(view)
        if not args.wait:
            view.show()  # live: updated in place while the kernel stays free
            return None
        # --wait shows the final state once (a saved notebook then holds exactly that)
        outcome = view.wait()
        view.show()
        return outcome.result if outcome.status == "succeeded" else None

    def _do_runs(self, args: Any) -> RunsView:
        return RunsView([r.to_dict() for r in commands.runs(self.workspace, args.name)])

    def _do_logs(self, args: Any) -> Any:
        log = commands.logs(self.workspace, args.run_id)
        if args.json:
            return log.to_dict()
        from relay_notebook.views.records import RunLogView

        return RunLogView(log)

    def _do_graph(self, args: Any) -> Any:
        graph = commands.graph(self.workspace, args.target)
        return graph.to_dict() if args.json else GraphView(graph)

    def _do_check(self, args: Any) -> Any:
        report = commands.check(self.workspace, args.target)
        if not report.diagnostics:
            print(f"{report.relay}: admitted (0 errors, 0 warnings)")
            return None
        return CheckView(report.relay, report.diagnostics, line_offset=0)

    def _do_publish(self, args: Any) -> None:
        result = commands.publish(self.workspace, args.target)
        state = "published" if result.created else "unchanged; already published as"
        print(f"{result.release.relay}: {state} {result.release.ref} ({result.release.short_hash})")

    def _do_releases(self, args: Any) -> None:
        found = commands.releases(self.workspace, args.name)
        if not found:
            print(f"{args.name}: no releases yet (publish with: %relay publish {args.name})")
        for r in found:
            print(f"{r.relay} {r.ref:<5} {r.short_hash}  {len(r.files)} files")

    def _do_verify(self, args: Any) -> None:
        for r in commands.verify(self.workspace, args.name, args.release):
            state = "ok" if r.ok else "TAMPERED: " + "; ".join(r.problems)
            print(f"{r.release.relay} {r.release.ref} ({r.release.short_hash}): {state}")

    def _do_grant(self, args: Any) -> None:
        commands.grant(self.workspace, args.name)
        print(f"{args.name}: access granted")

    def _do_revoke(self, args: Any) -> None:
        commands.revoke(self.workspace, args.name)
        print(f"{args.name}: access revoked (restore with: %relay grant {args.name})")

    def _do_reconcile(self, args: Any) -> None:
        if args.result is None and not args.retry:
            pending = commands.pending_calls(self.workspace, args.run_id)
            if not pending:
                print(f"run {args.run_id}: no uncertain calls")
            for p in pending:
                print(f"{p.key}  {p.describe()} (attempt {p.attempt})")
            return
        result = self._input(args.result) if args.result is not None else None
        state = commands.reconcile(
            self.workspace, args.run_id, result=result, retry=args.retry, key=args.key
        )
        how = "will be retried" if state.state == "retry" else "resolved with the given result"
        print(f"{state.key}: {how}. Continue with: %relay recover {args.run_id}")

    def _do_vault(self, args: Any) -> None:
        if args.vault_command == "list":
            for name in commands.vault_names(self.workspace):
                print(name)
            return
        import getpass

        value = getpass.getpass(f"value for {args.name} (not echoed, not saved in the notebook): ")
        commands.vault_set(self.workspace, args.name, value)
        print(f"{args.name}: stored in the vault of {self.workspace.home}")

    def _do_lab(self, args: Any) -> None:
        from relay_notebook.magics.lab import RecoveryLab

        RecoveryLab(self.workspace).show()
