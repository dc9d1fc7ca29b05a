"""Which waiting runs are due: a scan of the workspace's run records; nothing is started.

Design note: every ``relay`` command asks this before its own work (``commands.due``), so it
imports only what it reads: run records, the ledger's clock and the message check. Resuming a
due run is ``runner.wake``'s, which imports the supervisor. A waiting run is found by its
run.json (re-read only when it changed); it is due when its timer is, or when a message waits
for it.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from relay_notebook.errors import RelayError
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.ledger import now_ms
from relay_notebook.record.messages import wait_ready
from relay_notebook.record.run_record import RunRecord, WaitState
from relay_notebook.runner.backend import Backend, backend_for_run, workspace_backend
from relay_notebook.workspace import Workspace

__all__ = ["WaitingScan", "due_runs"]

_MARK = b'"status": "waiting"'


@dataclass
class WaitingScan:
    """The workspace's waiting runs, from run.json files re-read only when they changed."""

    workspace: Workspace
    _seen: dict[Path, tuple[int, int, str | None, WaitState | None]] = field(default_factory=dict)

    def waiting(self) -> list[tuple[str, WaitState]]:
        """``(run_id, what it waits for)`` for every waiting run, in run-id order."""
        found: list[tuple[str, WaitState]] = []
        live: set[Path] = set()
        for path in self.workspace.home.glob("*/runs/iteration-*-hook/run.json"):
            live.add(path)
            try:
                st = os.stat(path)
            except OSError:
                continue
            known = self._seen.get(path)
            if known is None or known[:2] != (st.st_mtime_ns, st.st_size):
                run_id, state = _read_wait(path)
                known = (st.st_mtime_ns, st.st_size, run_id, state)
                self._seen[path] = known
            if known[2] is not None and known[3] is not None:
                found.append((known[2], known[3]))
        for gone in set(self._seen) - live:
            del self._seen[gone]
        return sorted(found)


def _read_wait(path: Path) -> tuple[str | None, WaitState | None]:
    try:
        data = path.read_bytes()
    except OSError:
        return None, None
    if _MARK not in data:  # most runs: no parse
        return None, None
    try:
        meta = json.loads(data)
    except ValueError:
        return None, None
    if not isinstance(meta, dict) or meta.get("status") != "waiting":
        return None, None
    run_id = meta.get("run_id")
    return (run_id if isinstance(run_id, str) else None), WaitState.from_json(meta.get("waiting"))


def due_runs(
    workspace: Workspace, backend: Backend | None = None, scan: WaitingScan | None = None
) -> list[str]:
    """Waiting runs whose wait is answered now: a due timer, or a message there for them."""
    scan = scan or WaitingScan(workspace)
    now = now_ms()
    due: list[str] = []
    for run_id, state in scan.waiting():
        if state.due(now):
            due.append(run_id)
            continue
        if state.kind != "message":
            continue
        with contextlib.suppress(RelayError):
            folder: RunFolder = find_run(workspace, run_id)
            record = RunRecord.load(folder)
            run_backend = backend_for_run(record, workspace_backend(workspace, backend))
            if wait_ready(folder, record, run_backend, now):
                due.append(run_id)
    return due
