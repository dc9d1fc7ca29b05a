"""Real file systems for tests: a small tmpfs (a disk that fills), remounted read-only."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "16m") -> Iterator[Path]:
    """A fresh tmpfs of ``size`` mounted on ``where``; the test is skipped, saying why, where
    this process may not mount one (not root, no CAP_SYS_ADMIN, no ``mount``)."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        proc = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs for a real full disk: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a real full disk: {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def read_only(where: Path, on: bool) -> None:
    """Remount the tmpfs on ``where`` read-only (``on``) or read-write again (chmod does not
    stop root; a read-only mount does)."""
    mode = "ro" if on else "rw"
    proc = _mount("-o", f"remount,{mode}", str(where))
    if proc.returncode != 0:
        pytest.skip(f"cannot remount {where} {mode}: {proc.stderr.strip()}")


def free_bytes(where: Path) -> int:
    st = os.statvfs(where)
    return st.f_bfree * st.f_frsize


def fill(where: Path, leave: int = 0, name: str = "filler") -> Path:
    """Fill the disk of ``where`` until ``leave`` bytes are free (0: full); the filler file."""
    path = where / name
    with open(path, "ab", buffering=0) as fh:
        chunk = b"\0" * (1 << 20)
        while (room := free_bytes(where) - leave) > 0:
            try:
                fh.write(chunk[: min(len(chunk), room)])
                fh.flush()
            except OSError:
                break
    return path
