"""The live run view: the flow graph coloured by the run's events, and the run's status.

Design note: the view is a display (not widget state) updated in place through its display id,
so a saved notebook keeps the last state and renders it with the labextension (or the SVG
fallback) without a kernel. Events arrive on the supervisor's reader thread; updates are
coalesced to at most 20 per second, because the Jupyter server silently drops iopub floods,
and the final state is always sent.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

from relay_notebook.history.run_path import call_key
from relay_notebook.source.graph import FlowGraph, Node
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.views.svg import render_svg
from relay_notebook.views.text import graph_text

__all__ = ["RunMonitor", "Throttle"]

MAX_RATE_HZ = 20


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


def _step_nodes(graph: FlowGraph) -> dict[str, list[Node]]:
    """Flow-graph nodes by the step name their calls are recorded under in events."""
    index: dict[str, list[Node]] = {}
    for node in graph.nodes:
        key = call_key(node)
        if key is not None:
            index.setdefault(key, []).append(node)
    return index


class RunMonitor:
    """Folds run events into per-node statuses over a copy of the static flow graph."""

    def __init__(self, run_id: str, graph: FlowGraph) -> None:
        self.run_id = run_id
        self.graph = copy.deepcopy(graph)
        self._index = _step_nodes(self.graph)
        self.status = "running"
        self.attempt = 1
        self.executed = 0
        self.reused = 0
        self.error: str | None = None
        self._lock = threading.Lock()

    def _mark(self, step: str, status: str, *, reused: bool = False) -> None:
        for node in self._index.get(step, []):
            node.details["status"] = status
            if reused:
                node.details["reused"] = True
            if status in {"succeeded", "reused"}:
                node.details["count"] = int(node.details.get("count", 0)) + 1

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one ledger event into the view's state."""
        kind = event.get("kind")
        step = str(event.get("step", ""))
        with self._lock:
            self.attempt = int(event.get("attempt", self.attempt))
            if kind == "attempt_start":
                self.status = "running"
            elif kind == "step_start":
                self._mark(step, "running")
            elif kind == "step_end":
                self.executed += 1
                self._mark(step, "succeeded")
            elif kind == "step_reused":
                self.reused += 1
                self._mark(step, "reused", reused=True)
            elif kind == "step_error":
                self._mark(step, "failed")
            elif kind == "attempt_end":
                self.status = str(event.get("status", self.status))
                self.error = event.get("error_code")
                for node in self.graph.nodes:
                    if node.details.get("status") == "running":
                        node.details["status"] = "pending"

    def summary(self) -> str:
        """One stable line: no times, no paths (nbval compares it)."""
        extra = f", {self.reused} checkpoints reused" if self.reused else ""
        return f"run {self.run_id}: {self.status} (attempt {self.attempt}){extra}"

    def bundle(self) -> dict[str, Any]:
        """The current state as a MIME bundle for display/update_display."""
        with self._lock:
            doc = self.graph.to_dict()
            svg = render_svg(self.graph, title=self.summary())
            text = self.summary() + "\n" + graph_text(self.graph)
        return {GRAPH_MIME: doc, "image/svg+xml": svg, "text/plain": text}
