"""Files the kit writes whole: atomic replacement under a temporary name unique to the writer."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tokenize
import uuid
from pathlib import Path
from typing import Any

from relay_notebook.errors import DiskFullError, InvalidSourceError

__all__ = [
    "MIN_FREE_BYTES",
    "decode_source",
    "free_bytes",
    "read_source",
    "require_free_space",
    "unique_temporary",
    "write_bytes_atomic",
    "write_json_atomic",
]


#: the least free space an attempt starts with: its run.json, ledger, trace and first
#: checkpoints (a run's SQLite database alone starts at a few hundred KiB)
MIN_FREE_BYTES = 1024 * 1024


def free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write on ``folder``'s file system (``None``: unknown)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_blocks == 0:  # a file system that reports no sizes (some FUSE ones): unknown
        return None
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail  # root may use the reserve
    return blocks * st.f_frsize


def require_free_space(folder: Path, doing: str, need: int = MIN_FREE_BYTES) -> None:
    """``DiskFullError`` before ``doing`` if ``folder``'s disk has less than ``need`` free:
    refused at the start rather than stopped half way."""
    free = free_bytes(folder)
    if free is not None and free < need:
        raise DiskFullError(
            f"The disk holding {folder} is full: {free // 1024:,} KiB free, and {doing} needs "
            f"at least {need // 1024:,} KiB. Nothing was started. Free space there "
            f"(df -h {folder}), then run the command again."
        )


def unique_temporary(path: Path) -> tuple[Path, int]:
    """A new temporary file next to ``path``, named for this writer alone: ``(path, fd)``.

    Two processes (or threads) saving one file at once each replace it whole; with one shared
    temporary name they would write into each other's file and one could publish it empty.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")
    return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)


def write_bytes_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` so that a crash or a concurrent writer never leaves half a file."""
    tmp, fd = unique_temporary(path)
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_json_atomic(path: Path, data: Any, *, sync: bool = True) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half
    (``sync``: on disk before the name points at it, so a machine crash does not empty it)."""
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(path, text.encode(), sync=sync)


def decode_source(data: bytes, where: str) -> str:
    """Python source bytes as text, decoded the way ``import`` decodes them: a UTF-8 BOM or a
    ``# -*- coding: ... -*-`` line is honoured; ``InvalidSourceError`` says why not."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except SyntaxError as exc:  # not UTF-8 and no (or an unknown) coding declaration
        raise InvalidSourceError(
            f"Cannot read {where} as Python source ({exc.msg}). Save it as UTF-8, or declare "
            f"its encoding on the first line (# -*- coding: latin-1 -*-)."
        ) from None
    except (UnicodeDecodeError, LookupError) as exc:
        at = f" (byte {exc.start})" if isinstance(exc, UnicodeDecodeError) else ""
        raise InvalidSourceError(
            f"Cannot read {where}: it is not {encoding} text{at}. Save it as UTF-8, or declare "
            f"its encoding on the first line (# -*- coding: latin-1 -*-)."
        ) from None
    return text.removeprefix("\ufeff")


def read_source(path: Path) -> str:
    """The text of the Python file ``path`` (see ``decode_source``)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidSourceError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    return decode_source(data, str(path))
