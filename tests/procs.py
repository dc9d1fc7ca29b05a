"""Processes read from ``/proc``, for tests that look at what an attempt started or left behind."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state first), or ``None``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def parent_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[1]) if fields else None


def alive(pid: int | None) -> bool:
    """Whether ``pid`` still runs (a zombie has let go of everything)."""
    fields = stat_fields(pid) if pid is not None else None
    return fields is not None and fields[0] != "Z"


def command(pid: int) -> bytes:
    """``pid``'s command line, its arguments NUL-separated (empty once it is gone)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def name_of(pid: int) -> str:
    """``pid``'s name as ``top`` and ``ps -o comm`` show it (empty once it is gone)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return ""


def children_of(pid: int) -> set[int]:
    """``pid``'s children, zombies included."""
    return {p for p in _pids() if parent_of(p) == pid}


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, nearest first."""
    parents = {p: parent_of(p) for p in _pids()}
    found, frontier = [], [pid]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
