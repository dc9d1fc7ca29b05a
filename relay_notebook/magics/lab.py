"""``%relay lab``: the recovery lab widget — the five scenarios as buttons, with what happened."""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as widgets
from IPython.display import display

from relay_notebook.commands.lab import SCENARIOS, Lab
from relay_notebook.errors import RelayNotFoundError, RunNotFoundError, WorkspaceNotFoundError
from relay_notebook.views.wording import reword
from relay_notebook.workspace import Workspace

__all__ = ["RecoveryLab"]


class RecoveryLab(widgets.VBox):  # type: ignore[misc]
    """Pick a scenario, start a run, recover it; revoke or grant access between attempts."""

    def __init__(self, workspace: Workspace) -> None:
        self.lab = Lab(workspace)
        self.run_id: str | None = None
        self._buttons: list[widgets.Button] = []
        self.scenario = widgets.ToggleButtons(
            options=[(s.title, key) for key, s in SCENARIOS.items()],
            style={"button_width": "auto"},
        )
        self.expect = widgets.HTML()
        self.report = widgets.HTML(value="<i>Start a run to see what happens.</i>")
        buttons = [
            self._button("Start new run", self._start),
            self._button("Recover same run", self._recover),
            self._button("Revoke access", self.lab.revoke),
            self._button("Grant access", self.lab.grant),
            self._button("Reconcile from service", self._reconcile),
        ]
        self.scenario.observe(lambda _c: self._describe(), names="value")
        self._describe()
        super().__init__([self.scenario, self.expect, widgets.HBox(buttons), self.report])

    def __repr__(self) -> str:
        return f"recovery lab: {len(SCENARIOS)} scenarios"

    def show(self) -> RecoveryLab:
        display(self)
        return self

    def _button(self, label: str, action: Any) -> widgets.Button:
        button = widgets.Button(description=label, layout={"width": "auto"})
        button.on_click(lambda _b: self._in_background(action))
        self._buttons.append(button)
        return button

    def _in_background(self, action: Any) -> None:
        """Run a button's action off the kernel's thread, so other cells stay responsive."""
        for b in self._buttons:
            b.disabled = True
        self.report.value = "<i>working…</i>"

        def work() -> None:
            try:
                self._safely(action)
            finally:
                for b in self._buttons:
                    b.disabled = False

        threading.Thread(target=work, name="relay-lab", daemon=True).start()

    def _safely(self, action: Any) -> None:
        try:
            action()
        except Exception as exc:
            text = reword(" ".join(str(exc).split()), "notebook")
            if isinstance(exc, RelayNotFoundError | RunNotFoundError | WorkspaceNotFoundError):
                # the lab's workspace (or its relay) was deleted under it: a new lab sets it up
                text = (
                    f"{text} The lab's relay or its workspace is gone (deleted since this lab "
                    "started?): run %relay lab again in a cell to set it up afresh."
                )
            self.report.value = f'<p style="color:#b91c1c">{html.escape(text)}</p>'
            return
        self._show_report()

    def _describe(self) -> None:
        s = SCENARIOS[str(self.scenario.value)]
        crash = f"<code>--crash {s.crash}</code>" if s.crash else "no crash"
        self.expect.value = (
            f"<p>{html.escape(s.title)}: {crash}. Expect: {html.escape(s.expect)}.</p>"
        )

    def _start(self) -> None:
        outcome = self.lab.start(str(self.scenario.value))
        self.run_id = outcome.run_id

    def _recover(self) -> None:
        if self.run_id is None:
            raise RuntimeError("start a run first")
        self.lab.recover(self.run_id)

    def _reconcile(self) -> None:
        if self.run_id is None:
            raise RuntimeError("start a run first")
        self.lab.reconcile_from_service(self.run_id)

    def _show_report(self) -> None:
        if self.run_id is None:
            return
        r = self.lab.report(self.run_id)
        attempts = " → ".join(r["attempts"]) or "–"
        reused = " ".join(
            f'<span style="background:#0e7490;color:white;border-radius:8px;padding:0 6px">'
            f"{html.escape(n)} reused</span>"
            for n in r["reused"]
        )
        receipts = "".join(f"<li>{html.escape(x)}</li>" for x in r["receipts"]) or "<li>none</li>"
        self.report.value = (
            f"<table class='relay-lab'><tr><th>run</th><td><code>{r['run_id']}</code> "
            f"({html.escape(r['status'])})</td></tr>"
            f"<tr><th>attempts</th><td>{html.escape(attempts)}</td></tr>"
            f"<tr><th>checkpoints</th><td>{reused or '–'}</td></tr>"
            f"<tr><th>service attempts</th><td>{r['service_attempts']}</td></tr>"
            f"<tr><th>orders created</th><td>{r['orders']}</td></tr>"
            f"<tr><th>receipts</th><td><ul>{receipts}</ul></td></tr></table>"
        )
