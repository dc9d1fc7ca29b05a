"""The files of a run's ``execution/`` folder: each agent call's folder, labelled, and previews.

Design note: every path a user, the CLI or the REST API names is resolved here and only here,
and must land inside the run's ``execution/`` folder after symlinks are followed, so no
surface can be led to the run's control files (``run.json``, the journal, the DBOS store) or
anywhere else. Previews are capped and scrubbed of the workspace's vault secrets; the files
themselves are never changed.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentworks._runtime import CALL_MARKER
from agentworks.redact import Redactor
from relay_notebook.errors import RunFileNotFoundError, RunFileRefusedError
from relay_notebook.history.log_records import Receipt
from relay_notebook.history.receipts import split_key
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

__all__ = [
    "IMAGE_LIMIT",
    "PREVIEW_LIMIT",
    "CallFolder",
    "FileEntry",
    "FilePreview",
    "RunFiles",
    "list_run_files",
    "read_run_file",
    "resolve_run_file",
    "run_file",
    "run_files",
]

#: bytes of a text file shown in a preview; the rest is cut with a note
PREVIEW_LIMIT = 64 * 1024
#: the largest image shown inline
IMAGE_LIMIT = 2 * 1024 * 1024
_CALL = re.compile(r"call-([0-9]+)")
_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
#: names the kit uses for its own files; never listed or served
_CONTROL = re.compile(r"^\.relay|^\..*\.tmp$")


@dataclass(frozen=True)
class FileEntry:
    """One file: its path inside ``execution/`` (POSIX), size in bytes and modification time."""

    path: str
    size: int
    modified: float


@dataclass(frozen=True)
class CallFolder:
    """One agent call's ``execution/call-N/`` folder, labelled by the call that made it."""

    folder: str
    number: int
    agent: str | None
    attempt: int | None
    key: str | None
    step_id: int | None
    step: str | None
    call: int | None
    state: str | None
    reused_in: list[int]
    started_at: float | None
    #: False while the call runs, or when its attempt ended during the call
    has_receipt: bool = False
    files: list[FileEntry] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``call-2 · agent clerk · step 1 extract (call 1) · attempt 2``."""
        parts = [self.folder, f"agent {self.agent or '?'}"]
        if self.step_id is not None:
            step = f"step {self.step_id}" + (f" {self.step}" if self.step else "")
            parts.append(step + (f" (call {self.call})" if self.call else ""))
        if self.attempt is not None:
            parts.append(f"attempt {self.attempt}")
        return " · ".join(parts)


@dataclass(frozen=True)
class RunFiles:
    """Everything in one run's ``execution/``: call folders in order, then the other files."""

    run_id: str
    root: str
    calls: list[CallFolder]
    files: list[FileEntry]

    def call(self, which: str) -> CallFolder:
        """The call folder ``call-2`` (or ``2``); ``RunFileNotFoundError`` lists the others."""
        name = which if which.startswith("call-") else f"call-{which}"
        for c in self.calls:
            if c.folder == name:
                return c
        have = ", ".join(c.folder for c in self.calls) or "none"
        raise RunFileNotFoundError(
            f"Run {self.run_id} has no call folder {which!r} (it has: {have}). List them with: "
            f"relay files {self.run_id}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "root": self.root,
            "calls": [{**asdict(c), "label": c.label} for c in self.calls],
            "files": [asdict(f) for f in self.files],
        }


@dataclass(frozen=True)
class FilePreview:
    """One file as a surface shows it: ``kind`` is ``text``, ``json``, ``image`` or ``binary``;
    ``text`` is scrubbed and cut at ``PREVIEW_LIMIT`` (``truncated``), ``data`` an image's
    base64."""

    path: str
    size: int
    modified: float
    content_type: str
    kind: str
    text: str | None = None
    data: str | None = None
    truncated: bool = False
    limit: int = PREVIEW_LIMIT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _entry(path: Path, root: Path) -> FileEntry:
    st = path.stat()
    return FileEntry(path.relative_to(root).as_posix(), st.st_size, st.st_mtime)


def _walk(folder: Path, root: Path, real_root: Path) -> list[FileEntry]:
    """Regular files under ``folder`` (symlinks followed only while they stay inside)."""
    found: list[FileEntry] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if not _CONTROL.match(d) and _inside(here / d, real_root)
        )
        for name in sorted(filenames):
            path = here / name
            if _CONTROL.match(name) or not _inside(path, real_root) or not path.is_file():
                continue
            found.append(_entry(path, root))
    return found


def _inside(path: Path, real_root: Path) -> bool:
    return path.resolve().is_relative_to(real_root)


def _marker(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / CALL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a folder made before markers existed, or a damaged marker
    return data if isinstance(data, dict) else {}


def list_run_files(
    folder: RunFolder,
    receipts: Sequence[Receipt],
    steps: dict[tuple[str, int], tuple[str, list[int]]] | None = None,
) -> RunFiles:
    """The run's call folders labelled from their markers, the run's receipts and its steps
    (``(workflow_id, function_id)`` → step name and the attempts that reused it)."""
    root = folder.execution
    real_root = root.resolve() if root.exists() else root
    by_dir = {r.call_dir: r for r in receipts if r.call_dir}
    by_key = {r.key: r for r in receipts if r.key}
    calls: list[CallFolder] = []
    loose: list[FileEntry] = []
    if not root.is_dir():
        return RunFiles(folder.run_id, str(root), [], [])
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if _CONTROL.match(child.name) or not _inside(child, real_root):
            continue
        match = _CALL.fullmatch(child.name)
        if match is None or not child.is_dir():
            loose += [_entry(child, root)] if child.is_file() else _walk(child, root, real_root)
            continue
        marker = _marker(child)
        direct = by_dir.get(child.name)  # the receipt event that names this folder
        receipt = direct or by_key.get(str(marker.get("key")))
        key = marker.get("key") or (receipt.key if receipt else None)
        workflow_id, step_id, n, _ = split_key(str(key)) if key else (None, None, None, None)
        attempt = marker.get("attempt", direct.attempt if direct else None)
        step, step_reused = (steps or {}).get((str(workflow_id), step_id or 0), (None, []))
        reused = set(direct.reused_in) | set(step_reused) if direct else set()
        calls.append(
            CallFolder(
                folder=child.name,
                number=int(match.group(1)),
                agent=marker.get("agent") or (receipt.name if receipt else None),
                attempt=attempt,
                key=key,
                step_id=step_id,
                step=step,
                call=n,
                state=direct.state if direct else None,
                reused_in=sorted(reused),
                started_at=marker.get("started_at"),
                has_receipt=(child / "receipt.json").is_file(),
                files=_walk(child, root, real_root),
            )
        )
    calls.sort(key=lambda c: c.number)
    return RunFiles(folder.run_id, str(root), calls, loose)


def resolve_run_file(folder: RunFolder, path: str) -> Path:
    """The file ``path`` names inside the run's ``execution/``, or a coded refusal."""
    refused = RunFileRefusedError(
        f"Run {folder.run_id}: {path[:200]!r} is not a path inside its execution/ folder. "
        f"Name a file as relay files {folder.run_id} lists it, e.g. call-1/receipt.json"
    )
    pure = PurePosixPath(path)
    if (
        not path
        or "\x00" in path
        or "\\" in path
        or pure.is_absolute()
        or re.match(r"^[A-Za-z]:", path)
        or any(part in ("..", ".") for part in path.split("/"))
        or any(_CONTROL.match(part) for part in pure.parts)
    ):
        raise refused
    root = folder.execution.resolve()
    target = folder.execution.joinpath(*pure.parts)
    if not _inside(target, root):
        raise refused  # a symlink (at any level) that leads out of execution/
    if not target.is_file():
        raise RunFileNotFoundError(
            f"Run {folder.run_id} has no file {path[:200]!r} in its execution/ folder. List "
            f"its files with: relay files {folder.run_id}"
        )
    return target


def read_run_file(
    folder: RunFolder, path: str, redactor: Redactor | None, limit: int = PREVIEW_LIMIT
) -> FilePreview:
    """A capped, scrubbed preview of one file of the run's ``execution/``."""
    target = resolve_run_file(folder, path)
    st = target.stat()
    content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"

    def preview(kind: str, text: str | None = None, **more: Any) -> FilePreview:
        return FilePreview(
            path, st.st_size, st.st_mtime, content_type, kind, text, limit=limit, **more
        )

    if content_type in _IMAGES:
        if st.st_size > IMAGE_LIMIT:
            return preview("image", truncated=True)
        data = base64.b64encode(target.read_bytes()).decode("ascii")
        return preview("image", data=data)
    with target.open("rb") as fh:
        head = fh.read(limit + 1)
    truncated = len(head) > limit
    head = head[:limit]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not truncated or exc.start < len(head) - 3:  # not just a character cut in two
            return preview("binary")
        text = head[: exc.start].decode("utf-8")
    if content_type == "application/octet-stream":
        content_type = "text/plain"
    kind = "text"
    if target.suffix == ".json" and not truncated:
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            kind = "json"
        except ValueError:
            pass  # not JSON after all: shown as it is
    if redactor:
        text = redactor.scrub(text)
    return preview(kind, text, truncated=truncated)


def run_files(workspace: Workspace, run_id: str) -> RunFiles:
    """``relay files RUN``: the run's ``execution/`` with every call folder labelled."""
    from relay_notebook.history.records import read_run_log

    log = read_run_log(workspace, run_id)
    steps = {(s.workflow_id, s.function_id): (s.name, list(s.reused_in)) for s in log.all_steps()}
    return list_run_files(find_run(workspace, run_id), log.receipts, steps)


def run_file(workspace: Workspace, run_id: str, path: str) -> FilePreview:
    """One file of the run's ``execution/``, previewed with the vault's secrets scrubbed."""
    secrets = Vault(workspace.home).values()
    redactor = Redactor(secrets, encoded=True) if secrets else None  # encoded: old runs too
    return read_run_file(find_run(workspace, run_id), path, redactor)
