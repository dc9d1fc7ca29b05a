"""The sandbox's way out: pasta attached to an attempt's network namespace, or a spare one.

Design note: an attempt's network namespace has only ``lo``: nothing of the host's loopback (the
Jupyter server, a kernel's ports, a database) and none of its abstract unix sockets is
reachable. By default a helper left outside the namespaces attaches Debian's ``pasta`` to it,
which gives the namespace a route to the outside while mapping no host loopback port but those
the plan allows (``-T PORT``); the helper says ``ok`` on a pipe the child reads before the
relay's code runs, and stops pasta when the attempt's leader is gone. pasta runs as the
sandbox's uid, never as root, started as it so that it dies with the helper even when the helper
is killed (a change of uid would clear its parent-death signal). A warm parent keeps one
**spare** namespace with pasta already attached (``make_spare``) for its next attempt that
declares no endpoint, so that attempt does not wait for pasta at all.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import tempfile
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

__all__ = ["Spare", "make_spare", "network_helper", "pasta_command", "wait_for_network"]

_PASTA_WAIT_S = 20


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
    # pasta writes its pid file as ``uid``, who may not reach the run folder (a 0700 parent)
    # nor so TMPDIR, which a spawned attempt's supervisor points into it
    folder = tempfile.mkdtemp(prefix="relay-pasta-", dir="/tmp")
    pidfile = os.path.join(folder, "pasta.pid")
    if said.isdigit():
        try:
            os.chown(folder, uid, uid)
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
                close_fds=True, preexec_fn=die_with_parent, **as_uid,
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
    """A spare network namespace starting (``None``: none can be made here); never raises."""
    try:
        return _start_spare()
    except OSError:
        return None


def _start_spare() -> Spare | None:
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
                name_process("relay-net")
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
            name_process("relay-netns")
            die_with_parent()
            # owned by a user namespace of the sandbox's uid, as an attempt's own would be:
            # pasta (which runs as that uid) may join it, the relay (in a sibling) cannot
            # change it, and root, who sets the attempt in it, may
            become(SANDBOX_UID)
            unshare_user(CLONE_NEWNET, "unshare a network namespace")
            loopback_up()
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
    network_helper(go_r, ready_w, {"mode": "outside", "allow": []}, SANDBOX_UID, hold_r)


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
