"""The attempts a long-lived surface started and still supervises (the REST server, ``relay mcp``):
kept until they end, listed, and stopped together when the surface stops."""

from __future__ import annotations

import threading

from relay_notebook.runner import RunHandle

__all__ = ["LiveRuns"]


class LiveRuns:
    """The live attempts of one surface, by run id (an ended attempt is let go on the next keep)."""

    def __init__(self) -> None:
        self._handles: dict[str, RunHandle] = {}
        self._lock = threading.Lock()

    def keep(self, handle: RunHandle) -> None:
        """Supervise ``handle`` until it ends."""
        with self._lock:
            for run_id in [r for r, h in self._handles.items() if h.done()]:
                del self._handles[run_id]
            if not handle.done():
                self._handles[handle.run_id] = handle

    def run_ids(self) -> list[str]:
        """Runs with an attempt supervised here right now."""
        with self._lock:
            return sorted(r for r, h in self._handles.items() if not h.done())

    def interrupt_all(self, grace: float = 2.0) -> list[str]:
        """Stop every live attempt (the surface stops): each ends ``interrupted``, recoverable."""
        with self._lock:
            live = [h for h in self._handles.values() if not h.done()]
        threads = [threading.Thread(target=h.cancel, args=(grace,)) for h in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(h.run_id for h in live)
