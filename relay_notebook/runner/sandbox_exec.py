"""A spawned attempt's way into its sandbox: enter it, confine the relay's process, run the child.

Design note: the same sandbox as a forked attempt's (``runner.sandbox``), for an attempt that is
spawned (``RELAY_WARM_START=0``, or no warm parent): the supervisor starts
``python -m relay_notebook.runner.sandbox_exec PLAN SPEC`` in place of the child, with the
child's descriptors. This process becomes the group leader, its grandchild drops every
capability, enters Landlock where the kernel has it, and runs the child program in the same
interpreter, as a forked attempt does (``runner.warm_parent``), not by exec: a second
interpreter's start was 25 ms of every spawned attempt. ``--probe`` answers whether the
sandbox can be made here (the supervisor asks once per process, in a process of its own:
forking a threaded supervisor to find out would not be safe).

Until the child's imports start, this process imports only what it uses, and modules written
in C where the Python one would import ``enum`` or ``re`` first (``signal``, ``json``): that
was 60 ms of start-up per spawned attempt, in the supervisor's view before the sandbox exists.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import os
import sys

from relay_notebook._lazy import TYPE_CHECKING
from relay_notebook.runner.sandbox import (
    FAILED,
    die_with_parent,
    enter_sandbox,
    name_process,
    probe_namespaces,
)

if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["main", "read_plan"]

_SIGNALS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


class _Decoding:
    """What ``_json``'s scanner asks of a decoder: ``json.loads``'s defaults."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int, parse_constant = float, int, float


def read_plan(path: str) -> dict[str, Any]:
    """The plan the supervisor wrote (JSON), read by the C scanner ``json`` itself uses."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    plan: object = None
    try:
        from _json import make_scanner

        plan, end = make_scanner(_Decoding())(text, 0)  # type: ignore[arg-type]
    except (ImportError, StopIteration, ValueError):
        end = -1
    if end != len(text) or not isinstance(plan, dict):
        import json  # (an interpreter without ``_json``, or a plan not as written: its error)

        plan = json.loads(text)
    if not isinstance(plan, dict):
        raise ValueError(f"the sandbox plan {path} is not a JSON object")
    return plan


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
    import json  # (asked once per supervisor: not on an attempt's path)

    print(json.dumps({"namespaces": ok, "landlock": abi_version()}))
    sys.exit(0 if ok else 1)


def main(plan_path: str, spec_path: str) -> None:
    """Enter the sandbox ``plan_path`` describes, then run the child on ``spec_path``."""
    name_process("relay-leader")
    parent = os.getppid()
    # a supervisor killed while we start takes us along; entering the sandbox changes our
    # credentials, which clears this, and from then on the attempt finishes alone if its
    # supervisor dies, as a forked one does (runner.warm_parent): the next recovery settles it
    die_with_parent()
    if os.getppid() != parent:
        os._exit(FAILED)
    try:  # (the supervisor started us in a session of our own: the attempt's process group)
        plan = read_plan(plan_path)
        for sig in _SIGNALS:
            _signal.signal(sig, _signal.SIG_IGN)  # they reach the relay's process directly
        status_w, net_ready = enter_sandbox(plan)
        os.close(status_w)  # in the relay's process from here on
        for sig in _SIGNALS:
            _signal.signal(sig, _signal.SIG_DFL)
        from relay_notebook.runner.landlock import drop_privileges, restrict_writes

        drop_privileges()
        abi = int(plan.get("abi", 0))
        if abi > 0:
            restrict_writes([*plan["writable"], "/dev/shm", "/tmp"], abi)
        if net_ready is not None:  # at the number the spec names (see launch_attempt)
            target = int(plan["net_fd"])
            if net_ready == target:
                os.set_inheritable(target, True)  # (dup2 onto itself would leave it close-on-exec)
            else:
                os.dup2(net_ready, target, inheritable=True)
                os.close(net_ready)
        os.chdir(plan["cwd"])
    except BaseException:
        import traceback  # (here only: see the imports)

        traceback.print_exc()
        os._exit(FAILED)
    _run_child(spec_path)


def _run_child(spec_path: str) -> None:
    """The child program, in the relay's process, as ``python -m relay_notebook.runner.child
    SPEC`` would run it: Ctrl-C raises ``KeyboardInterrupt``, ``sys.argv`` names the child, an
    uncaught error ends the interpreter as it would there."""
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    import importlib

    importlib.invalidate_caches()  # the folders on sys.path were listed before the new root
    from relay_notebook.runner import child

    sys.argv = [str(child.__file__), spec_path]
    child.main(spec_path)


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        _probe()
    main(sys.argv[1], sys.argv[2])
