"""``%%relay NAME`` saves a cell as a relay; ``%relay COMMAND`` mirrors the ``relay`` CLI.

Runs never block the kernel: ``%relay run`` returns at once with a live view that the run's
supervisor thread updates; ``--wait`` blocks until the attempt ends.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display
from traitlets import Undefined, Unicode, default, observe

from relay_notebook import commands
from relay_notebook.cli.parser import RECORD_COMMANDS, CommandLineError, build_parser
from relay_notebook.commands import inputs
from relay_notebook.commands.settings import Settings
from relay_notebook.commands.settings_traits import RunSettingsTraits
from relay_notebook.commands.waiting import Waker
from relay_notebook.errors import AdmissionError, RelayError, codes
from relay_notebook.errors.storage import storage_error
from relay_notebook.magics.relay_commands import RelayCommands
from relay_notebook.magics.run_commands import RunCommands, usage_error
from relay_notebook.magics.runs import WATCHER, RunView, register_view_channel
from relay_notebook.views import wording as surfaces
from relay_notebook.views.mime import CheckView, GraphView, RunsView
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.manifest import MANIFEST_FILE, Manifest, load_manifest

__all__ = ["RelayMagics"]

_CELL_OPTIONS = ("--publish", "--no-graph")


def _network_option(flags: set[str]) -> str | dict[str, list[str]] | None:
    """``--network=none`` or ``--allow=HOST:PORT`` (repeated) as the manifest's ``network``;
    ``None`` when the line names neither (the manifest keeps what it has)."""
    allow = sorted(f.split("=", 1)[1] for f in flags if f.startswith("--allow="))
    said = [f.split("=", 1)[1] for f in flags if f.startswith("--network=")]
    if said and said != ["none"]:
        raise usage_error(f"%%relay: --network={said[0]}: expected --network=none")
    if said and allow:
        raise usage_error("%%relay: --network=none and --allow= contradict each other")
    if said:
        return "none"
    return {"allow": allow} if allow else None


def _said(exc: Exception, home: Path) -> UsageError:
    """``exc`` worded for the notebook: a relay error, or a storage failure said as such (a full
    disk, a read-only workspace); anything else is a bug, raised as it is."""
    if isinstance(exc, RelayError):
        return usage_error(exc)
    stored = storage_error(exc, home)
    if stored is None:
        raise exc
    return usage_error(stored)


def _admission(relay: str, lines: list[str], errors: int, then: str) -> UsageError:
    """Every diagnostic on its line with its code, then what to do, with its code."""
    plural = "s" if errors != 1 else ""
    return UsageError(
        "\n".join(
            [
                *lines,
                f"relay {relay!r} {then} ({errors} error{plural}) [{codes.ADMISSION_FAILED.code}]",
            ]
        )
    )


_WAKER: Waker | None = None


def _start_waker(workspace: Callable[[], Workspace]) -> None:
    """While the extension is loaded, due waiting runs of the workspace resume in this kernel
    (one waker per kernel: loading the extension again replaces it)."""
    global _WAKER
    if _WAKER is not None:
        _WAKER.stop()
    _WAKER = Waker(workspace).start()


@magics_class
class RelayMagics(RunCommands, RelayCommands, RunSettingsTraits, Magics):
    """The relay magics. Examples::

    %%relay invoice
    from dbos import DBOS
    ...

    %relay run invoice --input '{"text": "..."}'
    %relay run invoice --crash after:extract_invoice
    %relay recover invoice-1
    %relay logs invoice-1

    The settings are traitlets: ``%config RelayMagics.home = "path/to/relays"``,
    ``%config RelayMagics.database_url = "postgresql://me@localhost/relays"``,
    ``%config RelayMagics.confine = False`` (or ``c.RelayMagics.home`` and so on in an IPython
    profile). What is not configured comes from ``RELAY_HOME``, ``RELAY_DATABASE_URL`` and
    ``RELAY_CONFINE`` as they are when the extension loads.
    """

    home = Unicode(
        None,
        allow_none=True,
        help="The relay workspace folder of %%relay and %relay. Default: $RELAY_HOME if set, "
        "else ./relays in the kernel's working directory. A --home on a %relay line sets it too.",
    ).tag(config=True)

    # what is not configured comes from the environment, read here (the boundary) once
    @default("home")
    def _home_from_environment(self) -> str | None:
        return Settings.from_environment().home

    def __init__(self, shell: Any, home: str | None = None) -> None:
        super().__init__(shell)
        if home is not None:
            self.home = home
        self.workspace = self.settings.workspace()
        self.views: list[RunView] = []
        # the buttons of run views reach the kernel through a comm (the workspace as it is then)
        register_view_channel(shell, lambda: self.workspace)
        _start_waker(lambda: self.workspace)

    @property
    def settings(self) -> Settings:
        """The magics' settings as they are now (traitlets, resolved once when loaded)."""
        return self.run_settings(self.home)

    @observe("home", "database_url", "confine", "warm_start", "wait_grace")
    def _settings_changed(self, change: Any) -> None:
        """``%config RelayMagics.home = ...``: later magics (and views' buttons) use it."""
        try:
            self.workspace = self.settings.workspace()
        except RelayError as exc:
            if change["old"] is not Undefined:  # keep the settings that work
                self.set_trait(change["name"], change["old"])
            raise usage_error(exc) from None

    # -- %%relay ------------------------------------------------------------------------------

    @cell_magic
    def relay(self, line: str, cell: str) -> Any:
        """Save the cell as relay NAME's draft (not executed), check it, and draw its flow graph.

        Usage: ``%%relay NAME [--publish] [--no-graph] [--allow=HOST:PORT ...]
        [--network=none]``. Admission errors are reported with the cell's line numbers;
        determinism warnings are shown but do not block. A relay reaches the outside but not
        this machine's own servers: ``--allow=127.0.0.1:8000`` lets it reach that one (a
        local model server; ``{service.endpoint}`` expands a notebook variable), and
        ``--network=none`` cuts it off; either is kept in the relay's manifest.

        Example::

            %%relay hello
            from dbos import DBOS

            @DBOS.workflow()
            async def run(INPUT):
                return {"hello": INPUT.get("name", "world")}
        """
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise usage_error(
                f"%%relay {line.strip()}: {exc}; quote the whole line again"
            ) from None
        names = [w for w in words if not w.startswith("-")]
        flags = {w for w in words if w.startswith("-")}
        if not names:
            raise usage_error("%%relay needs a relay name: %%relay NAME [--publish] [--no-graph]")
        if len(names) > 1:
            joined = re.sub(r"[^A-Za-z0-9]+", "_", " ".join(names)).strip("_").lower()
            raise usage_error(
                f"relay names cannot contain spaces; try {joined or 'my_relay'}",
                codes.INVALID_RELAY_NAME.code,
            )
        name = names[0]
        network = _network_option(flags)
        flags = {f for f in flags if not f.startswith(("--allow=", "--network="))}
        unknown = flags - set(_CELL_OPTIONS)
        if unknown:
            raise usage_error(
                f"%%relay: unknown option {sorted(unknown)[0]}; use --publish, --no-graph, "
                f"--allow=127.0.0.1:PORT or --network=none"
            )
        try:
            manifest = None
            if network is not None:  # the cell says what the relay may reach: its manifest
                old = self.workspace.relay_dir(name) / MANIFEST_FILE
                base = load_manifest(old) if old.is_file() else Manifest()
                manifest = replace(base, network=network)
            draft = self.workspace.save_draft(name, cell, manifest)
            report = commands.check_draft(draft)
        except (RelayError, OSError) as exc:
            raise _said(exc, self.workspace.home) from None
        # the cell's first line is the magic line: relay.py line N is cell line N + 1
        view = CheckView(name, report.diagnostics, line_offset=1)
        if not report.ok:
            raise _admission(
                name,
                view.lines(),
                len(report.errors),
                "was saved but failed admission; fix the cell and run it again",
            )
        if report.warnings:
            display(view)
        if "--publish" in flags:
            try:
                result = commands.publish(self.workspace, name)
            except RelayError as exc:
                raise usage_error(exc) from None
            print(surfaces.published_line(result, "notebook"))
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
        --retry``, ``%relay vault set NAME``, ``%relay lab``, ``%relay relays``, ``%relay delete
        NAME|RUN [--force]``, ``%relay preview RUN``, ``%relay steps RUN [-o VAR]``, ``%relay
        attempts RUN [-o VAR]``, ``%relay timeline RUN``, ``%relay files RUN [CALL]``, ``%relay
        events RUN [-o VAR]`` (what the run published: events, streams), ``%relay doctor``
        (which start and confinement runs get, and why), ``%relay mcp`` (the ``mcpServers``
        JSON a coding agent needs to operate this workspace's relays over MCP).
        ``%relay -h`` lists them.

        Example::

            %relay run invoice --input order --crash after:extract_invoice
        """
        parser = build_parser("%relay", notebook=True)
        try:
            args = parser.parse_args(shlex.split(line))
        except (CommandLineError, ValueError) as exc:  # ValueError: shlex, unbalanced quotes
            raise usage_error(exc, codes.USAGE.code) from None
        except SystemExit:
            return None  # -h printed the help
        if args.home:
            self.home = args.home
        if args.database_url is not None:
            # like --home, it holds for the rest of the session (and for the view's buttons)
            self.database_url = args.database_url
        handler = getattr(self, f"_do_{args.command}", None)
        if args.command in RECORD_COMMANDS:
            handler = self._records
        if handler is None:
            raise usage_error(f"%relay {args.command} is not available in the notebook yet")
        try:
            return handler(args)
        except AdmissionError as exc:
            errors = [d for d in exc.diagnostics if d.severity == "error"]
            raise _admission(
                exc.relay,
                [d.format() for d in errors],
                len(errors),
                f"failed admission; fix it and check again with %relay check {exc.relay}",
            ) from None
        except Exception as exc:
            raise _said(exc, self.workspace.home) from None

    # -- subcommands --------------------------------------------------------------------------

    def _do_run(self, args: Any) -> Any:
        run_input = inputs.run_input(text=args.input, file=args.input_file, variables=self._user_ns)
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
            error = outcome.error or {}
            code = str(error.get("code") or outcome.status.replace("_", "-"))
            raise usage_error(
                str(error.get("message") or f"run {outcome.run_id}: {outcome.status}"), code
            )
        if args.output and self.shell is not None:
            self.shell.user_ns[args.output] = outcome.result
        return outcome.result

    def _do_workers(self, args: Any) -> Any:
        found = [w.to_dict() for w in commands.workers(self.settings.backend())]
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
        view.follows = False
        outcome = view.wait()
        # (an attempt that ended before this line, e.g. a recovery held at once, was taken for
        # a live view's: the cell returns the result, and the view stays as it is now)
        WATCHER.forget(view)
        view.monitor.result = None
        view.monitor.refresh()
        view.show()
        return outcome.result if outcome.status == "succeeded" else None

    def _do_runs(self, args: Any) -> Any:
        found = commands.runs(self.workspace, args.name)
        if args.json:
            return [r.to_dict() for r in found]
        for broken in commands.broken_drafts(self.workspace, args.name):
            print(surfaces.broken_line(broken, "notebook"))
        return RunsView(found)

    def _records(self, args: Any) -> Any:
        from relay_notebook.magics.records import show_record

        return show_record(self.workspace, args, self._user_ns)

    def _do_logs(self, args: Any) -> Any:
        log = commands.logs(self.workspace, args.run_id)
        if args.json:
            return log.to_dict()
        from relay_notebook.views.records import RunLogView

        return RunLogView(log)

    def _do_files(self, args: Any) -> Any:
        """``%relay files RUN [CALL]``: the run's execution/ tree, each call folder labelled."""
        from relay_notebook.commands.run_files import files_view, logs_files

        if args.json:
            return logs_files(self.workspace, args.run_id)
        return files_view(self.workspace, args.run_id, args.call)

    def _do_lab(self, args: Any) -> None:
        from relay_notebook.magics.lab import RecoveryLab

        RecoveryLab(self.workspace).show()
