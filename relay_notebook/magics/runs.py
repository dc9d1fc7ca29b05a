"""The notebook's run view: a live, in-place display of one run, plus its control buttons."""

from __future__ import annotations

import html
import json
import threading
from typing import Any

import ipywidgets as widgets
from IPython.display import DisplayHandle, display

from relay_notebook import commands
from relay_notebook.runner import RunHandle, RunOutcome
from relay_notebook.source.graph import FlowGraph
from relay_notebook.views.live import RunMonitor, Throttle
from relay_notebook.workspace import Workspace

__all__ = ["RunControls", "RunView"]


class RunView:
    """One run as it happens: the flow graph coloured by its events, updated in place."""

    def __init__(
        self, workspace: Workspace, relay: str, flow: FlowGraph, shell: Any, output: str | None
    ) -> None:
        self.workspace = workspace
        self.relay = relay
        self.flow = flow
        self.shell = shell
        self.output = output
        self.monitor = RunMonitor("…", flow)
        self.handle: RunHandle | None = None
        self._display: DisplayHandle | None = None
        self._lock = threading.Lock()
        self.throttle = Throttle(self._push)

    def __repr__(self) -> str:
        return self.monitor.summary()

    # -- starting -----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        workspace: Workspace,
        target: str,
        *,
        run_input: Any,
        release: str | None,
        crash: str | None,
        shell: Any,
        output: str | None = None,
    ) -> RunView:
        draft = workspace.resolve_target(target)
        view = cls(workspace, draft.name, commands.graph_of_draft(draft), shell, output)
        handle = commands.run(
            workspace,
            target,
            run_input=run_input,
            release=release,
            crash=crash,
            on_event=view._on_event,
        )
        view._attach(handle)
        return view

    @classmethod
    def recover(
        cls, workspace: Workspace, run_id: str, *, shell: Any, output: str | None = None
    ) -> RunView:
        log = commands.logs(workspace, run_id)
        relay = str(log.run["relay"])
        view = cls(workspace, relay, commands.graph(workspace, relay), shell, output)
        view.monitor.run_id = run_id
        handle = commands.recover(workspace, run_id, on_event=view._on_event)
        view._attach(handle)
        return view

    def _attach(self, handle: RunHandle) -> None:
        self.handle = handle
        self.monitor.run_id = handle.run_id
        self.monitor.attempt = handle.attempt
        handle.add_done_callback(self._on_done)

    # -- updates (called from the supervisor's reader thread) ---------------------------------

    def _on_event(self, event: dict[str, Any]) -> None:
        self.monitor.apply(event)
        self.throttle.request()

    def _on_done(self, outcome: RunOutcome) -> None:
        self.monitor.status = outcome.status
        self.monitor.attempt = outcome.attempt
        if outcome.reused and not self.monitor.reused:
            self.monitor.reused = len(outcome.reused)
        if self.output and outcome.status == "succeeded":
            self.shell.user_ns[self.output] = outcome.result
        self.throttle.flush()

    def _push(self) -> None:
        with self._lock:
            if self._display is not None:
                self._display.update(self.monitor.bundle(), raw=True)

    # -- showing ------------------------------------------------------------------------------

    def show(self) -> None:
        """Display the live view (once) and the run's control buttons."""
        with self._lock:
            self._display = display(self.monitor.bundle(), raw=True, display_id=True)
        display(RunControls(self))

    def wait(self, timeout: float | None = None) -> RunOutcome:
        """Block until the attempt ends; the view shows the final state."""
        assert self.handle is not None
        outcome = self.handle.wait(timeout)
        self._on_done(outcome)
        return outcome

    @property
    def outcome(self) -> RunOutcome | None:
        return self.handle.outcome if self.handle else None


class RunControls(widgets.VBox):  # type: ignore[misc]
    """Run again, crash on purpose after or during a step, recover: each opens a new view."""

    def __init__(self, view: RunView) -> None:
        steps = sorted({n.label for n in view.flow.nodes if n.type == "step"})
        self.view = view
        self.step = widgets.Dropdown(options=steps, description="step", layout={"width": "220px"})
        buttons = [
            self._button("run again", lambda: self._start(None)),
            self._button("crash after", lambda: self._start(f"after:{self.step.value}")),
            self._button("crash during", lambda: self._start(f"during:{self.step.value}")),
            self._button("recover", self._recover),
        ]
        self.node = widgets.Dropdown(
            options=[("node details…", "")]
            + [(f"{n.type}: {n.label}", n.id) for n in view.flow.nodes],
            layout={"width": "260px"},
        )
        self.details = widgets.HTML()
        self.node.observe(lambda _c: self._show_node(), names="value")
        self.out = widgets.Output()
        super().__init__([widgets.HBox([*buttons, self.step, self.node]), self.details, self.out])

    def _show_node(self) -> None:
        """The selected node's details: source line, prompt, model, tools, as the graph has them."""
        if not self.node.value:
            self.details.value = ""
            return
        node = self.view.flow.node(str(self.node.value))
        rows = [("type", node.type), ("label", node.label)]
        if node.line is not None:
            rows.append(("line", str(node.line)))
        rows += [(k, json.dumps(v, ensure_ascii=False)) for k, v in sorted(node.details.items())]
        self.details.value = (
            "<table class='relay-node-details'>"
            + "".join(
                f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(v)}</code></td></tr>"
                for k, v in rows
            )
            + "</table>"
        )

    def __repr__(self) -> str:
        return f"relay controls for {self.view.relay}"

    def _button(self, label: str, action: Any) -> widgets.Button:
        button = widgets.Button(description=label, layout={"width": "auto"})
        button.on_click(lambda _b: self._safely(action))
        return button

    def _safely(self, action: Any) -> None:
        with self.out:
            try:
                action()
            except Exception as exc:
                print(f"relay: {exc}")

    def _start(self, crash: str | None) -> None:
        run_input: Any = {}
        if self.view.handle is not None:
            log = commands.logs(self.view.workspace, self.view.handle.run_id)
            run_input = log.run.get("input") or {}
        RunView.start(
            self.view.workspace,
            self.view.relay,
            run_input=run_input,
            release=None,
            crash=crash if crash and not crash.endswith(":None") else None,
            shell=self.view.shell,
        ).show()

    def _recover(self) -> None:
        if self.view.handle is None:
            return
        RunView.recover(self.view.workspace, self.view.handle.run_id, shell=self.view.shell).show()
