"""``relay files RUN [CALL]`` and ``%relay files``: the run's ``execution/`` folder, per call."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from relay_notebook.history.files import FilePreview, RunFiles, run_file, run_files
from relay_notebook.views.files import FilesView, files_lines
from relay_notebook.workspace import Workspace

__all__ = ["add_parsers", "cli_commands", "files_view", "logs_files"]

#: the most files one notebook view previews (the rest are listed, without a preview)
PREVIEWED_FILES = 40


def add_parsers(sub: Any) -> None:
    """The ``files`` subcommand (the CLI's and the magics' shared parser)."""
    p = sub.add_parser("files", help="a run's execution/ folder: each agent call's files")
    p.add_argument("run_id", metavar="RUN", help="a run id, e.g. invoice-3")
    p.add_argument("call", metavar="CALL", nargs="?", help="only this call folder, e.g. call-2")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _selected(files: RunFiles, call: str | None) -> dict[str, Any]:
    doc = files.to_dict()
    if call:
        doc["calls"] = [c for c in doc["calls"] if c["folder"] == files.call(call).folder]
        doc["files"] = []
    return doc


def _cmd_files(ws: Workspace, args: argparse.Namespace) -> int:
    files = run_files(ws, args.run_id)
    if args.json:
        print(json.dumps(_selected(files, args.call), indent=2, sort_keys=True))
    else:
        print("\n".join(files_lines(files, "terminal", args.call)))
    return 0


def cli_commands() -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    return {"files": _cmd_files}


def logs_files(ws: Workspace, run_id: str) -> dict[str, Any]:
    """The ``files`` member of ``relay logs RUN --json``: each call folder and its files."""
    return run_files(ws, run_id).to_dict()


def files_view(ws: Workspace, run_id: str, call: str | None = None) -> FilesView:
    """``%relay files RUN [CALL]``: the tree with previews of (at most 40 of) its files."""
    files = run_files(ws, run_id)
    calls = [files.call(call)] if call else files.calls
    entries = [f for c in calls for f in c.files] + ([] if call else files.files)
    previews: dict[str, FilePreview] = {}
    for entry in entries[:PREVIEWED_FILES]:
        previews[entry.path] = run_file(ws, run_id, entry.path)
    return FilesView(files, previews, call)
