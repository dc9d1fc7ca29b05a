"""A spawned attempt's way into its sandbox: enter it, confine the relay's process, exec the child.

Design note: the same sandbox as a forked attempt's (``runner.sandbox``), for an attempt that is
spawned (``RELAY_WARM_START=0``, or no warm parent): the supervisor starts
``python -m relay_notebook.runner.sandbox_exec PLAN SPEC`` in place of the child, with the
child's descriptors. This process becomes the group leader, its grandchild drops every
capability, enters Landlock where the kernel has it, and execs the child program, which reads
its spec as a spawned child always did. ``--probe`` answers whether the sandbox can be made
here (the supervisor asks once per process, in a process of its own: forking a threaded
supervisor to find out would not be safe).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from relay_notebook.runner.sandbox import FAILED, die_with_parent, enter_sandbox, probe_namespaces

__all__ = ["main"]

CHILD_MODULE = "relay_notebook.runner.child"


def _probe() -> NoReturn:
    from relay_notebook.runner.landlock import abi_version

    pid = os.fork()
    if pid == 0:
        try:
            probe_namespaces()
        except BaseException as exc:
            print(str(exc)[:300], file=sys.stderr)
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    ok = os.waitstatus_to_exitcode(status) == 0
    print(json.dumps({"namespaces": ok, "landlock": abi_version()}))
    sys.exit(0 if ok else 1)


def main(plan_path: str, spec_path: str) -> NoReturn:
    """Enter the sandbox ``plan_path`` describes, then run the child on ``spec_path``."""
    parent = os.getppid()
    die_with_parent()  # as bubblewrap's --die-with-parent: a supervisor killed takes us along
    if os.getppid() != parent:
        os._exit(FAILED)
    try:  # (the supervisor started us in a session of our own: the attempt's process group)
        plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # they reach the relay's process directly
        status_w, net_ready = enter_sandbox(plan)
        os.close(status_w)  # in the relay's process from here on
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        from relay_notebook.runner.landlock import drop_privileges, restrict_writes

        drop_privileges()
        abi = int(plan.get("abi", 0))
        if abi > 0:
            writable = [Path(p) for p in (*plan["writable"], "/dev/shm", "/tmp")]
            restrict_writes(writable, abi)
        if net_ready is not None:  # at the number the spec names (see launch_attempt)
            target = int(plan["net_fd"])
            if net_ready == target:
                os.set_inheritable(target, True)  # (dup2 onto itself would leave it close-on-exec)
            else:
                os.dup2(net_ready, target, inheritable=True)
                os.close(net_ready)
        os.chdir(plan["cwd"])
        os.execv(sys.executable, [sys.executable, "-m", CHILD_MODULE, spec_path])
    except BaseException:
        traceback.print_exc()
        os._exit(FAILED)


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        _probe()
    main(sys.argv[1], sys.argv[2])
