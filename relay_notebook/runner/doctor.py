"""``relay doctor``: which start (warm or spawned) and confinement the next runs get, and why."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

from relay_notebook.runner.confine import TURNED_OFF, bubblewrap_problem
from relay_notebook.runner.landlock import abi_version
from relay_notebook.runner.sandbox import sandbox_uid
from relay_notebook.runner.sandbox_plan import (
    SYSTEM_READS,
    pasta_available,
    python_reads,
    sandbox_probe,
)
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
    confinement: str  # "Landlock ABI N", "sandbox", "bubblewrap" or "none"
    confinement_reason: str
    #: what the sandbox grants and withholds, one line each (empty: no sandbox)
    sandbox: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [
            f"start: {self.start} ({self.start_reason})",
            f"confinement: {self.confinement} ({self.confinement_reason})",
            *(f"  {line}" for line in self.sandbox),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "start_reason": self.start_reason,
            "confinement": self.confinement,
            "confinement_reason": self.confinement_reason,
            "sandbox": list(self.sandbox),
        }


def sandbox_lines(abi: int) -> tuple[str, ...]:
    """The sandbox's allowlist and protections as this machine gives them (see
    ``runner.sandbox`` and ``runner.sandbox_plan``); an absent protection is named."""
    uid = sandbox_uid()
    who = (
        f"uid {uid} outside (no account), uid 0 inside without capabilities"
        if uid != os.geteuid()
        else f"uid {uid} outside (this user), without capabilities"
    )
    reads = ", ".join(p for p in SYSTEM_READS if os.path.lexists(p))
    python = ", ".join(python_reads())
    way_out = (
        "the outside through pasta; this machine's loopback only at endpoints the relay declares"
        " (network: allow:), the run's database, the workspace's model server"
        " and its url: MCP servers"
        if pasta_available()
        else "NOTHING beyond the sandbox's own loopback: pasta is not installed (apt-get "
        "install passt), so relays cannot reach model providers or APIs"
    )
    scoped = (
        f"Landlock ABI {abi}: writes only in the run's writable areas; no ptrace, signal or "
        f"abstract unix socket outside the sandbox"
        if abi >= 6
        else f"Landlock ABI {abi}: writes only in the run's writable areas; ABSENT: signal and "
        f"abstract-socket scoping (ABI 6)"
        if abi >= 1
        else "ABSENT: Landlock (writes are still limited by read-only mounts; ptrace of the "
        "sandbox's init is refused only by its being undumpable)"
    )
    return (
        f"identity: {who}",
        f"reads: {reads}; {python}; the relay's code, its run folder, the workspace's "
        f"mcp_servers.yaml and the files it names, the DBOS template; a private /tmp",
        "absent: everything else (home folders and /root but for the paths above, other "
        "workspaces and their vaults, other runs, Jupyter's runtime files)",
        f"network: its own namespace; {way_out}",
        scoped,
    )


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
            where = "forked children, in a sandbox of their own"
            return StartReport(start, why, f"Landlock ABI {abi}", where, sandbox_lines(abi))
        start, why = "spawned", f"forked children cannot be confined here ({status.reason})"
    probe = sandbox_probe()
    if probe is not None and probe.get("namespaces"):
        abi = int(probe.get("landlock", 0))
        where = "spawned children, in a sandbox of their own"
        return StartReport(start, why, "sandbox", where, sandbox_lines(abi))
    mechanism, mechanism_why = _bubblewrap()
    if abi == 0:
        mechanism_why += "; Landlock is absent from this kernel"
    return StartReport(start, why, mechanism, mechanism_why)
