"""The sandbox an attempt enters: a root of its own, an unprivileged identity, its own network.

Design note: the process that becomes an attempt's group leader calls ``enter_sandbox`` and
returns from it as the relay's process, three processes down, as bwrap would leave it:

1. **Leader, still privileged.** A new mount namespace, and in it a new root built from the
   plan (``runner.sandbox_plan``): an empty tmpfs, the allowlisted paths bound read-only, the
   attempt's writable areas bound read-write, every bind ``nosuid,nodev``; a ``/dev`` with the
   few device files a program needs; the attempt's tmp folder at ``/tmp``; ``pivot_root``. The
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

The network namespace has only ``lo``: nothing of the host's loopback (the Jupyter server, a
kernel's ports, a database) and none of its abstract unix sockets is reachable. By default a
helper left outside (forked before step 2) attaches ``pasta`` to it, which gives the namespace
a route to the outside while mapping no host loopback port, except those the plan allows
(``-T PORT``); ``network: none`` runs no helper. The relay's process waits for the helper's
word before the relay is imported (``net_ready_fd``), so the start overlaps with pasta's.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "FAILED",
    "SANDBOX_UID",
    "Spare",
    "close_from",
    "die_with_parent",
    "enter_sandbox",
    "make_spare",
    "pasta_command",
    "probe_namespaces",
    "sandbox_uid",
    "wait_for_network",
]

#: the host uid (and gid) of a relay run by root: no account has it, so it owns nothing outside
SANDBOX_UID = 1_999_999_999
_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWUSER, _CLONE_NEWNET = (
    0x00020000,
    0x20000000,
    0x10000000,
    0x40000000,
)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_MNT_DETACH = 2
_ATTR_RDONLY, _ATTR_NOSUID, _ATTR_NODEV = 0x1, 0x2, 0x4
_AT_RECURSIVE = 0x8000
_MOUNT_SETATTR, _PIVOT_ROOT = 442, 155 if os.uname().machine == "x86_64" else 41
_PR_SET_DUMPABLE, _PR_SET_PDEATHSIG = 4, 1
_PASTA_WAIT_S = 20
FAILED = 70  # a process of the sandbox could not set itself up (its stderr says why)
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    _call(
        _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {source} on {target}",
    )


def _set_attr(target: str, attrs: int, *, recursive: bool) -> None:
    attr = _MountAttr(attrs, 0, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    _call(
        _libc().syscall(
            _MOUNT_SETATTR, -100, target.encode(), flags, ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        f"mount_setattr {target}",
    )  # fmt: skip


def _unshare(flags: int, what: str) -> None:
    _call(_libc().unshare(flags), what)


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
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755")
    for link, target in plan["links"]:
        os.makedirs(os.path.dirname(root + link), exist_ok=True)
        if not os.path.lexists(root + link):
            os.symlink(target, root + link)
    # a private /tmp first: a run folder beneath the host's /tmp is bound inside it next
    tmp = _place(root, "/tmp", folder=True)
    _mount("tmpfs", tmp, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=25%")
    for kind, path in plan["mounts"]:
        if kind == "empty":
            target = _place(root, path, folder=True)
            _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=755")
            continue
        if not os.path.lexists(path):
            continue  # gone since the plan was made (a device this machine lacks)
        target = _place(root, path, folder=os.path.isdir(path))
        _mount(path, target, None, _MS_BIND | _MS_REC)
        attrs = _ATTR_NOSUID | _ATTR_NODEV | (_ATTR_RDONLY if kind == "read" else 0)
        _set_attr(target, attrs, recursive=True)
    # /dev: the device files a program expects, nothing else
    dev = _place(root, "/dev", folder=True)
    _mount("tmpfs", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "mode=755")
    for name in _DEVICES:
        if os.path.exists(f"/dev/{name}"):
            node = _place(root, f"/dev/{name}", folder=False)
            _mount(f"/dev/{name}", node, None, _MS_BIND)
            _set_attr(node, _ATTR_NOSUID, recursive=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{dev}/{name}")
    shm = _place(root, "/dev/shm", folder=True)
    _mount("tmpfs", shm, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=1777")
    _set_attr(dev, _ATTR_RDONLY, recursive=False)
    # the host's /proc, only so that the namespace may mount its own over it (step 3)
    proc = _place(root, "/proc", folder=True)
    _mount("/proc", proc, None, _MS_BIND | _MS_REC)
    _set_attr(proc, _ATTR_NOSUID | _ATTR_NODEV, recursive=True)
    _set_attr(root, _ATTR_RDONLY, recursive=False)


def _pivot(root: str) -> None:
    os.chdir(root)
    _call(_libc().syscall(_PIVOT_ROOT, b".", b"."), "pivot_root")
    _call(_libc().umount2(b".", _MNT_DETACH), "umount the old root")
    os.chdir("/")


def _become(uid: int) -> None:
    """As root: the sandbox's own uid and gid, with no supplementary groups."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # a change of uid makes a process undumpable, and its /proc files root's: our maps next
    _call(_libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def _unshare_user(flags: int, what: str) -> None:
    """``unshare`` with a new user namespace in ``flags``, in which uid and gid 0 are ours."""
    uid, gid = os.geteuid(), os.getegid()  # inside, unmapped ids read as the overflow id
    _unshare(_CLONE_NEWUSER | flags, what)
    pid = "self"
    Path(f"/proc/{pid}/setgroups").write_text("deny")
    Path(f"/proc/{pid}/uid_map").write_text(f"0 {uid} 1")
    Path(f"/proc/{pid}/gid_map").write_text(f"0 {gid} 1")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def pasta_command(leader: int, allow: Sequence[str], uid: int, pidfile: str) -> list[str]:
    """pasta attached to ``leader``'s namespaces: the outside reachable, the host's loopback not,
    but for the allowed ``HOST:PORT`` endpoints (their ports forwarded from the namespace's).
    The namespace's address and gateway are link-local, so they name nothing outside."""
    ports = sorted({item.rpartition(":")[2] for item in allow})
    return [
        "pasta", "--quiet", "--foreground", "--pid", pidfile, "--config-net", "--no-map-gw",
        "--ipv4-only", "-a", "169.254.7.2", "-n", "16", "-g", "169.254.7.1",
        "--tcp-ports", "none", "--udp-ports", "none", "--udp-ns", "none",
        "--tcp-ns", ",".join(ports) if ports else "none",
        "--runas", f"{uid}:{uid}",
        "--userns", f"/proc/{leader}/ns/user", "--netns", f"/proc/{leader}/ns/net",
    ]  # fmt: skip


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends."""
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _network_helper(
    go_r: int, ready_w: int, network: dict[str, Any], uid: int, hold_r: int | None = None
) -> NoReturn:
    """Outside the namespaces: once the leader has entered them, run pasta (which dies with us)
    until the leader is gone (``hold_r``'s end, if given), and say when it is ready."""
    said = os.read(go_r, 64).decode()  # the leader's pid; then, at its end, end of file
    word, pasta = b"none", None
    # pasta writes its pid file as ``uid``, who may not reach the run folder (a 0700 parent)
    # nor so TMPDIR, which a spawned attempt's supervisor points into it
    folder = tempfile.mkdtemp(prefix="relay-pasta-", dir="/tmp")
    pidfile = os.path.join(folder, "pasta.pid")
    if said.isdigit():
        try:
            os.chown(folder, uid, uid)
            pasta = subprocess.Popen(
                pasta_command(int(said), network.get("allow", []), uid, pidfile),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                close_fds=True, preexec_fn=die_with_parent,
            )  # fmt: skip
            word = _await_pasta(pasta, pidfile)
        except OSError as exc:
            word = f"pasta: {exc}".encode()
    with contextlib.suppress(OSError):
        os.write(ready_w, word)
        os.close(ready_w)
    with contextlib.suppress(OSError):
        while os.read(go_r if hold_r is None else hold_r, 64):
            pass
    if pasta is not None:
        pasta.kill()
        pasta.wait()
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def _await_pasta(pasta: subprocess.Popen[bytes], pidfile: str) -> bytes:
    """``ok`` once pasta has written its pid file (its namespace is configured by then)."""
    deadline = time.monotonic() + _PASTA_WAIT_S
    while time.monotonic() < deadline:
        if pasta.poll() is not None:
            assert pasta.stderr is not None
            return b"pasta: " + pasta.stderr.read()[-300:].strip()
        with contextlib.suppress(OSError):
            if os.path.getsize(pidfile) > 0:
                return b"ok"
        time.sleep(0.002)
    return b"pasta: not ready after %d s" % _PASTA_WAIT_S


class Spare:
    """A network namespace made ahead of an attempt, pasta attached and ready (see
    ``make_spare``): the warm parent hands it to its next attempt whose relay declares no
    endpoint, so that attempt does not wait for pasta. ``hold_w`` is held by whoever uses it:
    when the last holder ends, the namespace's keeper stops pasta and leaves."""

    def __init__(self, keeper: int, ready_r: int, hold_w: int) -> None:
        self.keeper, self._ready_r, self.hold_w = keeper, ready_r, hold_w
        self.netns_fd: int | None = None

    def ready(self) -> bool:
        """Whether the keeper has said its word (ready, or failed), without waiting."""
        return bool(select.select([self._ready_r], [], [], 0)[0])

    def claim(self) -> bool:
        """Whether the namespace is ready (then ``netns_fd`` is open on it); waits for the word."""
        word = wait_for_network(self._ready_r)
        if word != "ok":
            self.close()
            return False
        try:
            self.netns_fd = os.open(f"/proc/{self.keeper}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.close()
            return False
        return True

    def close(self) -> None:
        """Let go of it here (the attempt that took it holds its own copies)."""
        for fd in (self.hold_w, self.netns_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.netns_fd = None


def make_spare() -> Spare | None:
    """Start a spare network namespace (root only): a keeper process, on its own, that enters
    a new network namespace, attaches pasta for the outside with no loopback endpoint, says
    ``ok`` and keeps both until its hold pipe is closed by every holder."""
    if sandbox_uid() != SANDBOX_UID:
        return None
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            os.close(ready_r)
            os.close(hold_w)
            os.setsid()
            if os.fork() == 0:  # the keeper, reparented away from the warm parent
                close_from(3, keep={ready_w, hold_r})
                _keep_spare(ready_w, hold_r)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    os.waitpid(first, 0)
    return Spare(_keeper_pid(ready_r), ready_r, hold_w)


def _keeper_pid(ready_r: int) -> int:
    """The keeper's pid, its first word on the ready pipe."""
    said = b""
    while not said.endswith(b"\n"):
        chunk = os.read(ready_r, 1)
        if not chunk:
            return -1
        said += chunk
    return int(said)


def _keep_spare(ready_w: int, hold_r: int) -> NoReturn:
    """The keeper: a holder child of its own enters the new network namespace (pasta must run
    outside it, in the host's), the keeper attaches pasta to it; both end with the hold pipe."""
    up_r, up_w = os.pipe()
    holder = os.fork()
    if holder == 0:
        os.close(up_r)
        os.close(ready_w)
        try:
            die_with_parent()
            # owned by a user namespace of the sandbox's uid, as an attempt's own would be:
            # pasta (which runs as that uid) may join it, the relay (in a sibling) cannot
            # change it, and root, who sets the attempt in it, may
            _become(SANDBOX_UID)
            _unshare_user(_CLONE_NEWNET, "unshare a network namespace")
            _loopback_up()
            os.write(up_w, b"up")
            os.close(up_w)
            while os.read(hold_r, 64):
                pass
        finally:
            os._exit(0)
    os.close(up_w)
    os.write(ready_w, f"{holder}\n".encode())
    if os.read(up_r, 2) != b"up":
        os.write(ready_w, b"spare: the network namespace could not be made")
        os._exit(0)
    go_r, go_w = os.pipe()
    os.write(go_w, str(holder).encode())
    os.close(go_w)  # the helper reads the holder's pid, then waits on hold_r for its end
    _network_helper(go_r, ready_w, {"mode": "outside", "allow": []}, SANDBOX_UID, hold_r)


def wait_for_network(fd: int) -> str:
    """Block until the network helper has spoken on ``fd``; what it said (``ok``, ``none`` or
    why pasta failed)."""
    chunks = []
    while True:
        chunk = os.read(fd, 512)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace") or "no word from the network helper"


def enter_sandbox(plan: dict[str, Any], spare: Spare | None = None) -> tuple[int, int | None]:
    """Steps 1 and 2 in this process (the attempt's group leader); step 3 in its child.

    Returns, in the relay's process only, ``(status_w, net_ready_r)``: the end of the init's
    status pipe to close and the descriptor ``wait_for_network`` reads. In the leader it never
    returns: it waits for the init and exits as the relay's process did.
    """
    outside_uid = sandbox_uid()
    network = plan["network"]
    net_ready_r = go_w = None
    new_net = _CLONE_NEWNET
    if spare is not None and spare.netns_fd is not None:  # made ahead, pasta ready in it
        _call(_libc().setns(spare.netns_fd, _CLONE_NEWNET), "setns to the spare network")
        os.close(spare.netns_fd)
        go_w, new_net = spare.hold_w, 0  # held till the leader ends, as the helper's go pipe
        net_ready_r, ready_w = os.pipe()  # the child waits for the word all the same: "ok"
        os.write(ready_w, b"ok")
        os.close(ready_w)
    elif network["mode"] == "outside":  # the helper stays outside every namespace (step 0)
        go_r, go_w = os.pipe()
        net_ready_r, ready_w = os.pipe()
        if os.fork() == 0:
            os.close(go_w)
            os.close(net_ready_r)
            _network_helper(go_r, ready_w, network, outside_uid)
        os.close(go_r)
        os.close(ready_w)
    privileged = _enter_mount_namespace()
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _build_root(plan["staging"], plan)
    _pivot(plan["staging"])
    if privileged:
        _become(SANDBOX_UID)
    _unshare_user(_CLONE_NEWPID | _CLONE_NEWNS | new_net, "unshare the namespaces")
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


def sandbox_uid() -> int:
    """The host uid a relay started from this process runs as."""
    uid = os.geteuid()
    return SANDBOX_UID if uid == 0 and _may_mount() else uid


def _may_mount() -> bool:
    """Whether we hold CAP_SYS_ADMIN (root usually does; a container may take it away)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        caps = next((line.split()[1] for line in fh if line.startswith("CapEff:")), "0")
    return bool(int(caps, 16) & (1 << 21))


def _enter_mount_namespace() -> bool:
    """A new mount namespace; ``True`` if we made it as root (who can then become the
    sandbox's uid), ``False`` if it took a user namespace of our own id (an ordinary user, or
    root without CAP_SYS_ADMIN, whose relay then stays uid 0 outside, without capabilities)."""
    if os.geteuid() == 0 and _may_mount():
        _unshare(_CLONE_NEWNS, "unshare a mount namespace")
        return True
    _unshare_user(_CLONE_NEWNS, "unshare a user namespace")
    return False


def probe_namespaces() -> None:
    """In a throwaway child: the namespace steps of ``enter_sandbox`` (raises if one fails)."""
    if _enter_mount_namespace():
        _become(SANDBOX_UID)
    _unshare_user(_CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWNET, "unshare the namespaces")
    inner = os.fork()
    if inner == 0:
        try:
            _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
            _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
            _loopback_up()
        except BaseException:
            os._exit(1)
        os._exit(0 if os.getpid() == 1 else 1)
    _, status = os.waitpid(inner, 0)
    if status != 0:
        raise OSError("mounting /proc or bringing up lo in the sandbox's namespaces failed")


def _init(plan: dict[str, Any], status_w: int, net_ready_r: int | None) -> None:
    """PID 1 of the sandbox: its /proc, its lo, undumpable; forks the relay's process (which
    returns) and reaps until the relay's process ends."""
    die_with_parent()  # the leader gone (killed with its group), the whole namespace goes
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    with contextlib.suppress(PermissionError):  # a spare's is up already (and not ours to set)
        _loopback_up()
    _call(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    os.chdir(plan["cwd"])
    relay = os.fork()
    if relay == 0:
        _call(_libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
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
    _leave_as(int(said) if said else own)


def _leave_as(status: int) -> NoReturn:
    """Exit with the relay process's wait ``status``: the same code, or the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two cannot be handled anyway
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else FAILED)


def close_from(low: int, keep: set[int]) -> None:
    """Close every descriptor from ``low`` up but ``keep`` (not by /proc/self/fd: once the
    namespace's init has mounted its /proc, the group leader is not in it)."""
    for fd in sorted(k for k in keep if k >= low):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
