"""``relay files RUN [CALL]`` and ``%relay files``: the run's ``execution/`` folder, per call."""

from __future__ import annotations

from typing import Any

from relay_notebook.history.run_files import FilePreview, RunFiles, run_file, run_files
from relay_notebook.views.run_files import FilesView, files_lines
from relay_notebook.workspace import Workspace

__all__ = [
    "RunFiles",
    "files_document",
    "files_lines",
    "files_view",
    "logs_files",
    "run_file",
    "run_files",
]

#: the most files one notebook view previews (the rest are listed, without a preview)
PREVIEWED_FILES = 40


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


def files_document(files: RunFiles, call: str | None = None) -> dict[str, Any]:
    """``relay files RUN [CALL] --json``: the whole tree, or only ``call``'s folder (an unknown
    call is refused with its code, even on a run with no call folder)."""
    doc = files.to_dict()
    if call:
        chosen = files.call(call)
        doc["calls"] = [c for c in doc["calls"] if c["folder"] == chosen.folder]
        doc["files"] = []
    return doc
