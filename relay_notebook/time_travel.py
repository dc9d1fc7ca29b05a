"""Time travel: ``fork``, ``lineage`` and ``diff`` for every surface (the CLI, the magics, REST).

The mechanism lives in ``runner.fork`` and ``history.lineage``; this module turns what a user
types into their arguments (``--set STEP#N=JSON`` through the one input layer) and renders
the results for a terminal. The CLI's parsers and commands for them are here too, so
``cli.py`` only registers them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from relay_notebook import inputs
from relay_notebook.errors import InvalidInputError
from relay_notebook.history.lineage import LineageNode, diff_runs, lineage, lineage_text
from relay_notebook.runner import RunHandle
from relay_notebook.runner.crash import parse_crash_spec
from relay_notebook.runner.fork import create_fork, start_fork
from relay_notebook.runner.handle import EventCallback
from relay_notebook.workspace import Workspace

__all__ = [
    "add_parsers",
    "cli_commands",
    "diff",
    "diff_lines",
    "fork",
    "fork_queued",
    "lineage",
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
    from relay_notebook.commands import QueuedRun, require_pool_backend
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


# -- the command line ---------------------------------------------------------------------------


def add_parsers(sub: Any, *, notebook: bool = False) -> None:
    """``fork``, ``lineage`` and ``diff`` on the CLI's (or the magic's) subparsers."""
    p = sub.add_parser(
        "fork", help="a new run from a call of RUN: earlier calls copied, the rest run fresh"
    )
    p.add_argument("run_id", metavar="RUN", help="the run to fork, e.g. invoice-3")
    p.add_argument(
        "--from", dest="from_call", metavar="STEP[#N]", required=True,
        help="the first call that runs fresh (the N-th call of STEP, from 1)",
    )  # fmt: skip
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="JSON", help="the fork's input (default: RUN's)")
    src.add_argument("--input-file", metavar="FILE", help="read the fork's input from a file")
    p.add_argument(
        "--set", dest="sets", metavar="STEP#N=JSON", action="append", default=[],
        help="replace a copied call's output (repeatable)",
    )  # fmt: skip
    code = p.add_mutually_exclusive_group()
    code.add_argument("--release", metavar="REF", help="run a release's code")
    code.add_argument("--draft", action="store_true", help="run the current draft (after a fix)")
    p.add_argument("--crash", metavar="SPEC", help="crash the fork on purpose (as for run)")
    if not notebook:
        p.add_argument(
            "--queue", action="store_true",
            help="hand the fork to the worker pool (relay worker) instead of running it here",
        )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if notebook:
        p.add_argument("--wait", action="store_true", help="block until the attempt ends")
        p.add_argument("-o", "--output", metavar="VAR", help="bind the result to VAR")
    p = sub.add_parser("lineage", help="a run's forks as a tree")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="print the tree as JSON")
    p = sub.add_parser("diff", help="two runs compared call by call")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", action="store_true", help="print a JSON list")


def fork_arguments(args: argparse.Namespace, variables: dict[str, Any] | None = None) -> Any:
    """The keyword arguments of ``fork`` from parsed ``relay fork`` arguments."""
    given = args.input is not None or args.input_file is not None
    return {
        "from_call": args.from_call,
        "run_input": inputs.run_input(text=args.input, file=args.input_file, variables=variables)
        if given
        else None,
        "input_given": given,
        "sets": parse_sets(args.sets, variables),
        "release": args.release,
        "draft": args.draft,
        "crash": args.crash,
    }


def _tree_json(tree: LineageNode) -> dict[str, Any]:
    return tree.to_dict()


def cli_commands(
    report: Any, wait: Any, progress: EventCallback
) -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    """The CLI's handlers; ``report``, ``wait`` and ``progress`` are the CLI's own helpers."""

    def cmd_fork(ws: Workspace, args: argparse.Namespace) -> int:
        if getattr(args, "queue", False):
            queued = fork_queued(ws, args.run_id, **fork_arguments(args), backend=args.backend)
            if not args.json:
                print(f"run {queued.run_id}: forked from {args.run_id} at {args.from_call}; "
                      "queued, waiting for a worker", file=sys.stderr, flush=True)  # fmt: skip
            queued_code: int = report(queued.wait(), args.json)
            return queued_code
        handle = fork(ws, args.run_id, **fork_arguments(args), on_event=None if args.json
                      else progress)  # fmt: skip
        if not args.json:
            print(f"run {handle.run_id}: forked from {args.run_id} at {args.from_call}",
                  file=sys.stderr, flush=True)  # fmt: skip
        code: int = report(wait(handle), args.json)
        return code

    def cmd_lineage(ws: Workspace, args: argparse.Namespace) -> int:
        tree = lineage(ws, args.run_id)
        if args.json:
            print(json.dumps(_tree_json(tree), indent=2))
        else:
            print(lineage_text(tree))
        return 0

    def cmd_diff(ws: Workspace, args: argparse.Namespace) -> int:
        rows = diff(ws, args.run_a, args.run_b)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print("\n".join(diff_lines(rows, args.run_a, args.run_b)))
        return 0

    return {"fork": cmd_fork, "lineage": cmd_lineage, "diff": cmd_diff}
