"""The ``relay`` command in tests: the installed console script, run as a terminal runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def relay_command(home: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``relay --home HOME ARGS...`` run to its end: its exit code and captured output."""
    relay = Path(sys.executable).with_name("relay")
    return subprocess.run(
        [str(relay), "--home", str(home), *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
