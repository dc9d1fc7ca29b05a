"""The sandbox's way out: pasta attached to an attempt's network namespace, or a spare one.

Design note: an attempt's network namespace has only ``lo``: nothing of the host's loopback (the
Jupyter server, a kernel's ports, a database) and none of its abstract unix sockets is
reachable. By default a helper left outside the namespaces attaches Debian's ``pasta`` to it,
which gives the namespace a route to the outside while mapping no host loopback port but those
the plan allows (``-T PORT``); the helper says ``ok`` on a pipe the child reads before the
relay's code runs, and stops pasta when the attempt's leader is gone. pasta runs as the
sandbox's uid, never as root, started as it so that it dies with the helper even when the helper
is killed (a change of uid would clear its parent-death signal). A warm parent keeps a
**spare** namespace with pasta already attached (``make_spare``) for each network its attempts'
plans name (the outside; the outside and a PostgreSQL run's server...), so that its next attempt
with that network does not wait for pasta at all.

**A spare serves one relay's attempts in turn** (``Spare.reclaim``). Starting pasta, its helper
and the namespace's keeper for every attempt was about 30 ms of CPU of every queued run (perf,
``benchmarks/profile_attempt.py``), so once an attempt that took a spare has ended, the warm
parent keeps the namespace, pasta still attached, for the next attempt of the **same relay**
(its code folder) whose plan names the same network (a PostgreSQL run's names its server),
never another relay's and never two attempts at once. It hands it over only if nothing of the
last attempt is left in it, checked when the next one asks (``Spare.reusable``): the attempt's
processes are gone (its leader waited for the sandbox's init, whose end ends every process of
its PID namespace), and no socket of the namespace is still open in any process or in flight
(every socket the kernel lists for it, ``/proc/PID/net/*``, with an inode, that was not there
when the spare was first claimed: the kernel's own and pasta's); sockets that are only closing
(``TIME_WAIT``, ``FIN_WAIT``) have no inode and take no connection. A relay, without
capabilities in the namespace's user namespace, can change nothing else in it (addresses,
routes, filters, its settings); and the namespace keeps no TCP metrics
(``net.ipv4.tcp_no_metrics_save``), which would tell the next attempt which addresses the last
one reached. What pasta still holds for a while is its UDP flows: a late answer to the last
attempt's datagram could reach the next one if it listens on that port, which is why only
attempts of one relay share. A namespace whose pasta has gone (no interface but ``lo``) or whose
keeper has changed is never reused.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from relay_notebook.runner.namespaces import (
    CLONE_NEWNET,
    SANDBOX_UID,
    become,
    close_from,
    die_with_parent,
    loopback_up,
    name_process,
    sandbox_uid,
    unshare_user,
)

__all__ = [
    "OUTSIDE",
    "Spare",
    "make_spare",
    "namespace_sockets",
    "network_helper",
    "pasta_command",
    "tcp_in_use",
    "wait_for_network",
]

_PASTA_WAIT_S = 20
#: where the kernel's process files are (a test points it at files of its own)
_PROC = "/proc"
#: the namespace's own setting (``/proc/sys/net`` shows the namespace of whoever opens it)
_NO_METRICS = "/proc/sys/net/ipv4/tcp_no_metrics_save"


def pasta_command(
    leader: int, allow: Sequence[str], pidfile: str, *, outside: bool = True
) -> list[str]:
    """pasta attached to ``leader``'s namespaces: the outside reachable, the host's loopback not,
    but for the allowed ``HOST:PORT`` endpoints (their ports forwarded from the namespace's).
    The namespace's address and gateway are link-local, so they name nothing outside. Without
    ``outside``, only those ports: the namespace's interface is left unconfigured (down, no
    address, no route), and the relay, without capabilities, cannot configure it."""
    ports = sorted({item.rpartition(":")[2] for item in allow})
    way_out = [
        "--config-net", "--no-map-gw",
        "--ipv4-only", "-a", "169.254.7.2", "-n", "16", "-g", "169.254.7.1",
    ] if outside else ["--ipv4-only"]  # fmt: skip
    return [
        "pasta", "--quiet", "--foreground", "--pid", pidfile, *way_out,
        "--tcp-ports", "none", "--udp-ports", "none", "--udp-ns", "none",
        "--tcp-ns", ",".join(ports) if ports else "none",
        "--userns", f"/proc/{leader}/ns/user", "--netns", f"/proc/{leader}/ns/net",
    ]  # fmt: skip


def network_helper(
    go_r: int, ready_w: int, network: dict[str, Any], uid: int, hold_r: int | None = None
) -> NoReturn:
    """Outside the namespaces: once the leader has entered them, run pasta (which dies with us)
    until the leader is gone (``hold_r``'s end, if given), and say when it is ready."""
    said = os.read(go_r, 64).decode()  # the leader's pid; then, at its end, end of file
    word, pasta = b"none", None
    # pasta writes its pid file as ``uid``, who may not reach the run folder (a 0700 parent):
    # into a memory file it inherits and opens as its own descriptor, so that nothing is left
    # behind if we are killed (a folder in /tmp was, for every killed attempt)
    pid_fd = os.memfd_create("relay-pasta-pid", os.MFD_CLOEXEC)
    pidfile = f"/proc/self/fd/{pid_fd}"
    if said.isdigit():
        try:
            # started as ``uid`` (not switched by pasta's --runas): a change of uid clears the
            # parent-death signal, which must outlive the exec, so that pasta dies with us even
            # if we are killed (SIGKILL) before we can stop it
            as_uid: dict[str, Any] = (
                {} if os.geteuid() == uid else {"user": uid, "group": uid, "extra_groups": []}
            )
            pasta = subprocess.Popen(
                pasta_command(
                    int(said), network.get("allow", []), pidfile,
                    outside=network["mode"] == "outside",
                ),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                close_fds=True, pass_fds=(pid_fd,), preexec_fn=die_with_parent, **as_uid,
            )  # fmt: skip
            word = _await_pasta(pasta, pid_fd)
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
    os._exit(0)


def _await_pasta(pasta: subprocess.Popen[bytes], pid_fd: int) -> bytes:
    """``ok`` once pasta has written its pid file, ``pid_fd`` (its namespace is configured by
    then)."""
    deadline = time.monotonic() + _PASTA_WAIT_S
    while time.monotonic() < deadline:
        if pasta.poll() is not None:
            assert pasta.stderr is not None
            return b"pasta: " + pasta.stderr.read()[-300:].strip()
        with contextlib.suppress(OSError):
            if os.fstat(pid_fd).st_size > 0:
                return b"ok"
        time.sleep(0.002)
    return b"pasta: not ready after %d s" % _PASTA_WAIT_S


#: the socket tables of a network namespace (``/proc/PID/net/NAME``), each with the column of
#: its sockets' inode (0: a socket no descriptor refers to, only closing)
_SOCKET_TABLES = {
    **dict.fromkeys(("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6"), 9),
    **dict.fromkeys(("raw", "raw6", "icmp", "icmp6"), 9),
    "unix": 6, "packet": 8, "netlink": 9,
}  # fmt: skip
#: the TCP tables: reading one walks the kernel's hash of every namespace's connections (about
#: 3 ms each here), so they are read only when the namespace's own count of TCP sockets
#: (``sockstat``) is not what it was when the spare was claimed
_TCP_TABLES = ("tcp", "tcp6")


class Spare:
    """A network namespace made ahead of an attempt, pasta attached and ready (see
    ``make_spare``): the warm parent hands it to its next attempt whose plan names its network,
    so that attempt does not wait for pasta, and may hand it again to that relay's
    next attempt once the first has ended (``reusable``, ``reclaim``). ``hold_w`` is held by
    whoever uses it: when the last holder ends, the namespace's keeper stops pasta and leaves."""

    def __init__(self, keeper: int, ready_r: int, hold_w: int) -> None:
        self.keeper, self._ready_r, self.hold_w = keeper, ready_r, hold_w
        self.netns_fd: int | None = None
        #: the namespace's identity (its inode), its sockets and its count of TCP sockets when
        #: first claimed
        self._netns: int | None = None
        self._own_sockets: frozenset[tuple[str, int]] = frozenset()
        self._own_tcp: tuple[int, int] | None = None

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
            self._netns = os.fstat(self.netns_fd).st_ino
            self._own_tcp = tcp_in_use(self.keeper)
            self._own_sockets = frozenset(namespace_sockets(self.keeper))
        except OSError:
            self.close()
            return False
        return True

    def reusable(self) -> bool:
        """Whether this namespace, given to an attempt that has ended, may serve the same
        relay's next attempt: its keeper is the one that made it, pasta is still attached, and
        no socket is open in it that was not there when it was first claimed (see the note)."""
        if self._netns is None:
            return False
        try:
            if os.stat(f"/proc/{self.keeper}/ns/net").st_ino != self._netns:
                return False  # the keeper is gone (its pid may name another process now)
            with open(f"/proc/{self.keeper}/net/dev", encoding="ascii") as fh:
                links = [line.split(":")[0].strip() for line in fh.readlines()[2:]]
            if [name for name in links if name != "lo"] == []:
                return False  # pasta has gone: no way out any more
            tcp = tcp_in_use(self.keeper) != self._own_tcp
            return namespace_sockets(self.keeper, tcp=tcp) <= self._own_sockets
        except (OSError, ValueError):
            return False

    def reclaim(self) -> bool:
        """Open the namespace again for the next attempt (``netns_fd``), if it is
        ``reusable`` now."""
        if not self.reusable():
            return False
        try:
            fd = os.open(f"/proc/{self.keeper}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        if os.fstat(fd).st_ino != self._netns:
            os.close(fd)
            return False
        self.netns_fd = fd
        return True

    def let_go(self) -> None:
        """The attempt it was given to has its own copies: close the namespace here, keep the
        hold (the namespace and pasta stay, for ``reclaim``)."""
        if self.netns_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.netns_fd)
        self.netns_fd = None

    def close(self) -> None:
        """Let go of it here (the attempt that took it holds its own copies)."""
        for fd in (self.hold_w, self.netns_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.netns_fd = None


def namespace_sockets(pid: int, *, tcp: bool = True) -> set[tuple[str, int]]:
    """Every socket some descriptor or message in flight still refers to in ``pid``'s network
    namespace: (table, inode) pairs, read from the kernel's tables for that namespace (without
    ``tcp``, none of its TCP sockets)."""
    found: set[tuple[str, int]] = set()
    for table, column in _SOCKET_TABLES.items():
        if not tcp and table in _TCP_TABLES:
            continue
        try:
            with open(f"{_PROC}/{pid}/net/{table}", encoding="ascii", errors="replace") as fh:
                lines = fh.readlines()[1:]
        except FileNotFoundError:
            continue  # a protocol this kernel does not have
        for line in lines:
            fields = line.split()
            if len(fields) > column and fields[column].isdigit() and int(fields[column]):
                found.add((table, int(fields[column])))
    return found


#: a spare's network when none is named: the outside, no endpoint of this machine's loopback
OUTSIDE: dict[str, Any] = {"mode": "outside", "allow": []}


def tcp_in_use(pid: int) -> tuple[int, int]:
    """How many TCP sockets (IPv4, IPv6) ``pid``'s network namespace has that are not only
    waiting out their close (``TIME_WAIT``): the namespace's own counts, cheap to read (0 for
    IPv6 on a kernel without it: no ``sockstat6``)."""
    counts = []
    for name, label in (("sockstat", "TCP:"), ("sockstat6", "TCP6:")):
        try:
            with open(f"{_PROC}/{pid}/net/{name}", encoding="ascii") as fh:
                fields = next((line.split() for line in fh if line.startswith(label)), [])
        except FileNotFoundError:
            fields = []
        counts.append(int(fields[fields.index("inuse") + 1]) if "inuse" in fields else 0)
    return counts[0], counts[1]


def make_spare(network: dict[str, Any] | None = None) -> Spare | None:
    """A spare network namespace starting, for an attempt whose plan's ``network`` is
    ``network`` (its mode and allowed endpoints; by default ``OUTSIDE``); ``None``: none can be
    made here. Never raises."""
    try:
        return _start_spare(OUTSIDE if network is None else network)
    except OSError:
        return None


def _start_spare(network: dict[str, Any]) -> Spare | None:
    """Start a spare network namespace (root only): a keeper process, on its own, that enters
    a new network namespace, attaches pasta for ``network`` (as an attempt's helper would),
    says ``ok`` and keeps both until its hold pipe is closed by every holder."""
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
                name_process("relay-net")
                close_from(3, keep={ready_w, hold_r})
                _keep_spare(ready_w, hold_r, network)
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


def _keep_spare(ready_w: int, hold_r: int, network: dict[str, Any]) -> NoReturn:
    """The keeper: a holder child of its own enters the new network namespace (pasta must run
    outside it, in the host's), the keeper attaches pasta to it; both end with the hold pipe."""
    up_r, up_w = os.pipe()
    holder = os.fork()
    if holder == 0:
        os.close(up_r)
        os.close(ready_w)
        try:
            name_process("relay-netns")
            die_with_parent()
            # owned by a user namespace of the sandbox's uid, as an attempt's own would be:
            # pasta (which runs as that uid) may join it, the relay (in a sibling) cannot
            # change it, and root, who sets the attempt in it, may
            become(SANDBOX_UID)
            unshare_user(CLONE_NEWNET, "unshare a network namespace")
            loopback_up()
            # it may serve several attempts in turn: the kernel keeps no TCP metrics in it,
            # which would say to the next attempt which addresses the last one reached
            with contextlib.suppress(OSError), open(_NO_METRICS, "w", encoding="ascii") as fh:
                fh.write("1")
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
    network_helper(go_r, ready_w, network, SANDBOX_UID, hold_r)


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
