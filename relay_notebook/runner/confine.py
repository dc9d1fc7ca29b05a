"""Confinement: the child sees the file system read-only except its run folder.

Design note: authored code may read its source and libraries but write only inside its run
folder. Where Debian's bubblewrap (``bwrap``) is installed, the child runs in a mount
namespace with ``/`` bound read-only, the run folder bound writable, a private temporary
directory inside the run folder, and the workspace's vault hidden behind an empty tmpfs.
``--die-with-parent`` ties the child to bwrap, and the supervisor signals the whole process
group, so a kill reaches the relay. Without bwrap the run goes on unconfined, with one
warning per process. ``RELAY_CONFINE=0`` turns confinement off on purpose.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

__all__ = ["UnconfinedWarning", "confine_command"]

_warned = False


class UnconfinedWarning(RuntimeWarning):
    """Runs go on without file-system confinement (bubblewrap missing)."""


def confine_command(
    argv: Sequence[str], *, run_dir: Path, tmp_dir: Path, hidden: Sequence[Path] = ()
) -> tuple[list[str], bool]:
    """``argv`` wrapped in bwrap when available; returns the command and whether it is confined."""
    global _warned
    if os.environ.get("RELAY_CONFINE", "1") == "0":
        return list(argv), False
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        if not _warned:
            _warned = True
            warnings.warn(
                "bubblewrap (bwrap) is not installed, so relay writes are not confined to their "
                "run folder; install it with: apt-get install bubblewrap",
                UnconfinedWarning,
                stacklevel=3,
            )
        return list(argv), False
    tmp_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--bind", str(run_dir), str(run_dir),
        "--setenv", "TMPDIR", str(tmp_dir),
        "--die-with-parent",
    ]  # fmt: skip
    for path in hidden:
        if path.is_dir():
            cmd += ["--tmpfs", str(path)]
    return [*cmd, "--", *argv], True
