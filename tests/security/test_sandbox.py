"""The sandbox against a hostile relay (tests/relays/hostile.py), on both start paths.

Each test runs the relay forked from the warm parent (``landlock``) and spawned
(``sandbox``) — the ``confined`` fixture — as root, the way the kit runs here; each attack must
be refused with the errno a person can read, and the host must show no trace of it.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from relay_notebook.errors import DatabaseOutOfReachError
from relay_notebook.history import list_runs
from relay_notebook.runner import RunOutcome, start_run, warm_parent
from relay_notebook.runner.backend import resolve_backend
from relay_notebook.runner.crash import parse_crash_spec
from relay_notebook.runner.namespaces import CLONE_NEWNET, call, libc
from relay_notebook.runner.runs import create_run, start_recovery
from relay_notebook.runner.sandbox import SANDBOX_UID, sandbox_uid
from relay_notebook.runner.sandbox_net import OUTSIDE, make_spare
from relay_notebook.runner.sandbox_plan import pasta_available
from relay_notebook.workspace import Manifest, Workspace
from tests.polling import wait_until
from tests.procs import alive, children_of, command, parent_of
from tests.relays import relay_source

REFUSED = ("refused: ENOENT", "refused: EROFS", "refused: EPERM", "refused: EACCES")


def attack(workspace: Workspace, probes: dict[str, Any], manifest: Manifest | None = None) -> Any:
    """Run the hostile relay with ``probes``; its per-probe answers."""
    draft = workspace.save_draft("hostile", relay_source("hostile"), manifest)
    out: RunOutcome = start_run(workspace, draft, run_input={"probes": probes}).wait(120)
    assert out.status == "succeeded", out.error
    return out.result


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello from the host")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[int]:
    """An HTTP server on the host's 127.0.0.1 (standing in for a Jupyter server or a database)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_the_jupyter_escape_is_closed(
    confined: tuple[str, Workspace], tmp_path: Path, loopback_server: int
) -> None:
    """A real Jupyter server on loopback: the relay can neither read its runtime file nor reach
    it, even given the token, and the server starts no kernel."""
    _, workspace = confined
    runtime = tmp_path / "runtime"
    token = uuid.uuid4().hex
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
         f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}"],
        env={**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: list(runtime.glob("jpserver-*.json")), timeout=60, what="jupyter")
        kernels = f"http://127.0.0.1:{port}/api/kernels?token={token}"
        assert _get_json(kernels) == []  # the server is there, for us
        result = attack(
            workspace,
            {
                "runtime file": {"kind": "list", "path": str(runtime)},
                "escape": {"kind": "jupyter", "runtime_dir": str(runtime), "port": port},
                "port": {"kind": "connect", "host": "127.0.0.1", "port": port},
                "localhost": {"kind": "connect", "host": "localhost", "port": loopback_server},
            },
        )
        assert result["runtime file"].startswith("refused: ENOENT"), result
        assert result["escape"].startswith("refused:"), result
        assert result["port"].startswith("refused: ECONNREFUSED"), result
        assert result["localhost"].startswith("refused: ECONNREFUSED"), result
        assert _get_json(kernels) == []  # no kernel was started by the relay
    finally:
        server.terminate()
        server.wait(30)


def test_files_outside_are_neither_changed_nor_seen(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """chmod, utime and setxattr on the relay's own code and a host binary fail read-only; a
    root-only file of the test's is not even there; the relay is not root outside."""
    _, workspace = confined
    private = tmp_path / "private.key"
    private.write_text("root only")
    private.chmod(0o600)
    env = shutil.which("env") or "/usr/bin/env"
    code = workspace.relay_dir("hostile") / "relay.py"
    workspace.save_draft("hostile", relay_source("hostile"))
    before = {p: os.stat(p) for p in (env, code)}
    result = attack(
        workspace,
        {
            "chmod code": {"kind": "chmod", "path": str(code)},
            "utime code": {"kind": "utime", "path": str(code)},
            "xattr code": {"kind": "setxattr", "path": str(code)},
            "chmod binary": {"kind": "chmod", "path": env},
            "utime binary": {"kind": "utime", "path": env},
            "read private": {"kind": "read", "path": str(private)},
            "root folder": {"kind": "list", "path": "/root/.ssh"},
            "uid": {"kind": "uid"},
        },
    )
    for probe in ("chmod code", "utime code", "xattr code", "chmod binary", "utime binary"):
        assert result[probe].startswith("refused: EROFS"), (probe, result[probe])
    assert result["read private"].startswith("refused: ENOENT"), result
    assert result["root folder"].startswith(REFUSED), result
    for path, was in before.items():
        now = os.stat(path)
        assert (now.st_mode, now.st_mtime_ns) == (was.st_mode, was.st_mtime_ns), path
    assert private.stat().st_mode & 0o777 == 0o600
    if sandbox_uid() == SANDBOX_UID:
        assert result["uid"] == f"done: {SANDBOX_UID}", result


def test_a_setuid_shell_left_behind_is_not_roots(confined: tuple[str, Workspace]) -> None:
    """A copy of /bin/sh made setuid in execution/ belongs to the sandbox's uid on the host, not
    to root, so it grants nothing."""
    _, workspace = confined
    result = attack(workspace, {"sh": {"kind": "setuid", "execution": "."}})
    shell = next(workspace.relay_dir("hostile").glob("runs/*/execution/sh"))
    info = shell.stat()
    assert not (info.st_uid == 0 and info.st_mode & stat.S_ISUID), (oct(info.st_mode), result)
    if sandbox_uid() == SANDBOX_UID:
        assert info.st_uid == SANDBOX_UID


def test_another_workspaces_vault_and_other_runs_are_not_there(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """The workspace's own vault, another workspace's vault and another run's folder do not
    exist inside the sandbox."""
    _, workspace = confined
    other = Workspace(tmp_path / "other-workspace")
    other_vault = other.home / ".relay_vault"
    other_vault.mkdir(parents=True, exist_ok=True)
    (other_vault / "secrets.json").write_text('{"OTHER_TOKEN": "other-secret-value"}')
    own_vault = workspace.home / ".relay_vault"
    own_vault.mkdir(parents=True, exist_ok=True)
    (own_vault / "secrets.json").write_text('{"OWN_TOKEN": "own-secret-value"}')
    first = attack(workspace, {})
    assert first == {}
    runs = workspace.relay_dir("hostile") / "runs"
    earlier = next(runs.iterdir())
    result = attack(
        workspace,
        {
            "other vault": {"kind": "read", "path": str(other_vault / "secrets.json")},
            "other workspace": {"kind": "list", "path": str(other.home)},
            "own vault": {"kind": "list", "path": str(own_vault)},
            "earlier run": {"kind": "list", "path": str(earlier)},
        },
    )
    for probe, said in result.items():
        assert said.startswith("refused: ENOENT"), (probe, said)


def test_the_starting_scripts_folder_is_not_read_when_another_is_first_on_sys_path(
    tmp_path: Path,
) -> None:
    """A program whose script folder holds a workspace (its vault, other relays) and which put
    another folder first on ``sys.path`` (``sys.path.insert(0, ...)``, common in scripts): the
    sandbox's reads include neither the script's folder nor anything holding it (before, the
    folder was bound read-only into every attempt with all it held, and a 0700 folder beneath
    it made every attempt fail with exit 70)."""
    project, lib, elsewhere = tmp_path / "project", tmp_path / "lib", tmp_path / "elsewhere"
    for folder in (project, lib, elsewhere):
        folder.mkdir()
    (project / ".relay_vault").mkdir()
    (project / "start.py").write_text(
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from relay_notebook.runner.sandbox_plan import python_reads\n"
        "print(json.dumps(python_reads()))\n"
    )
    done = subprocess.run(
        [sys.executable, str(project / "start.py"), str(lib)],
        cwd=elsewhere, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    reads = json.loads(done.stdout)
    assert reads, done.stderr
    held = [r for r in reads if project == Path(r) or Path(r) in project.parents]
    assert held == [], reads


def test_the_sandbox_machinery_cannot_be_traced_or_stopped(
    confined: tuple[str, Workspace],
) -> None:
    """PTRACE_ATTACH and SIGSTOP on the sandbox's init are refused, and the run ends."""
    _, workspace = confined
    result = attack(
        workspace,
        {"ptrace": {"kind": "ptrace", "pid": 1}, "stop": {"kind": "stop", "pid": 1}},
    )
    assert result["ptrace"].startswith("refused: EPERM"), result
    assert result["stop"].startswith("refused: EPERM"), result


def test_pasta_ends_with_its_network_helper_even_when_the_helper_is_killed() -> None:
    """pasta runs as the sandbox's uid and dies with the helper that started it: a helper
    killed with SIGKILL (which cannot stop pasta itself) leaves no pasta, and no namespace
    held by one, behind; nor any file: pasta's pid file is a memory file of the helper's (a
    folder in /tmp was left for every helper killed)."""
    if not pasta_available() or sandbox_uid() != SANDBOX_UID:
        pytest.skip("a spare network needs root and pasta (Debian's passt)")
    before = set(Path("/tmp").glob("relay-pasta-*"))
    spare = make_spare()
    assert spare is not None and spare.claim(), "the spare network did not start"
    try:
        helper = parent_of(spare.keeper)  # the keeper's holder is the helper's child
        assert helper is not None
        (pasta,) = [pid for pid in children_of(helper) if command(pid).startswith(b"pasta")]
        status = Path(f"/proc/{pasta}/status").read_text().splitlines()
        uid = next(line for line in status if line.startswith("Uid:")).split()[1:]
        assert uid == [str(SANDBOX_UID)] * 4, uid
        argv = command(pasta).split(b"\0")
        pidfile = argv[argv.index(b"--pid") + 1].decode()
        assert pidfile.startswith("/proc/self/fd/"), pidfile
        held = Path(f"/proc/{pasta}/fd/{pidfile.rsplit('/', 1)[1]}").readlink()
        assert held.name.startswith("memfd:relay-pasta-pid"), held
        os.kill(helper, signal.SIGKILL)
        wait_until(lambda: not alive(pasta), timeout=10, what="pasta to end with its helper")
    finally:
        spare.close()
    assert set(Path("/tmp").glob("relay-pasta-*")) <= before


def test_abstract_unix_sockets_of_the_host_are_out_of_reach(
    confined: tuple[str, Workspace],
) -> None:
    """An abstract unix socket listening on the host cannot be connected to."""
    _, workspace = confined
    name = f"relay-test-{uuid.uuid4().hex[:8]}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen(1)
        result = attack(workspace, {"socket": {"kind": "abstract", "name": name}})
    assert result["socket"].startswith("refused: ECONNREFUSED"), result


def test_a_declared_loopback_endpoint_is_the_only_one_reached(
    confined: tuple[str, Workspace], loopback_server: int
) -> None:
    """`network: {allow: [127.0.0.1:PORT]}` reaches that server and no other port of the
    host's loopback."""
    if not pasta_available():
        pytest.skip("pasta (Debian's passt) is not installed: no way out of the sandbox")
    _, workspace = confined
    with _loopback_listener() as other_port:
        manifest = Manifest(network={"allow": [f"127.0.0.1:{loopback_server}"]})
        result = attack(
            workspace,
            {
                "declared": {"kind": "connect", "host": "127.0.0.1", "port": loopback_server},
                "other": {"kind": "connect", "host": "127.0.0.1", "port": other_port},
            },
            manifest,
        )
    assert result["declared"].startswith("done: HTTP/1.0 200"), result
    assert result["other"].startswith("refused: ECONNREFUSED"), result


@pytest.fixture
def outside_server() -> Iterator[tuple[str, int]]:
    """An HTTP server on an address of a network namespace made here, standing in for the
    outside (a model provider): reachable from the host through a veth pair."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("making a network namespace needs root and iproute2")
    tag = uuid.uuid4().hex[:6]
    ns, host_if, ns_if = f"relaytest-{tag}", f"rth{tag}", f"rtn{tag}"
    host_ip, ns_ip = "198.18.71.1", "198.18.71.2"  # RFC 2544 benchmark range: no one's
    steps = [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
        ["ip", "link", "set", ns_if, "netns", ns],
        ["ip", "addr", "add", f"{host_ip}/30", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "-n", ns, "addr", "add", f"{ns_ip}/30", "dev", ns_if],
        ["ip", "-n", ns, "link", "set", ns_if, "up"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
    ]
    server = None
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True, timeout=30)
        port = 18080
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", str(port),
             "--bind", ns_ip],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(lambda: _reachable(ns_ip, port), timeout=30, what="the outside server")
        yield ns_ip, port
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def test_the_outside_is_reached_by_default_and_not_with_network_none(
    confined: tuple[str, Workspace], outside_server: tuple[str, int], loopback_server: int
) -> None:
    """By default a relay reaches a server beyond the machine but not the host's loopback;
    with `network: none` it reaches neither."""
    if not pasta_available():
        pytest.skip("pasta (Debian's passt) is not installed: no way out of the sandbox")
    _, workspace = confined
    host, port = outside_server
    probes = {
        "outside": {"kind": "connect", "host": host, "port": port},
        "loopback": {"kind": "connect", "host": "127.0.0.1", "port": loopback_server},
    }
    default = attack(workspace, probes, Manifest())
    assert default["outside"].startswith("done: HTTP/1.0 200"), default
    assert default["loopback"].startswith("refused: ECONNREFUSED"), default
    cut_off = attack(workspace, probes, Manifest(network="none"))
    assert cut_off["outside"].startswith("refused: ENETUNREACH"), cut_off
    assert cut_off["loopback"].startswith("refused: ECONNREFUSED"), cut_off


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_one_relays_attempts_share_a_network_in_turn_and_nothing_of_the_last_is_left(
    confined: tuple[str, Workspace],
    outside_server: tuple[str, int],
    store: str,
    request: pytest.FixtureRequest,
) -> None:
    """A forked attempt takes the network its relay's last attempt had (pasta kept attached;
    on PostgreSQL, with the run's server as its declared endpoint): what that attempt left
    listening (TCP, abstract unix sockets, held by a daemon of its own) is gone, the outside
    (and the run's server) is still reached, no TCP metrics are kept for the next one to read,
    and another relay's attempt never gets it. A spawned attempt always has a new network (what
    it left is gone all the same)."""
    if not pasta_available():
        pytest.skip("pasta (Debian's passt) is not installed: no way out of the sandbox")
    mechanism, workspace = confined
    host, port = outside_server
    backend = None
    probes: dict[str, Any] = {"outside": {"kind": "connect", "host": host, "port": port}}
    if store == "postgresql":
        database_url = request.getfixturevalue("database_url")
        backend = resolve_backend(database_url)
        server = {"kind": "connect", "host": "127.0.0.1", "port": urlsplit(database_url).port}
        probes["database"] = server

    def attack_on(relay: str, more: dict[str, Any]) -> Any:
        draft = workspace.save_draft(relay, relay_source("hostile"))
        handle = start_run(workspace, draft, run_input={"probes": more}, backend=backend)
        out: RunOutcome = handle.wait(120)
        assert out.status == "succeeded", out.error
        return out.result

    name, left_port = f"relay-test-{uuid.uuid4().hex[:8]}", _free_port()
    netns, metrics = {"kind": "network namespace"}, {"kind": "tcp metrics kept"}
    shared = mechanism == "landlock" and sandbox_uid() == SANDBOX_UID  # spare networks
    # attempts until one has a spare network (the warm parent makes one for a network once an
    # attempt has asked for it: the first attempts attach their own pasta): it is kept after
    for _ in range(5):
        warm = attack_on("hostile", {"netns": netns, "metrics": metrics})
        if not shared or warm["metrics"] == "done: False":
            break
    else:
        pytest.fail(f"no attempt of five was given a spare network: {warm}")
    # the attempt that leaves sockets behind (in the network kept from the last one)
    first = attack_on(
        "hostile",
        {
            "netns": netns,
            "leave": {"kind": "leave listening", "port": left_port, "name": name},
        },
    )
    assert first["leave"] == "done: listening", first
    second = attack_on(
        "hostile",
        {
            "netns": netns,
            "tcp": {"kind": "connect", "host": "127.0.0.1", "port": left_port},
            "abstract": {"kind": "abstract", "name": name},
            **probes,
        },
    )
    assert second["tcp"].startswith("refused: ECONNREFUSED"), second
    assert second["abstract"].startswith("refused: ECONNREFUSED"), second
    assert second["outside"].startswith("done: HTTP/1.0 200"), second
    if store == "postgresql":
        assert second["database"].startswith("done"), second
    if not shared:
        return  # spawned: a new network each time (a freed one's number may come back)
    assert first["netns"] == warm["netns"], (warm, first)  # kept, and taken again
    assert second["netns"] == first["netns"], (first, second)
    # another relay's attempt, while this relay's network is kept: never that one
    other = attack_on("other", {"netns": netns})
    assert other["netns"] != first["netns"], other


def test_a_network_whose_pasta_has_gone_is_not_kept() -> None:
    """A kept network whose pasta has ended (no way out any more) is not handed over again:
    its next attempt attaches pasta of its own instead of finding no outside."""
    if not pasta_available() or sandbox_uid() != SANDBOX_UID:
        pytest.skip("a spare network needs root and pasta (Debian's passt)")
    spare = make_spare()
    assert spare is not None and spare.claim(), "the spare network did not start"
    try:
        spare.let_go()
        assert spare.reusable()
        helper = parent_of(spare.keeper)
        assert helper is not None
        (pasta,) = [pid for pid in children_of(helper) if command(pid).startswith(b"pasta")]
        os.kill(pasta, signal.SIGKILL)
        wait_until(lambda: not spare.reusable(), timeout=10, what="the network to be unfit")
        assert not spare.reclaim() and spare.netns_fd is None
    finally:
        spare.close()


def test_a_plan_that_names_no_relay_gets_a_spare_that_is_never_kept() -> None:
    """Networks are kept per relay: an attempt whose plan names none may take the spare, but
    its network is let go when it ends, never kept for whoever comes next."""
    if not pasta_available() or sandbox_uid() != SANDBOX_UID:
        pytest.skip("a spare network needs root and pasta (Debian's passt)")
    networks = warm_parent._Networks()
    try:
        request = {"confine": {"plan": {"network": dict(OUTSIDE)}}}
        wait_until(lambda: networks._spares[warm_parent._key(OUTSIDE)].ready(), timeout=20,
                   what="the spare network")  # fmt: skip
        given, owner = networks.give(request)
        assert given is not None and owner is None
        given.let_go()
        networks.ended(given, owner, listening=True)
        assert networks._kept == []
        wait_until(lambda: not given.reusable(), timeout=10, what="its keeper to end")
    finally:
        networks.close()


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM], ids=["tcp", "udp"])
def test_a_network_with_a_socket_still_open_is_not_kept(kind: int) -> None:
    """A spare network is reusable only once no process holds a socket in it: one held by a
    process that entered it (as an attempt's would be) makes it unfit until that ends."""
    if not pasta_available() or sandbox_uid() != SANDBOX_UID:
        pytest.skip("a spare network needs root and pasta (Debian's passt)")
    spare = make_spare()
    assert spare is not None and spare.claim(), "the spare network did not start"
    try:
        spare.let_go()  # as after its attempt's fork
        assert spare.netns_fd is None
        assert spare.reusable()
        ready_r, ready_w = os.pipe()
        holder = os.fork()
        if holder == 0:  # pragma: no cover - a child that enters the namespace
            try:
                os.close(ready_r)
                fd = os.open(f"/proc/{spare.keeper}/ns/net", os.O_RDONLY)
                call(libc().setns(fd, CLONE_NEWNET), "setns")
                sock = socket.socket(socket.AF_INET, kind)
                sock.bind(("127.0.0.1", 0))
                if kind == socket.SOCK_STREAM:
                    sock.listen(1)
                os.write(ready_w, b"bound")
                time.sleep(60)
            finally:
                os._exit(0)
        os.close(ready_w)
        assert os.read(ready_r, 16) == b"bound"
        assert not spare.reusable()  # a socket is open in it
        assert not spare.reclaim()
        os.kill(holder, signal.SIGKILL)
        os.waitpid(holder, 0)
        assert spare.reusable()
        assert spare.reclaim() and spare.netns_fd is not None
        assert os.fstat(spare.netns_fd).st_ino == os.stat(f"/proc/{spare.keeper}/ns/net").st_ino
    finally:
        spare.close()
    wait_until(lambda: not spare.reusable(), timeout=10, what="the closed network to end")


def test_network_none_on_postgresql_reaches_its_runs_database_and_nothing_else(
    confined: tuple[str, Workspace],
    outside_server: tuple[str, int],
    loopback_server: int,
    database_url: str,
) -> None:
    """DBOS runs in the relay's process, so a run on PostgreSQL needs its server: with `network:
    none` the run's server on this machine's loopback is reached (the run succeeds), the
    outside and every other loopback port are not."""
    if not pasta_available():
        pytest.skip("pasta (Debian's passt) is not installed: no way out of the sandbox")
    mechanism, workspace = confined
    host, port = outside_server
    server = urlsplit(database_url)
    probes = {
        "outside": {"kind": "connect", "host": host, "port": port},
        "loopback": {"kind": "connect", "host": "127.0.0.1", "port": loopback_server},
        "database": {"kind": "connect", "host": "127.0.0.1", "port": server.port},
    }
    draft = workspace.save_draft("hostile", relay_source("hostile"), Manifest(network="none"))
    handle = start_run(
        workspace, draft, run_input={"probes": probes}, backend=resolve_backend(database_url)
    )
    out = handle.wait(120)
    assert out.status == "succeeded", out.error
    assert out.result["outside"].startswith("refused: ENETUNREACH"), out.result
    assert out.result["loopback"].startswith("refused: ECONNREFUSED"), out.result
    assert out.result["database"].startswith("done"), out.result
    (attempt,) = handle.folder.read_meta()["attempts"]
    assert attempt["confined"] and attempt["confinement"]["mechanism"] == mechanism


@pytest.fixture
def off_machine_database(database_url: str) -> Iterator[str]:
    """The run's PostgreSQL server as if on another machine: reached at an address of a veth
    interface made here (not loopback), through a forwarder to the test server."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("making an interface needs root and iproute2")
    tag = uuid.uuid4().hex[:6]
    dev, peer, address = f"rtd{tag}", f"rtp{tag}", "198.18.72.1"  # RFC 2544 benchmark range
    server = urlsplit(database_url)
    for step in (
        ["ip", "link", "add", dev, "type", "veth", "peer", "name", peer],
        ["ip", "addr", "add", f"{address}/32", "dev", dev],
        ["ip", "link", "set", dev, "up"],
        ["ip", "link", "set", peer, "up"],
    ):
        subprocess.run(step, check=True, capture_output=True, timeout=30)
    try:
        with _forwarder(address, ("127.0.0.1", int(server.port or 5432))) as port:
            yield database_url.replace(server.netloc, f"{server.username}@{address}:{port}")
    finally:
        subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=30)


def test_network_none_with_its_database_off_this_machine_is_refused_before_it_starts(
    workspace: Workspace, off_machine_database: str
) -> None:
    """Its sandbox could reach no server but one on this machine's loopback: the run is refused
    with one clear line before anything is recorded, rather than interrupted at each attempt;
    the same relay without `network: none` runs there, confined."""
    backend = resolve_backend(off_machine_database)
    draft = workspace.save_draft("sealed", relay_source("doubler"), Manifest(network="none"))
    for start in (start_run, create_run):
        with pytest.raises(DatabaseOutOfReachError) as refused:
            start(workspace, draft, run_input={"xs": [1, 2]}, backend=backend)
        assert refused.value.code == "database-out-of-reach"
        message = str(refused.value)
        assert "network: none" in message and "198.18.72.1" in message, message
        assert "\n" not in message
    assert list_runs(workspace) == []  # nothing recorded, nothing to recover
    opened = workspace.save_draft("opened", relay_source("doubler"))
    handle = start_run(workspace, opened, run_input={"xs": [1, 2]}, backend=backend)
    out = handle.wait(120)
    assert out.status == "succeeded" and out.result == {"out": [2, 4]}, out.error
    (attempt,) = handle.folder.read_meta()["attempts"]
    assert attempt["confined"] is True


def test_network_none_with_its_database_off_this_machine_runs_unconfined(
    tmp_path: Path, off_machine_database: str
) -> None:
    """Without the sandbox the relay's process reaches the server as the kit does; recovering
    such a run with the sandbox on is refused the same way, and the run is left as it was."""
    unconfined = Workspace(tmp_path / "open", confine=False)
    draft = unconfined.save_draft("sealed", relay_source("doubler"), Manifest(network="none"))
    backend = resolve_backend(off_machine_database)
    out = start_run(unconfined, draft, run_input={"xs": [1, 2]}, backend=backend).wait(120)
    assert out.status == "succeeded" and out.result == {"out": [2, 4]}, out.error
    crash = parse_crash_spec("after:double")
    cut = start_run(unconfined, draft, run_input={"xs": [1, 2]}, backend=backend, crash=crash)
    assert cut.wait(120).status == "interrupted"
    confined = Workspace(unconfined.home)
    with pytest.raises(DatabaseOutOfReachError, match="network: none"):
        start_recovery(confined, cut.folder.run_id, backend=backend)
    assert cut.folder.read_meta()["status"] == "interrupted"
    assert len(cut.folder.read_meta()["attempts"]) == 1  # no attempt used
    again = start_recovery(unconfined, cut.folder.run_id, backend=backend).wait(120)
    assert again.status == "succeeded" and again.result == {"out": [2, 4]}, again.error


class _forwarder:
    """A TCP forwarder listening on ``host`` (any free port) to ``target``."""

    def __init__(self, host: str, target: tuple[str, int]) -> None:
        self.listener = socket.create_server((host, 0))
        self.target = target

    def __enter__(self) -> int:
        threading.Thread(target=self._serve, daemon=True).start()
        return int(self.listener.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.listener.close()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _loopback_listener:
    """A second server on the host's loopback, which no manifest declares."""

    def __enter__(self) -> int:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return int(self.server.server_address[1])

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _get_json(url: str) -> Any:
    import urllib.request

    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return json.loads(answer.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


KEEPER = """
from dbos import DBOS
from agentworks import mcp


@DBOS.step()
async def keep(key):
    await mcp(server="orders", tool="create_order",
              arguments={"sku": "A", "quantity": 1, "idempotency_key": key})
    return await mcp(server="orders", tool="list_orders")


@DBOS.workflow()
async def run(INPUT):
    return {"listing": await keep(INPUT["key"])}
"""


def test_an_mcp_server_keeps_its_state_in_its_own_folder_of_the_run(
    confined: tuple[str, Workspace],
) -> None:
    """A stdio MCP server started by a sandboxed relay writes the file it keeps in
    `execution/.mcp/NAME` (`$RELAY_MCP_STATE`), and reads it back."""
    _, workspace = confined
    workspace.home.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__).parents[1] / "servers" / "mcp_orders.py", workspace.home)
    (workspace.home / "mcp_servers.yaml").write_text(
        "servers:\n  orders:\n    command: python\n    args: [mcp_orders.py]\n"
        "    env: {ORDERS_DB: $RELAY_MCP_STATE/orders.json}\n"
    )
    draft = workspace.save_draft("keeper", KEEPER)
    out: RunOutcome = start_run(workspace, draft, run_input={"key": "k1"}).wait(120)
    assert out.status == "succeeded", out.error
    assert '"A"' in json.dumps(out.result)
    state = next(workspace.relay_dir("keeper").glob("runs/*/execution/.mcp/orders/orders.json"))
    assert json.loads(state.read_text())["orders"]


TEST_USER = 23456  # an ordinary user for these tests: no account needed


@pytest.fixture(scope="module")
def as_user() -> Iterator[tuple[Path, list[str]]]:
    """A folder an ordinary user owns and a command line that runs `relay` as that user: Debian's
    python3 in a venv that sees the kit's packages (this machine's own interpreter lies under
    /root, which an ordinary user cannot enter)."""
    debian = Path("/usr/bin/python3")
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not debian.is_file():
        pytest.skip("needs root, setpriv and Debian's /usr/bin/python3 to act as another user")
    import site
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="relay-user-", dir="/tmp"))
    base.chmod(0o755)
    try:
        subprocess.run(
            [str(debian), "-m", "venv", "--without-pip", str(base / "py")],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        packages = next(Path(p) for p in site.getsitepackages() if p.endswith("site-packages"))
        pth = next((base / "py" / "lib").glob("python3*/site-packages")) / "kit.pth"
        pth.write_text(f"import site; site.addsitedir({str(packages)!r})\n")
        for folder in ("home", "ws"):
            (base / folder).mkdir()
            os.chown(base / folder, TEST_USER, TEST_USER)
        command = [
            "setpriv", f"--reuid={TEST_USER}", f"--regid={TEST_USER}", "--clear-groups",
            "env", f"HOME={base / 'home'}", str(base / "py" / "bin" / "python"),
            "-m", "relay_notebook.cli", "--home", str(base / "ws"),
        ]  # fmt: skip
        probe = subprocess.run([*command, "doctor"], capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"the kit does not start as an ordinary user here: {probe.stderr[-300:]}")
        yield base, command
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("warm", ["1", "0"])
def test_as_an_ordinary_user_the_sandbox_holds_too(
    as_user: tuple[Path, list[str]], warm: str, loopback_server: int, tmp_path: Path
) -> None:
    """Run by an ordinary user, forked or spawned: root's workspace and the host's loopback are
    out of reach, the user's own files outside cannot be changed, and the relay's files are the
    user's."""
    base, command = as_user
    own = base / "home" / "notes.txt"
    own.write_text("mine")
    os.chown(own, TEST_USER, TEST_USER)
    vault = tmp_path / "root-ws" / ".relay_vault"
    vault.mkdir(parents=True)
    (vault / "secrets.json").write_text("{}")
    relay = base / "hostile.py"
    shutil.copy(Path(__file__).parents[1] / "relays" / "hostile.py", relay)
    probes = {
        "root's vault": {"kind": "list", "path": str(vault)},
        "loopback": {"kind": "connect", "host": "127.0.0.1", "port": loopback_server},
        "own file": {"kind": "chmod", "path": str(own)},
        "setuid": {"kind": "setuid", "execution": "."},
    }
    done = subprocess.run(
        [*command, "run", str(relay), "--input", json.dumps({"probes": probes}), "--json"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "RELAY_WARM_START": warm},
    )  # fmt: skip
    out = json.loads(done.stdout)
    assert out["status"] == "succeeded", (out, done.stderr)
    result = out["result"]
    assert result["root's vault"].startswith("refused: ENOENT"), result
    assert result["loopback"].startswith("refused: ECONNREFUSED"), result
    assert result["own file"].startswith(REFUSED), result
    assert own.stat().st_mode & 0o777 == 0o644
    shell = next((base / "ws" / "hostile").glob("runs/*/execution/sh"))
    assert shell.stat().st_uid == TEST_USER


SELF_KILL = """
import os, signal
from dbos import DBOS


@DBOS.step()
async def die():
    os.kill(os.getpid(), signal.SIGKILL)


@DBOS.workflow()
async def run(INPUT):
    await die()
    return {}
"""


def test_a_relay_killed_by_a_signal_is_reported_so_without_a_traceback_of_the_kits(
    confined: tuple[str, Workspace],
) -> None:
    """A relay's process SIGKILLed ends its attempt 'killed by SIGKILL', and the sandbox's own
    processes print nothing (they once re-raised the signal through signal.signal: EINVAL)."""
    _, workspace = confined
    out: RunOutcome = start_run(workspace, workspace.save_draft("die", SELF_KILL)).wait(120)
    assert out.status == "interrupted"
    assert "killed by SIGKILL" in out.error["message"], out.error
    assert "Traceback" not in out.error.get("stderr", ""), out.error


def test_a_run_database_replaced_by_a_link_is_neither_read_nor_written(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """The relay replaces its run's database by a link to another workspace's run database
    (its own folder is writable, so it can): the kit, run as root, would read that database as
    the run's, and a fork would copy it where the fork's relay reads it. The attempt fails with
    ``run-record-damaged`` naming the link; the run's log and a fork of it refuse with the same
    line; the other workspace's database is neither read as this run's nor changed."""
    from relay_notebook.errors import RunRecordDamagedError
    from relay_notebook.history import read_run_log
    from relay_notebook.record.folders import find_run
    from relay_notebook.runner.fork import ForkRequest
    from relay_notebook.runner.runs import start_fork

    _, workspace = confined
    other = Workspace(tmp_path / "other-workspace")
    victim = start_run(other, other.save_draft("doubler", relay_source("doubler")),
                       run_input={"xs": [1, 2]}).wait(120)  # fmt: skip
    assert victim.status == "succeeded"
    victim_db = find_run(other, victim.run_id).database
    before = victim_db.read_bytes()
    draft = workspace.save_draft("hostile", relay_source("hostile"))
    probes = {"swap": {"kind": "swap database", "path": str(victim_db)}}
    out = start_run(workspace, draft, run_input={"probes": probes}).wait(120)
    assert out.status == "failed" and out.error is not None
    assert out.error["code"] == "run-record-damaged"
    assert f"is a link to {victim_db}" in out.error["message"]
    assert "relay's code replaced it" in out.error["message"]
    with pytest.raises(RunRecordDamagedError, match="is a link to"):
        read_run_log(workspace, out.run_id)
    with pytest.raises(RunRecordDamagedError, match="is a link to"):
        start_fork(workspace, out.run_id, ForkRequest("attack"))
    assert victim_db.read_bytes() == before
    assert [s.name for s in read_run_log(other, victim.run_id).steps] == ["double", "double"]


def test_a_module_planted_in_execution_is_not_imported_by_the_next_attempts_start(
    confined: tuple[str, Workspace], tmp_path: Path
) -> None:
    """The relay leaves ``execution/relay_notebook/__init__.py`` (its working folder is
    writable), crashes, and is recovered: the next attempt starts in that folder, and a spawned
    one's first process imports the kit as root before the sandbox exists. It must find the
    kit, never the planted package (``python -P``): the recovery succeeds and the planted code
    never ran, outside the sandbox or in it."""
    from relay_notebook.runner.crash import parse_crash_spec
    from relay_notebook.runner.runs import start_recovery

    _, workspace = confined
    marker = tmp_path / "planted-code-ran"
    tmp_path.chmod(0o777)  # so the planted code could write it from the sandbox's uid too
    draft = workspace.save_draft("hostile", relay_source("hostile"))
    probes = {"plant": {"kind": "plant module", "name": "relay_notebook", "marker": str(marker)}}
    crashed = start_run(
        workspace, draft, run_input={"probes": probes}, crash=parse_crash_spec("after:attack")
    ).wait(120)
    assert crashed.status == "interrupted"
    recovered = start_recovery(workspace, crashed.run_id).wait(120)
    assert recovered.status == "succeeded", recovered.error
    assert recovered.result == {"plant": "done: planted"}
    assert not marker.exists()
