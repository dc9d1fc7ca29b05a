"""The files view: a run's ``execution/`` tree, each call folder labelled, with previews.

``text/plain`` (the notebook's saved output, compared by nbval) holds names and labels only;
sizes and times vary from run to run, so they are in the HTML and the terminal's lines.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from relay_notebook.history.run_files import CallFolder, FileEntry, FilePreview, RunFiles

__all__ = ["FilesView", "files_lines", "size_text"]


def size_text(size: int) -> str:
    """``812 B``, ``3.4 KiB``, ``1.2 MiB``."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024 / 1024:.1f} MiB"


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""


def _folders(n: int) -> str:
    return f"{n} call folder{'' if n == 1 else 's'}"


def _call_note(call: CallFolder) -> str:
    notes = []
    if call.reused_in:
        notes.append("reused in attempt " + ", ".join(map(str, call.reused_in)))
    if not call.has_receipt:
        notes.append("no receipt: its attempt ended during the call, or it is still running")
    return f" ({'; '.join(notes)})" if notes else ""


def _name(entry: FileEntry, call: CallFolder | None) -> str:
    return entry.path.removeprefix(f"{call.folder}/") if call else entry.path


def files_lines(files: RunFiles, surface: str, only: str | None = None) -> list[str]:
    """The tree as lines; ``terminal`` adds sizes and times, ``notebook`` holds neither."""
    sized = surface == "terminal"
    calls = [files.call(only)] if only else files.calls
    lines = [f"run {files.run_id}: execution/ ({_folders(len(files.calls))})"]

    def file_line(entry: FileEntry, call: CallFolder | None, indent: str) -> str:
        extra = f"  {size_text(entry.size):>10}  {_when(entry.modified)}" if sized else ""
        return f"{indent}{_name(entry, call)}{extra}"

    for call in calls:
        lines.append(f"  {call.label}{_call_note(call)}")
        lines += [file_line(f, call, "    ") for f in call.files]
    if not only:
        if files.files:
            lines.append("  files the relay wrote:")
        lines += [file_line(f, None, "    ") for f in files.files]
    if not files.calls and not files.files:
        lines.append("  (empty)")
    return lines


def _preview_html(preview: FilePreview | None) -> str:
    if preview is None:
        return ""
    if preview.kind == "image":
        if preview.data is None:
            return f"<p><i>image of {size_text(preview.size)}: too large to show inline</i></p>"
        return (
            f"<img alt='{html.escape(preview.path)}' style='max-width:100%' "
            f"src='data:{preview.content_type};base64,{preview.data}'/>"
        )
    if preview.kind == "binary":
        return f"<p><i>binary ({html.escape(preview.content_type)}): no preview</i></p>"
    note = ""
    if preview.truncated:
        note = (
            f"<p><i>cut at {size_text(preview.limit)} of {size_text(preview.size)}; "
            f"the file is whole on disk</i></p>"
        )
    body = html.escape(preview.text or "")
    return f"<pre style='max-height:24em;overflow:auto'>{body}</pre>{note}"


@dataclass
class FilesView:
    """``%relay files RUN [CALL]``: the tree, then each file's preview under its name."""

    files: RunFiles
    previews: Mapping[str, FilePreview] = field(default_factory=dict)
    only: str | None = None

    def __repr__(self) -> str:
        return "\n".join(files_lines(self.files, "notebook", self.only))

    def _file_html(self, entry: FileEntry, call: CallFolder | None) -> str:
        name = html.escape(_name(entry, call))
        meta = f"{size_text(entry.size)} · {_when(entry.modified)}"
        preview = _preview_html(self.previews.get(entry.path))
        return (
            f"<details class='relay-file'><summary><code>{name}</code> "
            f"<span style='opacity:.7'>{meta}</span></summary>{preview}</details>"
        )

    def html(self) -> str:
        files = self.files
        calls = [files.call(self.only)] if self.only else files.calls
        parts = [
            f"<p><b>run {html.escape(files.run_id)}: execution/</b> "
            f"({_folders(len(files.calls))})</p>"
        ]
        for call in calls:
            when = f" · started {_when(call.started_at)}" if call.started_at else ""
            inner = "".join(self._file_html(f, call) for f in call.files)
            parts.append(
                f"<details class='relay-call-folder' open><summary><b>"
                f"{html.escape(call.label)}</b>{html.escape(_call_note(call) + when)}"
                f"</summary><div style='margin-left:1.5em'>{inner}</div></details>"
            )
        if not self.only and files.files:
            inner = "".join(self._file_html(f, None) for f in files.files)
            parts.append(
                f"<details class='relay-loose-files' open><summary><b>files the relay wrote</b>"
                f"</summary><div style='margin-left:1.5em'>{inner}</div></details>"
            )
        return f"<div class='relay-files'>{''.join(parts)}</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": repr(self), "text/html": self.html()}
