"""The live run view: the flow graph painted with the run's history as it goes, and its header.

Design note: the view is a display (not widget state) updated in place through its display id,
so a saved notebook keeps the last state and renders it with the labextension (or the SVG
fallback) without a kernel. Events arrive on the supervisor's reader thread and only say "look
again": each push reads the run's history (a few milliseconds for a small run) and paints it
with the same overlay as ``%relay logs``, so the view shows what the record says, never a
guess of its own. Pushes are coalesced (at most ``MAX_RATE_HZ`` a second), because the
Jupyter server silently drops iopub floods, and the final state is always sent.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from relay_notebook.errors import RelayError
from relay_notebook.history import RunLog, overlay_run
from relay_notebook.history.run_events import LatestEvents
from relay_notebook.history.run_graph import overlay_events
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.layout import layout_graph
from relay_notebook.views.header import Surface, header_line, with_next
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.views.run_events import latest_lines
from relay_notebook.views.svg import render_svg
from relay_notebook.views.text import graph_text

__all__ = ["RESULT_PREVIEW", "RunMonitor", "Throttle", "result_preview"]

MAX_RATE_HZ = 8


#: characters of a run's result a view's header shows
RESULT_PREVIEW = 200


def result_preview(result: Any) -> str:
    """``result`` as one line of JSON for the header, cut at ``RESULT_PREVIEW`` characters."""
    text = json.dumps(result, ensure_ascii=False, default=str)
    return text if len(text) <= RESULT_PREVIEW else text[: RESULT_PREVIEW - 1] + "…"


class Throttle:
    """Calls ``push`` at most ``rate`` times a second; ``flush`` always pushes the last state."""

    def __init__(self, push: Callable[[], None], rate: float = MAX_RATE_HZ) -> None:
        self._push = push
        self._interval = 1.0 / rate
        self._last = 0.0
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.pushes = 0

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
            self.pushes += 1
        self._push()

    def request(self) -> None:
        """Ask for a push: now if the last one was long enough ago, else once, a bit later."""
        with self._lock:
            if self._timer is not None:
                return
            wait = self._interval - (time.monotonic() - self._last)
            if wait > 0:
                self._timer = threading.Timer(wait, self._fire)
                self._timer.daemon = True
                self._timer.start()
                return
        self._fire()

    def flush(self) -> None:
        """Push the final state now, cancelling any pending push."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self._fire()


class RunMonitor:
    """The live state of one run: its flow graph painted from the run's history, and its header.

    ``read`` returns the run's current ``RunLog`` (history reads are read-only and safe while
    the run goes). Each refresh paints the flow graph with ``history.overlay_run`` — the same
    mapping of calls to nodes as every other run graph, so the live view's last state and the
    logs' overlay cannot disagree.
    """

    def __init__(
        self,
        flow: FlowGraph,
        read: Callable[[str], RunLog],
        *,
        run_id: str | None = None,
        surface: Surface = "notebook",
        read_events: Callable[[str], LatestEvents] | None = None,
    ) -> None:
        if any(n.x is None for n in flow.nodes):
            layout_graph(flow)
        self.flow = flow
        self.read = read
        #: the run's latest events and stream values (``RunEvents.latest``), if the view has them
        self.read_events = read_events
        self.run_id = run_id
        self.surface: Surface = surface
        #: a sentence about this view, e.g. that a recovery found nothing left to do
        self.note: str | None = None
        #: the run's result, previewed (a live view shows it: no cell value returns it)
        self.result: str | None = None
        #: what the flow graph is drawn on (``commands.RunFlow.code``): the header says when it
        #: is not the draft as it is now
        self.code: dict[str, Any] | None = None
        self.graph = copy.deepcopy(flow)
        self.graph.kind = "run"
        self.run: dict[str, Any] | None = None
        self.refreshes = 0
        self._lock = threading.Lock()

    def draw_on(self, flow: FlowGraph, code: dict[str, Any] | None) -> None:
        """Draw the run on ``flow`` (the code the run ran) from the next refresh on."""
        if any(n.x is None for n in flow.nodes):
            layout_graph(flow)
        self.flow, self.code = flow, code

    @property
    def status(self) -> str:
        return str((self.run or {}).get("status") or "starting")

    def refresh(self) -> None:
        """Read the run again and repaint (a run not started yet keeps the last state)."""
        run_id = self.run_id
        if run_id is None:
            return
        try:
            log = self.read(run_id)
        except RelayError:
            return  # its folder or record is not there yet
        graph = overlay_run(self.flow, log)
        run = graph.run or {"run_id": run_id, "status": "starting"}
        if self.code is not None and self.code.get("changed"):
            run["code"] = self.code  # only then does the header say anything about it
        run = with_next(run, self.surface)
        if self.note:
            run["note"] = self.note
        if self.result is not None and run.get("status") == "succeeded":
            run["result"] = self.result
        graph.run = run
        if self.read_events is not None:
            # no record yet: the events come with the next refresh
            with contextlib.suppress(RelayError):
                overlay_events(graph, self.read_events(run_id))
        with self._lock:
            self.graph, self.run = graph, run
            self.refreshes += 1

    def summary(self) -> str:
        """The header as one stable line (no times, no paths: nbval compares it)."""
        with self._lock:
            run = self.run
        if run is None:
            return f"run {self.run_id or '…'}: starting"
        return header_line(run)

    def bundle(self) -> dict[str, Any]:
        """The current state as a MIME bundle for display/update_display."""
        title = self.summary()
        with self._lock:
            graph = self.graph
        doc = graph.to_dict()
        events = (graph.run or {}).get("events")  # what overlay_events put there
        strip = latest_lines(events) if events else []
        svg = render_svg(graph, title=title, strip=strip)
        text = "\n".join([title, *strip, graph_text(graph)])
        return {GRAPH_MIME: doc, "image/svg+xml": svg, "text/plain": text}
