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
from relay_notebook.history.lineage import diff_runs, lineage, lineage_text
from relay_notebook.runner import RunHandle
from relay_notebook.runner.crash import parse_crash_spec
from relay_notebook.runner.fork import create_fork, start_fork
from relay_notebook.runner.handle import EventCallback
from relay_notebook.workspace import Workspace

__all__ = [
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
    *,
    from_call: str,
    run_input: Any = None,
    input_given: bool = False,
    sets: dict[str, Any] | None = None,
    release: str | None = None,
    draft: bool = False,
    crash: str | None = None,
    on_event: EventCallback | None = None,
) -> RunHandle:
    """``relay fork RUN --from STEP[#N]``: the fork's first attempt, started."""
    if release is not None and not release.strip():
        raise InvalidInputError("--release '' names no release; give vN, a hash prefix or latest")
    handle: RunHandle = start_fork(
        workspace, run_id, from_call=from_call, run_input=run_input, input_given=input_given,
        sets=sets, release=release, draft=draft,
        crash=parse_crash_spec(crash) if crash else None, on_event=on_event,
    )  # fmt: skip
    return handle


def fork_queued(
    workspace: Workspace,
    run_id: str,
    *,
    crash: str | None = None,
    backend: Any = None,
    **kwargs: Any,
) -> Any:
    """``relay fork RUN --from STEP --queue``: the fork made, then handed to the worker pool
    (PostgreSQL); returns the ``QueuedRun`` whose ``wait`` gives its outcome."""
    from relay_notebook.runner.backend import workspace_backend
    from relay_notebook.runner.pool import enqueue_run

    if kwargs.get("release") is not None and not str(kwargs["release"]).strip():
        raise InvalidInputError("--release '' names no release; give vN, a hash prefix or latest")
    pool = require_pool_backend(workspace_backend(workspace, backend), "relay fork --queue")
    spec = parse_crash_spec(crash) if crash else None
    folder = create_fork(workspace, run_id, backend=pool, queued=True, **kwargs)
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


def diff(workspace: Workspace, a: str, b: str) -> list[dict[str, Any]]:
    """``relay diff RUN_A RUN_B``: call by call, what differs."""
    return diff_runs(workspace, a, b)


def diff_lines(rows: list[dict[str, Any]], a: str, b: str) -> list[str]:
    """The diff as a terminal table: one line per call, the differing fields named."""
    width = max([len(r["call"]) for r in rows] + [4])
    lines = [f"{'call':<{width}}  {a:<14} {b:<14} differs"]
    for r in rows:
        left = f"{r['status_a'] or '–'}" + (f" ×{r['attempts_a']}" if r["attempts_a"] else "")
        right = f"{r['status_b'] or '–'}" + (f" ×{r['attempts_b']}" if r["attempts_b"] else "")
        what = ", ".join(r["differs"]) or "same"
        lines.append(f"{r['call']:<{width}}  {left:<14} {right:<14} {what}")
        for field in ("input", "output", "error"):
            if field in r["differs"]:
                before, after = r[f"{field}_preview_a"], r[f"{field}_preview_b"]
                lines.append(
                    f"{'':<{width}}    {field}: {'–' if before is None else before} → "
                    f"{'–' if after is None else after}"
                )
    return lines
