"""Storage failures as coded errors: a full disk and a read-only file system, however they
surface (an ``OSError``, SQLite's "database or disk is full", PostgreSQL's ``disk_full``).

Every surface asks ``storage_error`` before it reports an unexpected exception as a bug, so a
full disk is ``[disk-full]`` and a read-only workspace ``[workspace-read-only]`` from every
command, naming the folder.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

from relay_notebook.errors import DiskFullError, RelayError, WorkspaceReadOnlyError

__all__ = ["is_disk_full", "storage_error"]

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL, _SQLITE_READONLY = 13, 8  # result codes (the low byte of an extended code)
_POSTGRES_DISK_FULL = "53100"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what it wraps (SQLAlchemy's ``orig``) and what caused it, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        for nxt in (getattr(e, "orig", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def _kind(exc: BaseException) -> tuple[str, str | None] | None:
    """``("full" | "read-only", the file named)`` for a storage failure, else ``None``."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS | {errno.EROFS}:
            named = e.filename if isinstance(e.filename, str) else None
            return ("read-only" if e.errno == errno.EROFS else "full"), named
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in (_SQLITE_FULL, _SQLITE_READONLY):
            return ("full" if code & 0xFF == _SQLITE_FULL else "read-only"), None
        if "database or disk is full" in str(e) and type(e).__name__ == "OperationalError":
            return "full", None
        if getattr(e, "sqlstate", None) == _POSTGRES_DISK_FULL:
            return "full", None
    return None


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the disk is full."""
    kind = _kind(exc)
    return kind is not None and kind[0] == "full"


def storage_error(
    exc: BaseException, folder: Path | str | None = None, doing: str | None = None
) -> RelayError | None:
    """The coded error for a full disk or a read-only file system under ``exc``, else ``None``.

    ``folder`` is named when the failure names no file (a write's ``flush``, SQLite);
    ``doing`` says what could not be finished (``"saving relay invoice"``).
    """
    kind = _kind(exc)
    if kind is None:
        return None
    what, named = kind
    where = str(Path(named).parent) if named else str(folder) if folder else "the workspace"
    task = f" while {doing}" if doing else ""
    if what == "full":
        return DiskFullError(
            f"The disk holding {where} is full{task}: nothing more could be written there. "
            f"Free space there (df -h {where}), then run the command again."
        )
    return WorkspaceReadOnlyError(
        f"The workspace at {where} is on a read-only file system{task}: nothing could be "
        f"written there. Remount it read-write, or point --home (RELAY_HOME) at a folder you "
        f"can write."
    )
