"""The sandbox an attempt enters: a root of its own, an unprivileged identity, its own network.

Design note: the process that becomes an attempt's group leader calls ``enter_sandbox`` and
returns from it as the relay's process, three processes down, as bwrap would leave it:

1. **Leader, still privileged.** A new mount namespace, and in it a new root built from the
   plan (``runner.sandbox_plan``): an empty tmpfs, the allowlisted paths bound read-only, the
   attempt's writable areas bound read-write, every bind ``nosuid,nodev``; a ``/dev`` with the
   few device files a program needs; an empty ``/tmp`` of its own; ``pivot_root``. The
   binds are made while the leader can still traverse every folder (``/root`` is 0700), so the
   unprivileged relay sees exactly the plan and nothing else: no home folder, no other
   workspace, no Jupyter runtime file, no vault.
2. **Leader, unprivileged.** Run by root, it becomes the sandbox's own uid (``SANDBOX_UID``, no
   groups); run by a user, it stays that user. Then a new user, PID, mount and network
   namespace, in which it maps itself to uid 0 (its own id only, which needs no privilege):
   root inside, an unprivileged stranger outside, whose files outside it cannot chmod, touch or
   label, since it neither owns them nor may write their (read-only) mounts.
3. **The namespace's init** mounts a fresh ``/proc`` over the host's (bound in step 1 only so
   that the kernel lets a namespace mount one), brings up ``lo``, makes itself undumpable (the
   relay can neither ptrace nor stop it) and forks the relay's process, which drops every
   capability, sets no-new-privs and enters Landlock (writes, signals and abstract sockets
   scoped to its own domain, which also forbids ptrace of anything outside it).

Its network is its own (``runner.sandbox_net``): a helper forked before step 2 stays outside
and attaches pasta, or the leader joins a spare namespace the warm parent made ahead;
``network: none`` gets neither. The system calls are ``runner.namespaces``.
"""

from __future__ import annotations

import os

from relay_notebook._lazy import TYPE_CHECKING
from relay_notebook.runner.namespaces import (
    ATTR_NODEV,
    ATTR_NOSUID,
    ATTR_RDONLY,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PIVOT_ROOT,
    PR_SET_DUMPABLE,
    SANDBOX_UID,
    become,
    call,
    close_from,
    die_with_parent,
    libc,
    loopback_up,
    may_mount,
    mount,
    name_process,
    sandbox_uid,
    set_attr,
    unshare,
    unshare_user,
)

if TYPE_CHECKING:  # (not ``typing``: a spawned attempt imports this module first, see
    # ``runner.namespaces``)
    from typing import Any, NoReturn

    from relay_notebook.runner.sandbox_net import Spare

__all__ = [
    "FAILED",
    "PASTA_MODES",
    "SANDBOX_UID",
    "close_from",
    "die_with_parent",
    "enter_sandbox",
    "name_process",
    "probe_namespaces",
    "sandbox_uid",
]

FAILED = 70  # a process of the sandbox could not set itself up (its stderr says why)
#: the network modes of a plan that pasta serves (``runner.sandbox_plan``): ``outside`` (the
#: outside, and the allowed endpoints of this machine's loopback) and ``database`` (only the
#: run's PostgreSQL server on this machine's loopback, for a relay that declares ``network:
#: none``); ``none`` and ``isolated`` (no pasta here) reach only the sandbox's own loopback
PASTA_MODES = ("outside", "database")
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _place(root: str, path: str, *, folder: bool) -> str:
    """The mount point of ``path`` in the new root, made (as an empty folder or file)."""
    target = root + path
    if folder:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    return target


def _build_root(root: str, plan: dict[str, Any]) -> None:
    """Mount the plan's new root on the folder ``root`` (see the design note, step 1)."""
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for link, target in plan["links"]:
        os.makedirs(os.path.dirname(root + link), exist_ok=True)
        if not os.path.lexists(root + link):
            os.symlink(target, root + link)
    # a private /tmp first: a run folder beneath the host's /tmp is bound inside it next
    tmp = _place(root, "/tmp", folder=True)
    mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=25%")
    for kind, path in plan["mounts"]:
        if kind == "empty":
            target = _place(root, path, folder=True)
            mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755")
            continue
        if not os.path.lexists(path):
            continue  # gone since the plan was made (a device this machine lacks)
        target = _place(root, path, folder=os.path.isdir(path))
        mount(path, target, None, MS_BIND | MS_REC)
        attrs = ATTR_NOSUID | ATTR_NODEV | (ATTR_RDONLY if kind == "read" else 0)
        set_attr(target, attrs, recursive=True)
    # /dev: the device files a program expects, nothing else
    dev = _place(root, "/dev", folder=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755")
    for name in _DEVICES:
        if os.path.exists(f"/dev/{name}"):
            node = _place(root, f"/dev/{name}", folder=False)
            mount(f"/dev/{name}", node, None, MS_BIND)
            set_attr(node, ATTR_NOSUID, recursive=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{dev}/{name}")
    shm = _place(root, "/dev/shm", folder=True)
    mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777")
    set_attr(dev, ATTR_RDONLY, recursive=False)
    # the host's /proc, only so that the namespace may mount its own over it (step 3)
    proc = _place(root, "/proc", folder=True)
    mount("/proc", proc, None, MS_BIND | MS_REC)
    set_attr(proc, ATTR_NOSUID | ATTR_NODEV, recursive=True)
    set_attr(root, ATTR_RDONLY, recursive=False)


def _pivot(root: str) -> None:
    os.chdir(root)
    call(libc().syscall(PIVOT_ROOT, b".", b"."), "pivot_root")
    call(libc().umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")


def enter_sandbox(plan: dict[str, Any], spare: Spare | None = None) -> tuple[int, int | None]:
    """Steps 1 and 2 in this process (the attempt's group leader); step 3 in its child.

    Returns, in the relay's process only, ``(status_w, net_ready_r)``: the end of the init's
    status pipe to close and the descriptor ``wait_for_network`` reads. In the leader it never
    returns: it waits for the init and exits as the relay's process did.
    """
    outside_uid = sandbox_uid()
    network = plan["network"]
    net_ready_r = go_w = None
    new_net = CLONE_NEWNET
    if spare is not None and spare.netns_fd is not None:  # made ahead, pasta ready in it
        call(libc().setns(spare.netns_fd, CLONE_NEWNET), "setns to the spare network")
        os.close(spare.netns_fd)
        go_w, new_net = spare.hold_w, 0  # held till the leader ends, as the helper's go pipe
        net_ready_r, ready_w = os.pipe()  # the child waits for the word all the same: "ok"
        os.write(ready_w, b"ok")
        os.close(ready_w)
    elif network["mode"] in PASTA_MODES:  # the helper stays outside every namespace (step 0)
        go_r, go_w = os.pipe()
        net_ready_r, ready_w = os.pipe()
        if os.fork() == 0:
            # nothing of the attempt's: the run lock, its logs' pipes would outlive the attempt;
            # nor its process group, which the supervisor waits to see empty (the helper ends
            # with the leader: its go pipe's end, or the leader's death)
            name_process("relay-net")
            os.setsid()
            die_with_parent()
            close_from(3, keep={go_r, ready_w})
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            from relay_notebook.runner.sandbox_net import network_helper  # (here only)

            network_helper(go_r, ready_w, network, outside_uid)
        os.close(go_r)
        os.close(ready_w)
    privileged = _enter_mount_namespace()
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    _build_root(plan["staging"], plan)
    _pivot(plan["staging"])
    if privileged:
        become(SANDBOX_UID)
    unshare_user(CLONE_NEWPID | CLONE_NEWNS | new_net, "unshare the namespaces")
    if go_w is not None and new_net:  # held open until the leader ends: the helper's sign to
        os.write(go_w, str(os.getpid()).encode())  # stop pasta
    status_r, status_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(status_r)
        _init(plan, status_w, net_ready_r)
        return status_w, net_ready_r  # in the relay's process
    os.close(status_w)
    if net_ready_r is not None:
        os.close(net_ready_r)
    _leave_after(init, status_r, {go_w} if go_w is not None else set())


def _enter_mount_namespace() -> bool:
    """A new mount namespace; ``True`` if we made it as root (who can then become the
    sandbox's uid), ``False`` if it took a user namespace of our own id (an ordinary user, or
    root without CAP_SYS_ADMIN, whose relay then stays uid 0 outside, without capabilities)."""
    if os.geteuid() == 0 and may_mount():
        unshare(CLONE_NEWNS, "unshare a mount namespace")
        return True
    unshare_user(CLONE_NEWNS, "unshare a user namespace")
    return False


def probe_namespaces() -> None:
    """In a throwaway child: the namespace steps of ``enter_sandbox`` (raises if one fails)."""
    if _enter_mount_namespace():
        become(SANDBOX_UID)
    unshare_user(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET, "unshare the namespaces")
    inner = os.fork()
    if inner == 0:
        try:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            loopback_up()
        except BaseException:
            os._exit(1)
        os._exit(0 if os.getpid() == 1 else 1)
    _, status = os.waitpid(inner, 0)
    if status != 0:
        raise OSError("mounting /proc or bringing up lo in the sandbox's namespaces failed")


def _init(plan: dict[str, Any], status_w: int, net_ready_r: int | None) -> None:
    """PID 1 of the sandbox: its /proc, its lo, undumpable; forks the relay's process (which
    returns) and reaps until the relay's process ends."""
    name_process("relay-init")
    die_with_parent()  # the leader gone (killed with its group), the whole namespace goes
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    try:  # noqa: SIM105 (``contextlib`` is not imported: see the imports)
        loopback_up()
    except PermissionError:  # a spare's is up already (and not ours to set)
        pass
    call(libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    os.chdir(plan["cwd"])
    relay = os.fork()
    if relay == 0:
        call(libc().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
        return
    close_from(3, keep={status_w})
    while True:
        pid, status = os.wait()
        if pid == relay:
            break
    os.write(status_w, str(status).encode())
    os._exit(0)


def _leave_after(init: int, status_r: int, hold: set[int]) -> NoReturn:
    """The group leader's end: wait for the sandbox's init, exit as the relay's process did
    (holding ``hold`` open till then)."""
    close_from(3, keep={status_r, *hold})
    with os.fdopen(status_r, "rb") as stream:
        said = stream.read()
    _, own = os.waitpid(init, 0)
    _leave_as(int(said) if said.strip().isdigit() else own)  # (an init killed mid-write)


def _leave_as(status: int) -> NoReturn:
    """Exit with the relay process's wait ``status``: the same code, or the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import contextlib  # (here only: see the imports)
        import signal

        # SIGKILL and SIGSTOP cannot be handled (EINVAL), nor the C library's own signals
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else FAILED)
