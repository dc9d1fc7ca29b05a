"""``relay doctor``: which start (warm or spawned) and confinement the next runs get, and why."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from relay_notebook.runner.confine import TURNED_OFF, bubblewrap_problem
from relay_notebook.runner.landlock import abi_version
from relay_notebook.runner.warm import warm_parent, warm_status

__all__ = ["StartReport", "start_report"]

WARM_OFF = (
    "turned off by the warm_start setting (RELAY_WARM_START=0, RelayMagics.warm_start = False)"
)
ONE_ATTEMPT = (
    "`relay run`, `recover`, `fork`, `send` and `wait` start a warm parent before their own "
    "imports and fork their attempt from it"
)


@dataclass(frozen=True)
class StartReport:
    """How this process starts and confines its next attempts."""

    start: str  # "warm" or "spawned"
    start_reason: str
    confinement: str  # "Landlock ABI N", "bubblewrap" or "none"
    confinement_reason: str

    def lines(self) -> list[str]:
        return [
            f"start: {self.start} ({self.start_reason})",
            f"confinement: {self.confinement} ({self.confinement_reason})",
        ]

    def to_dict(self) -> dict[str, str]:
        return {
            "start": self.start,
            "start_reason": self.start_reason,
            "confinement": self.confinement,
            "confinement_reason": self.confinement_reason,
        }


def _bubblewrap() -> tuple[str, str]:
    problem = bubblewrap_problem()
    if problem is not None:
        return "none", problem
    return "bubblewrap", f"{shutil.which('bwrap')}, spawned children"


def start_report(*, confine: bool, warm_start: bool, one_attempt: bool = False) -> StartReport:
    """What the next attempt started from this process gets (``one_attempt``: the CLI, whose
    awaited warm parent, started as ``relay run``'s is, is waited for and asked)."""
    if one_attempt and warm_start:
        warm_parent()  # waits for an awaited parent as a `relay run` attempt does
    status = warm_status(warm_start)
    if status.state == "off":
        start, why = "spawned", WARM_OFF
    elif status.state == "ready":
        start = "warm"
        if one_attempt:
            why = f"{ONE_ATTEMPT}; the one started here was ready in {status.ready_s or 0:.2f} s"
        else:
            why = f"forked from this process's warm parent, pid {status.pid}"
    elif status.state == "not started":
        start = "spawned"
        why = "this process's first attempt is spawned; its warm parent starts after it"
    elif status.state == "starting":
        start, why = "spawned", f"the warm parent (pid {status.pid}) is still importing"
    elif one_attempt:
        start = "spawned"
        why = f"the warm parent `relay run` starts is {status.state} here"
        if status.returncode is not None:
            why += f" (it exited with status {status.returncode} before it could fork)"
    else:
        start = "spawned"
        why = (
            f"the warm parent is {status.state} (a kit file or the interpreter changed, or it "
            f"died); a new one starts after the next attempt"
        )
    if not confine:
        return StartReport(start, why, "none", TURNED_OFF)
    abi = status.landlock or abi_version()
    if start == "warm":
        if status.namespaces and abi >= 1:
            where = "forked children, in their own PID and mount namespaces"
            return StartReport(start, why, f"Landlock ABI {abi}", where)
        start, why = "spawned", f"forked children cannot be confined here ({status.reason})"
    mechanism, mechanism_why = _bubblewrap()
    if abi == 0:
        mechanism_why += "; Landlock is absent from this kernel"
    return StartReport(start, why, mechanism, mechanism_why)
