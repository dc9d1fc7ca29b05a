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

from relay_notebook.errors import InvalidSourceError

__all__ = [
    "decode_source",
    "read_source",
    "unique_temporary",
    "write_bytes_atomic",
    "write_json_atomic",
]


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


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half."""
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(path, text.encode())


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
