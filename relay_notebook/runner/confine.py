"""Confinement: the child writes only where its write rules allow, without privileges.

Design note: the rules are a list of writable paths (``WriteRules.writable``) and nothing the
supervisor trusts lies beneath any of them, so one list serves bubblewrap (a read-only ``/``
with those paths bound writable) and, later, Landlock (write access granted beneath those
paths only). Writable: the relay's ``execution/`` area, the DBOS folder, the attempt's own
``child/`` folder (outcome, result, private tmp), the ledger and the call journal (files: their
content, never the name). Read-only: ``run.json``, the run lock, the attempt's spec and logs,
the trace and everything outside the run folder; the workspace's vault is hidden.

Under bubblewrap the child also runs with no capabilities (``--cap-drop ALL``, so root inside
cannot remount ``/``), in its own user namespace where the kernel allows one and its own PID
namespace (it cannot see or signal the supervisor, and nothing of the attempt outlives
bwrap's init). The supervisor starts bwrap in a new session (``start_new_session``): the child
has no controlling terminal, which is what ``--new-session`` would give, while the attempt
stays one process group the supervisor can signal and wait for.

``confined`` is never assumed: the child checks its own confinement at start, before the
relay is imported (``verify_confinement``), and reports on a pipe it then closes, so relay
code cannot forge the report. Without bwrap, or with the workspace's ``confine`` setting off
(``RELAY_CONFINE=0`` at a boundary), the run goes on unconfined and says why.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay_notebook.runner.sandbox import sandbox_uid

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder

__all__ = [
    "Confinement",
    "UnconfinedWarning",
    "WriteRules",
    "attempt_write_rules",
    "bubblewrap_problem",
    "confine_command",
    "landlock_confinement",
    "verify_confinement",
]

_warned = False
TURNED_OFF = "turned off by the confine setting (RELAY_CONFINE=0, RelayMagics.confine = False)"
_DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}


class UnconfinedWarning(RuntimeWarning):
    """Runs go on without confinement (bubblewrap missing or unusable)."""


@dataclass(frozen=True)
class WriteRules:
    """Where one attempt's child may write; everything else it sees read-only.

    ``writable`` holds folders (write access to everything beneath) and existing files
    (their content only). ``protected`` are control files the child must find unwritable and
    ``sealed`` folders in which it must not be able to create files: both only feed the
    child's self-check, since no writable path contains them.
    """

    writable: tuple[Path, ...]
    hidden: tuple[Path, ...]
    protected: tuple[Path, ...]
    sealed: tuple[Path, ...]
    tmp_dir: Path
    cwd: Path

    def check(self) -> dict[str, Any]:
        """What the child verifies about itself (JSON, for the attempt spec)."""
        return {
            "protected": [str(p) for p in self.protected if p.exists()],
            "sealed": [str(p) for p in self.sealed],
            "host_pid_ns": _namespace("pid"),
            "host_user_ns": _namespace("user"),
            "host_net_ns": _namespace("net"),
            "expect_unprivileged": sandbox_uid() != 0,
        }


def attempt_write_rules(
    folder: RunFolder, attempt_dir: Path, hidden: Sequence[Path] = ()
) -> WriteRules:
    """The rules of one attempt of ``folder`` whose supervisor files are in ``attempt_dir``."""
    child = attempt_dir / "child"
    for path in (child / "tmp", folder.mcp_logs, folder.execution, folder.dbos_dir):
        path.mkdir(parents=True, exist_ok=True)
    # bound as files, so they must exist (with the modes their writers would give them)
    for path, mode in ((folder.events, 0o644), (folder.journal, 0o600)):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, mode))
    return WriteRules(
        writable=(
            folder.execution, folder.dbos_dir, child, folder.events, folder.journal,
            folder.mcp_logs,
        ),
        hidden=tuple(hidden),
        protected=(folder.meta, folder.lock, folder.trace, attempt_dir / "spec.json"),
        sealed=(folder.path, folder.ipc, attempt_dir),
        tmp_dir=child / "tmp",
        cwd=folder.execution,
    )  # fmt: skip


@dataclass(frozen=True)
class Confinement:
    """How an attempt is started: ``mechanism`` ``bwrap``, or ``None`` with the ``reason``."""

    mechanism: str | None
    reason: str | None = None
    check: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """The attempt's entry in run.json until the child has reported."""
        if self.mechanism is None:
            return {"confined": False, "confinement": {"mechanism": None, "reason": self.reason}}
        return {
            "confined": False,
            "confinement": {
                "mechanism": self.mechanism,
                "reason": "the child has not reported its confinement check",
            },
        }


def _namespace(kind: str) -> int | None:
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return None


@functools.cache
def _bwrap_flags(bwrap: str) -> tuple[str, ...] | None:
    """The isolation flags this bwrap and kernel accept, probed once per process."""
    for flags in (
        ("--unshare-user", "--unshare-pid", "--cap-drop", "ALL"),
        ("--unshare-pid", "--cap-drop", "ALL"),
    ):
        probe = [bwrap, *flags, "--ro-bind", "/", "/", "--proc", "/proc", "--", "true"]
        try:
            done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return flags
    return None


def bubblewrap_problem() -> str | None:
    """Why spawned children cannot run under bubblewrap here (``None``: they can)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed; install it with: apt-get install bubblewrap"
    if _bwrap_flags(bwrap) is None:
        return "bubblewrap cannot create a PID namespace here"
    return None


def _unconfined(reason: str, hint: str) -> Confinement:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            f"Relay runs are not confined: {reason}; {hint}", UnconfinedWarning, stacklevel=4
        )
    return Confinement(None, reason)


def confine_command(
    argv: Sequence[str], rules: WriteRules, *, enabled: bool = True
) -> tuple[list[str], Confinement]:
    """``argv`` wrapped in bwrap under ``rules`` when possible, and how it is confined.

    ``enabled=False`` is the workspace's ``confine`` setting turned off (``RELAY_CONFINE=0``
    at a boundary): the child runs as it is, and its attempt records why.
    """
    if not enabled:
        return list(argv), Confinement(None, TURNED_OFF)
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        reason = "bubblewrap (bwrap) is not installed"
        return list(argv), _unconfined(reason, "install it with: apt-get install bubblewrap")
    flags = _bwrap_flags(bwrap)
    if flags is None:
        reason = "bubblewrap cannot create a PID namespace here"
        hint = "allow namespaces for this user or container (see bwrap --unshare-pid)"
        return list(argv), _unconfined(reason, hint)
    rules.tmp_dir.mkdir(parents=True, exist_ok=True)
    cmd = [bwrap, *flags, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in rules.writable:
        cmd += ["--bind", str(path), str(path)]
    for path in rules.hidden:
        if path.is_dir():
            cmd += ["--tmpfs", str(path)]
    cmd += [
        "--setenv", "TMPDIR", str(rules.tmp_dir),
        "--chdir", str(rules.cwd),
        "--die-with-parent",
    ]  # fmt: skip
    return [*cmd, "--", *argv], Confinement("bwrap", check={**rules.check(), "mechanism": "bwrap"})


def landlock_confinement(rules: WriteRules, abi: int) -> Confinement:
    """How a child forked by the warm parent is confined: Landlock ABI ``abi``, under
    ``rules``, in its own PID and mount namespaces (see ``runner.warm_parent``)."""
    rules.tmp_dir.mkdir(parents=True, exist_ok=True)
    return Confinement("landlock", check={**rules.check(), "mechanism": "landlock", "abi": abi})


def _capabilities() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return None


def _writable_file(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)  # no O_TRUNC: the file stays intact
    except OSError as exc:
        return exc.errno not in _DENIED and exc.errno != errno.ENOENT
    os.close(fd)
    return True


def _creatable_in(folder: str) -> bool:
    probe = os.path.join(folder, f".relay-confinement-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        return exc.errno not in _DENIED
    os.close(fd)
    os.unlink(probe)
    return True


def _host_uid() -> int | None:
    """The uid outside every user namespace that our uid maps to."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            inside, outside, _ = fh.readline().split()
    except (OSError, ValueError):
        return None
    return int(outside) + os.getuid() - int(inside)


def verify_confinement(check: dict[str, Any]) -> dict[str, Any]:
    """The child's own view of its confinement: ``confined`` and, if not, the ``reason``."""
    problems = []
    caps = _capabilities()
    if caps != 0:
        shown = "unknown" if caps is None else f"{caps:016x}"
        problems.append(f"the child holds capabilities (CapEff {shown})")
    problems += [f"{p} is writable" for p in check.get("protected", []) if _writable_file(p)]
    problems += [
        f"files can be created in {d}" for d in check.get("sealed", []) if _creatable_in(d)
    ]
    pid_ns = _namespace("pid")
    if pid_ns is None or pid_ns == check.get("host_pid_ns"):
        problems.append("the child shares the supervisor's PID namespace")
    user_ns = _namespace("user")
    mechanism = check.get("mechanism", "bwrap")
    extra: dict[str, Any] = {}
    if mechanism != "bwrap":  # the sandbox's own promises (runner.sandbox)
        host_uid = _host_uid()
        extra = {"landlock_abi": check.get("abi"), "host_uid": host_uid}
        if host_uid == 0 and check.get("expect_unprivileged"):
            problems.append("the relay runs as root outside its user namespace")
        net_ns = _namespace("net")
        extra["network_namespace"] = net_ns is not None and net_ns != check.get("host_net_ns")
        if not extra["network_namespace"]:
            problems.append("the child shares the host's network namespace")
    return {
        **extra,
        "confined": not problems,
        "mechanism": mechanism,
        "reason": "; ".join(problems) or None,
        "capabilities": caps,
        "pid_namespace": pid_ns != check.get("host_pid_ns"),
        "user_namespace": user_ns is not None and user_ns != check.get("host_user_ns"),
    }
