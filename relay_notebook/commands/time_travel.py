"""Time travel: ``fork``, ``lineage`` and ``diff`` for every surface (the CLI, the magics, REST).

The mechanism lives in ``runner.fork`` and ``history.lineage``; this module turns what a user
types into their arguments (``--set STEP#N=JSON`` through the one input layer) and renders
the results as lines; the parsers are ``cli.parser``'s, the CLI's handlers
``cli.run_handlers``'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relay_notebook.commands import inputs
from relay_notebook.commands.runs import QueuedRun, require_pool_backend
from relay_notebook.errors import InvalidInputError
from relay_notebook.history.lineage import CallDiff, LineageNode, diff_runs, lineage, lineage_text
from relay_notebook.runner import RunHandle
from relay_notebook.runner.backend import Backend, workspace_backend
from relay_notebook.runner.crash import parse_crash_spec
from relay_notebook.runner.fork import ForkRequest
from relay_notebook.runner.handle import EventCallback
from relay_notebook.runner.runs import create_fork, start_fork
from relay_notebook.workspace import Workspace

__all__ = [
    "ForkRequest",
    "LineageNode",
    "diff",
    "diff_lines",
    "fork",
    "fork_queued",
    "lineage",
    "lineage_text",
    "parse_sets",
    "tree_lines",
]


def parse_sets(texts: Sequence[str], variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--set STEP#N=JSON`` (repeatable) as ``{"STEP#N": value}``."""
    out: dict[str, Any] = {}
    for text in texts:
        target, eq, value = text.partition("=")
        if not eq or not target.strip():
            raise InvalidInputError(
                f"--set {text!r} is not STEP#N=JSON; write e.g. --set price#1=8 or "
                f"--set extract#1='{{\"total\": 12}}'."
            )
        out[target.strip()] = inputs.value_from_text(value, f"--set {target.strip()}", variables)
    return out


def fork(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    crash: str | None = None,
    on_event: EventCallback | None = None,
) -> RunHandle:
    """``relay fork RUN --from STEP[#N]``: the fork's first attempt, started."""
    spec = parse_crash_spec(crash) if crash else None
    return start_fork(workspace, run_id, request, crash=spec, on_event=on_event)


def fork_queued(
    workspace: Workspace,
    run_id: str,
    request: ForkRequest,
    *,
    crash: str | None = None,
    backend: Backend | None = None,
) -> QueuedRun:
    """``relay fork RUN --from STEP --queue``: the fork made, then handed to the worker pool
    (PostgreSQL); returns the ``QueuedRun`` whose ``wait`` gives its outcome."""
    from relay_notebook.runner.pool import enqueue_run

    pool = require_pool_backend(workspace_backend(workspace, backend), "relay fork --queue")
    spec = parse_crash_spec(crash) if crash else None
    folder = create_fork(workspace, run_id, request, backend=pool, queued=True)
    invocation = enqueue_run(pool, folder.run_id, crash=spec)
    return QueuedRun(folder.run_id, folder.relay, invocation, pool)


def tree_lines(workspace: Workspace, run_ids: Sequence[str]) -> list[str]:
    """``relay runs --tree``: every run, forks under the run they came from (oldest first)."""
    lines: list[str] = []
    drawn: set[str] = set()
    for run_id in run_ids:
        if run_id in drawn:
            continue
        tree = lineage(workspace, run_id)
        stack = [tree]
        while stack:
            node = stack.pop()
            drawn.add(node.run_id)
            stack.extend(node.children)
        lines.extend(lineage_text(tree).splitlines())
    return lines


def diff(workspace: Workspace, a: str, b: str) -> list[CallDiff]:
    """``relay diff RUN_A RUN_B``: call by call, what differs."""
    return diff_runs(workspace, a, b)


def diff_lines(rows: list[CallDiff], a: str, b: str) -> list[str]:
    """The diff as a terminal table: one line per call, the differing fields named."""
    width = max([len(r["call"]) for r in rows] + [4])
    lines = [f"{'call':<{width}}  {a:<14} {b:<14} differs"]
    for r in rows:
        left = f"{r['status_a'] or '–'}" + (f" ×{r['attempts_a']}" if r["attempts_a"] else "")
        right = f"{r['status_b'] or '–'}" + (f" ×{r['attempts_b']}" if r["attempts_b"] else "")
        what = ", ".join(r["differs"]) or "same"
        lines.append(f"{r['call']:<{width}}  {left:<14} {right:<14} {what}")
        for field, before, after in (
            ("input", r["input_preview_a"], r["input_preview_b"]),
            ("output", r["output_preview_a"], r["output_preview_b"]),
            ("error", r["error_preview_a"], r["error_preview_b"]),
        ):
            if field in r["differs"]:
                lines.append(
                    f"{'':<{width}}    {field}: {'–' if before is None else before} → "
                    f"{'–' if after is None else after}"
                )
    return lines
