"""The ``%relay`` subcommands that act on a run once it started: fork, lineage and diff (time
travel), send, wake and wait (waiting runs), events, and reconcile. A mixin of ``RelayMagics``: each
method parses nothing, calls the command layer and returns what the cell shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from relay_notebook import commands
from relay_notebook.cli.parser import CommandLineError
from relay_notebook.commands import inputs
from relay_notebook.errors import codes
from relay_notebook.magics.runs import RunView
from relay_notebook.views import wording as surfaces

if TYPE_CHECKING:
    from relay_notebook.workspace import Workspace

__all__ = ["MagicCommands", "RunCommands", "usage_error"]


def usage_error(exc: Exception | str, code: str | None = None) -> UsageError:
    """One line worded for the notebook, ending with its stable code."""
    text = surfaces.reword(" ".join(str(exc).split()), "notebook")
    if code is None and isinstance(exc, CommandLineError | str):
        code = codes.USAGE.code
    return UsageError(f"{text} [{code}]" if code else text)


class MagicCommands:
    """What every mixin of ``RelayMagics`` may use: the workspace, the shell's namespace and
    the way a run view is shown."""

    workspace: Workspace
    shell: Any

    @property
    def _user_ns(self) -> dict[str, Any]:
        return self.shell.user_ns if self.shell is not None else {}

    #: displays a run view (live, or its final state with ``--wait``): RelayMagics's
    _show: Callable[[RunView, Any], Any]


class RunCommands(MagicCommands):
    """fork / lineage / diff, send / wake / wait, events, reconcile (see the module's
    docstring)."""

    def _do_fork(self, args: Any) -> Any:
        """``%relay fork RUN --from STEP#N``: a live view of the fork (copied calls badged)."""
        from relay_notebook.cli.parser import fork_arguments

        options = fork_arguments(args, self._user_ns)
        view = RunView.fork(
            self.workspace, args.run_id, shell=self.shell, output=args.output, **options
        )
        return self._show(view, args)

    def _do_send(self, args: Any) -> Any:
        """``%relay send RUN TOPIC JSON``: deliver a message; a live view of the resumed run."""
        from relay_notebook.commands.waiting import delivery_line

        message = inputs.value_from_text(args.message, "the message", self._user_ns)
        view, delivery = RunView.send(
            self.workspace, args.run_id, args.topic, message,
            idempotency_key=args.idempotency_key, shell=self.shell, output=args.output,
        )  # fmt: skip
        if args.json:
            return delivery.to_dict()
        print(delivery_line(delivery, "notebook"))
        if delivery.handle is None:
            return None
        return self._show(view, args)

    def _do_wake(self, args: Any) -> Any:
        """``%relay wake``: resume the workspace's due waiting runs; their outcomes."""
        from relay_notebook.commands.waiting import wake

        outcomes = [h.wait() for h in wake(self.workspace)]
        if args.json:
            return [o.to_dict() for o in outcomes]
        if not outcomes:
            print("no waiting run is due")
        for o in outcomes:
            print(f"run {o.run_id}: {o.status} (attempt {o.attempt})")
        return None

    def _do_wait(self, args: Any) -> Any:
        """``%relay wait RUN``: block until the run finishes, through its waits."""
        from relay_notebook.commands.waiting import wait_for_run

        try:
            outcome = wait_for_run(self.workspace, args.run_id, timeout=args.timeout)
        except TimeoutError as exc:
            raise usage_error(str(exc), codes.WAITING.code) from None
        if args.json:
            return outcome.to_dict()
        print(f"run {outcome.run_id}: {outcome.status} (attempt {outcome.attempt})")
        if outcome.status != "succeeded":
            return None
        if args.output and self.shell is not None:
            self.shell.user_ns[args.output] = outcome.result
        return outcome.result

    def _do_lineage(self, args: Any) -> Any:
        """``%relay lineage RUN``: the run's forks as a tree."""
        from relay_notebook.commands.time_travel import lineage
        from relay_notebook.views.lineage import LineageView

        tree = lineage(self.workspace, args.run_id)
        return tree.to_dict() if args.json else LineageView(tree)

    def _do_events(self, args: Any) -> Any:
        """``%relay events RUN [-o VAR]``: the run's events, stream values and messages as a
        table; ``-o VAR`` binds ``{"events": {KEY: value}, "streams": {KEY: [values]}}``."""
        from relay_notebook.commands.run_events import read_run_events
        from relay_notebook.views.run_events import events_frame

        found = read_run_events(self.workspace, args.run_id)
        if args.output:
            self._user_ns[args.output] = found.values()
        return found.to_dict() if args.json else events_frame(found)

    def _do_diff(self, args: Any) -> Any:
        """``%relay diff RUN_A RUN_B``: a DataFrame, one row per call, what differs."""
        from relay_notebook.commands.time_travel import diff
        from relay_notebook.views.lineage import diff_frame

        rows = diff(self.workspace, args.run_a, args.run_b)
        return rows if args.json else diff_frame(rows, args.run_a, args.run_b)

    def _do_reconcile(self, args: Any) -> None:
        if args.result is None and not args.retry:
            pending = commands.pending_calls(self.workspace, args.run_id)
            print("\n".join(surfaces.pending_lines(args.run_id, pending, "notebook")))
            return
        result = None
        if args.result is not None:
            result = inputs.reconcile_result(args.result, self._user_ns)
        state = commands.reconcile(
            self.workspace, args.run_id, result=result, retry=args.retry, key=args.key
        )
        print(surfaces.reconciled_line(args.run_id, state, "notebook"))
