"""What the benchmarks read of ``/proc``: each process's stat fields."""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["process_stats"]


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """Each process's pid and the fields of its ``/proc/PID/stat`` after the command name (the
    state first, then the parent, the process group...); one that ends meanwhile is left out."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        yield int(entry.name), fields
