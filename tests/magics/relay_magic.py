"""One ``%relay`` (or ``%%relay``) call on a test's shell, its printed output captured."""

from __future__ import annotations

from typing import Any

from IPython.utils.capture import capture_output

__all__ = ["magic"]


def magic(ip: Any, line: str, cell: str | None = None) -> Any:
    """``%relay LINE`` (``%%relay LINE`` over ``cell`` when given) on ``ip``; what it printed
    is kept as ``ip.last_stdout``."""
    with capture_output() as out:
        result = (
            ip.run_cell_magic("relay", line, cell)
            if cell is not None
            else ip.run_line_magic("relay", line)
        )
    ip.last_stdout = out.stdout
    return result
