"""The system calls a sandbox is made of: namespaces, mounts, identities, a link's state.

A few ``syscall``\\ s through ``ctypes`` (no binding from the package index), shared by the
sandbox (``runner.sandbox``) and its network (``runner.sandbox_net``). A spawned attempt
imports this module in a Python process of its own before the child's (``runner.sandbox_exec``),
so it imports only modules written in C besides ``ctypes``: ``socket``, ``signal`` and
``pathlib`` would import ``enum``, ``re`` and more, tens of milliseconds on every attempt.
"""

from __future__ import annotations

import _socket
import ctypes
import fcntl
import os
import struct

__all__ = [
    "SANDBOX_UID",
    "become",
    "call",
    "close_from",
    "die_with_parent",
    "libc",
    "loopback_up",
    "may_mount",
    "mount",
    "name_process",
    "sandbox_uid",
    "set_attr",
    "unshare",
    "unshare_user",
]

#: the host uid (and gid) of a relay run by root: no account has it, so it owns nothing outside
SANDBOX_UID = 1_999_999_999
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
ATTR_RDONLY, ATTR_NOSUID, ATTR_NODEV = 0x1, 0x2, 0x4
_AT_RECURSIVE = 0x8000
_MOUNT_SETATTR = 442  # the same on every architecture
PIVOT_ROOT = 155 if os.uname().machine == "x86_64" else 41
PR_SET_DUMPABLE, _PR_SET_PDEATHSIG, _PR_SET_NAME = 4, 1, 15
_SIGKILL = 9  # the same on every architecture Linux runs on
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def call(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    call(
        libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {source} on {target}",
    )


def set_attr(target: str, attrs: int, *, recursive: bool) -> None:
    attr = _MountAttr(attrs, 0, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    call(
        libc().syscall(
            _MOUNT_SETATTR, -100, target.encode(), flags, ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        f"mount_setattr {target}",
    )  # fmt: skip


def unshare(flags: int, what: str) -> None:
    call(libc().unshare(flags), what)


def become(uid: int) -> None:
    """As root: the sandbox's own uid and gid, with no supplementary groups."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # a change of uid makes a process undumpable, and its /proc files root's: our maps next
    call(libc().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def unshare_user(flags: int, what: str) -> None:
    """``unshare`` with a new user namespace in ``flags``, in which uid and gid 0 are ours."""
    uid, gid = os.geteuid(), os.getegid()  # inside, unmapped ids read as the overflow id
    unshare(CLONE_NEWUSER | flags, what)
    maps = (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1"))
    for name, text in maps:
        with open(f"/proc/self/{name}", "w", encoding="utf-8") as fh:
            fh.write(text)


def loopback_up() -> None:
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)  # (not a context manager)
    try:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
    finally:
        sock.close()


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends."""
    libc().prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)


def name_process(name: str) -> None:
    """Call this process (its threads made from now on too) ``name`` where ``top`` and ``ps -o
    comm`` look (``/proc/PID/comm``, at most 15 bytes): an attempt's processes by their part in
    it (``relay-leader``, ``relay-net``, ``relay-init``, ``relay-child``), not all ``python``."""
    libc().prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def sandbox_uid() -> int:
    """The host uid a relay started from this process runs as."""
    uid = os.geteuid()
    return SANDBOX_UID if uid == 0 and may_mount() else uid


def may_mount() -> bool:
    """Whether we hold CAP_SYS_ADMIN (root usually does; a container may take it away)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        caps = next((line.split()[1] for line in fh if line.startswith("CapEff:")), "0")
    return bool(int(caps, 16) & (1 << 21))


def close_from(low: int, keep: set[int]) -> None:
    """Close every descriptor from ``low`` up but ``keep`` (not by /proc/self/fd: once the
    namespace's init has mounted its /proc, the group leader is not in it)."""
    for fd in sorted(k for k in keep if k >= low):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
