"""Landlock and privileges: the few system calls that confine a forked child without bwrap.

Design note: Landlock is an allow-list of the accesses a ruleset *handles*. The child handles
every write access the kernel's ABI knows (writing, truncating, creating, removing, renaming
across folders) and none of the read accesses, so it reads the file system as before and
writes only beneath ``WriteRules.writable`` and to a few device files. Reads of the vault are
stopped the way bubblewrap stops them, by an empty tmpfs over it in the child's own mount
namespace (Landlock cannot deny a folder beneath an allowed one). With ABI 6 the child may
signal no process outside its domain either, nor connect to an abstract unix socket made
outside it. No binding from the package index is used: the maintained ones are
pre-releases, and three ``syscall``\\ s through ``ctypes`` do the job. A spawned attempt imports
this module before its child's program (``runner.sandbox_exec``): it imports nothing more than
``ctypes`` and ``os`` (see ``runner.namespaces``).
"""

from __future__ import annotations

import ctypes
import os

from relay_notebook._lazy import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from os import PathLike

__all__ = ["abi_version", "drop_privileges", "restrict_writes"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT = 38, 24, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (
    1 << 8,
    1 << 9,
    1 << 10,
    1 << 11,
    1 << 12,
)
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_LIBC: list[ctypes.CDLL] = []
_ABI: list[int] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:  # this process's libc, without running ldconfig
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or turned off (asked once)."""
    if not _ABI:
        try:
            version = _libc().syscall(
                _CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION
            )
        except (OSError, AttributeError):
            version = 0
        _ABI.append(max(int(version), 0))
    return _ABI[0]


def _write_access(abi: int) -> int:
    access = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
    access |= _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
    if abi >= 2:
        access |= _REFER
    if abi >= 3:
        access |= _TRUNCATE
    return access


def restrict_writes(writable: Iterable[str | PathLike[str]], abi: int) -> None:
    """Confine this process (and all it starts) to writing beneath ``writable`` only.

    Call it single-threaded, after ``drop_privileges``: ``restrict_self`` needs no-new-privs.
    """
    handled = _write_access(abi)
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    libc = _libc()
    ruleset = _check(
        libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    try:
        file_access = handled & (_WRITE_FILE | _TRUNCATE)
        targets: list[tuple[str, int | None]] = [(os.fspath(p), None) for p in writable]
        targets += [(d, file_access) for d in _DEVICES]
        for path, wanted in targets:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a device this machine lacks
            try:
                is_dir = os.path.isdir(path)
                access = wanted if wanted is not None else handled if is_dir else file_access
                rule = _PathBeneathAttr(access, fd)
                _check(
                    libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0),
                    f"landlock_add_rule({path})",
                )
            finally:
                os.close(fd)
        _check(libc.syscall(_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def drop_privileges() -> None:
    """No capabilities now or after any exec, and no way to gain them (no-new-privs)."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="utf-8") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: none to drop
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    _check(libc.capset(header, data), "capset")
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
