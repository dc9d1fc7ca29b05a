"""What an attempt's sandbox holds: the read allowlist, its writable areas, its network policy.

Design note: the plan is made by the supervisor, which can see everything, and carried to the
process that builds the sandbox (``runner.sandbox``) as JSON. A relay reads only what it needs:

- the system: ``/usr`` (and the ``/bin``, ``/lib*`` links into it), ``/etc`` (DNS, TLS
  certificates, users; its secret files are readable by root only, which a relay is not);
- the interpreter and the environment the child runs in (``sys.prefix``, the base
  interpreter, ``sys.path``), and of a source checkout only the kit's two packages;
- the relay's code (the draft's folder without its runs and releases, or the release), its run
  folder, the workspace's ``mcp_servers.yaml`` and the files its servers name, the read-only
  DBOS template;
- a private ``/tmp`` (the attempt's own), a minimal ``/dev``, its own ``/proc``.

Nothing else exists in its root: no home folder (Jupyter's runtime files, SSH keys, histories),
no ``/root``, no other workspace, no vault, no other relay's drafts or runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentworks.mcp_servers import MCP_SERVERS_FILE, load_mcp_servers
from relay_notebook.errors import DatabaseOutOfReachError, RelayError
from relay_notebook.runner.dbos_template import template_path
from relay_notebook.runner.sandbox import PASTA_MODES, sandbox_uid
from relay_notebook.workspace.access import AccessPolicy
from relay_notebook.workspace.manifest import MANIFEST_FILE, load_manifest, network_endpoints

if TYPE_CHECKING:
    from relay_notebook.record.backend import Backend
    from relay_notebook.runner.attempt_request import AttemptRequest
    from relay_notebook.runner.confine import WriteRules

__all__ = [
    "SYSTEM_READS",
    "attempt_plan",
    "hand_over",
    "loopback_endpoint",
    "make_plan",
    "pasta_available",
    "python_reads",
    "refuse_unreachable_database",
    "sandbox_probe",
]

#: the system's share of every sandbox (missing ones are skipped)
_MODEL_URL = "OPENAI_BASE_URL"
SYSTEM_READS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")


@functools.cache
def python_reads() -> list[str]:
    """The interpreter, its libraries and this environment's packages (of a source checkout on
    ``sys.path``, only the kit's own packages)."""
    import agentworks

    kit = Path(__file__).resolve().parents[1]  # relay_notebook/, this module's package's parent
    packages = {str(kit), str(Path(str(agentworks.__file__)).resolve().parent)}
    checkouts = {str(Path(p).parent) for p in packages}
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    found += [str(Path(sys.executable).resolve().parent.parent)]
    # sys.path[0] is the script's folder or the working folder (a home, a project): not the
    # interpreter's, so not a relay's; nor is the script's folder once a program put another
    # folder first (sys.path.insert(0, ...)), unless the script is an installed one
    private = {str(Path(sys.path[0] or ".").resolve()), str(Path.cwd())} if sys.path else set()
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if script:
        folder = str(Path(script).resolve().parent)
        if not _inside(folder, _outermost(found)):
            private.add(folder)
    for entry in sys.path:
        if not entry or not os.path.exists(entry):
            continue
        resolved = str(Path(entry).resolve())
        if resolved in checkouts or resolved in private:
            continue  # a checkout holds tests, notebooks, maybe workspaces: its packages only
        found.append(resolved)
    found += sorted(packages)
    return _outermost(found)


def _outermost(paths: Iterable[str]) -> list[str]:
    """``paths`` without those inside another one, in order."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths}, key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def loopback_endpoint(url: str | None) -> str | None:
    """``HOST:PORT`` of a URL on this machine's loopback, else None."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if host is None or not (host.startswith("127.") or host in ("localhost", "::1")):
        return None
    default = {"postgresql": 5432, "postgres": 5432, "http": 80, "https": 443}
    scheme = parts.scheme.split("+")[0]
    port = port or default.get(scheme)
    return None if port is None else f"{host}:{port}"


def refuse_unreachable_database(relay: str, code_dir: Path, backend: Backend) -> None:
    """Refuse, before anything starts, a confined run its sandbox could not keep: a relay that
    declares ``network: none`` reaches its run's PostgreSQL server only on this machine's
    loopback (see ``attempt_plan``), and DBOS, in the relay's process, keeps the run's state
    there. Each attempt would otherwise exit at DBOS's launch and leave the run interrupted."""
    if backend.url is None or loopback_endpoint(backend.url) is not None:
        return
    try:
        mode, _ = network_endpoints(load_manifest(code_dir / MANIFEST_FILE))
    except (OSError, RelayError):
        return  # a broken manifest is the relay's own error, reported where it is read
    if mode != "none":
        return
    raise DatabaseOutOfReachError(
        f"Relay {relay} cannot run on {backend.display}: it declares `network: none` in "
        f"{MANIFEST_FILE}, so its sandbox reaches no server but one on this machine's loopback, "
        f"and DBOS keeps the run's state on that server from inside it. Remove "
        f"`network: none` (the relay then reaches the outside, where the server is), or keep "
        f"its runs on a PostgreSQL server on this machine."
    )


def _with_links(paths: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Each path's real location to bind, and the links to recreate on the way to it."""
    reads: list[str] = []
    links: list[tuple[str, str]] = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        real = os.path.realpath(path)
        if (
            real != path
            and os.path.islink(path)
            and os.path.realpath(os.path.dirname(path)) == (os.path.dirname(path))
        ):
            links.append((path, os.readlink(path)))
        reads.append(real)
    return reads, links


@functools.cache
def _system_reads() -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """What every attempt of this process reads besides its own files: the system's folders
    (and the links to recreate on the way to them), the resolver's and the clock's files, the
    interpreter and its packages; looked up once per process (about 200 file lookups)."""
    system, links = _with_links(SYSTEM_READS)
    etc_links = [p for p in ("/etc/resolv.conf", "/etc/localtime") if os.path.islink(p)]
    reads = _outermost(system + [os.path.realpath(p) for p in etc_links])
    reads += [p for p in python_reads() if not _inside(p, reads)]
    return tuple(reads), links


def make_plan(
    rules: WriteRules,
    *,
    staging: Path,
    code_dir: Path,
    run_dir: Path,
    extra_reads: Sequence[Path] = (),
    network: str = "outside",
    allow: Sequence[str] = (),
    net_fd: int,
) -> dict[str, Any]:
    """The plan ``runner.sandbox.enter_sandbox`` builds (JSON): ``rules``' writable areas and
    working folder; ``net_fd`` is the descriptor number the child is given its network word
    at."""
    writable, cwd = rules.writable, rules.cwd
    staging.mkdir(mode=0o700, exist_ok=True)
    system, links = _system_reads()
    mounts: list[tuple[str, str]] = [("read", p) for p in system]
    code = str(code_dir.resolve())
    mounts.append(("read", code))
    for hidden in ("runs", "releases"):  # other runs of the relay, its frozen releases
        if (code_dir / hidden).is_dir():
            mounts.append(("empty", f"{code}/{hidden}"))
    for path in extra_reads:
        if path.exists():
            mounts.append(("read", str(path.resolve())))
    mounts.append(("read", str(run_dir.resolve())))
    mounts += [("write", str(Path(p).resolve())) for p in writable]
    return {
        "staging": str(staging),
        "links": list(links),
        "mounts": mounts,
        "writable": [str(p) for p in writable],
        "cwd": str(cwd),
        "network": {"mode": network, "allow": list(allow)},
        "net_fd": net_fd,
        # whose attempt it is: only one relay's attempts share a network, in turn (see
        # runner.sandbox_net)
        "relay": code,
    }


def attempt_plan(
    request: AttemptRequest,
    rules: WriteRules,
    *,
    staging: Path,
    environ: Mapping[str, str],
    net_fd: int,
) -> dict[str, Any]:
    """The plan of the attempt ``request`` asks for: its relay's manifest says what it may
    reach; the run's database, the workspace's model server (``OPENAI_BASE_URL``) and its
    ``url:`` MCP servers on loopback are reachable too, since the workspace, not the relay,
    declared them. Run by root, the writable areas are handed to the sandbox's uid first.
    ``environ`` is the child's environment, ``net_fd`` the descriptor number its network word
    is given at."""
    code_dir, secrets = request.code_dir, request.secrets
    mode, allow = "outside", list[str]()
    with contextlib.suppress(OSError, RelayError):
        mode, allow = network_endpoints(load_manifest(code_dir / MANIFEST_FILE))
    urls = [request.backend.url, secrets.get(_MODEL_URL), environ.get(_MODEL_URL)]
    with contextlib.suppress(Exception):  # a broken file is the relay's error to report
        urls += [s.url for s in load_mcp_servers(request.context.workspace).values() if s.url]
    for url in urls:
        endpoint = loopback_endpoint(url)
        if endpoint is not None and mode == "outside":
            allow.append(endpoint)
    database = loopback_endpoint(request.backend.url)
    if mode == "none" and database is not None:
        # the kit's own need, not the relay's reach: DBOS in the relay's process keeps the
        # run's state there, so ``network: none`` is the run's database and nothing else
        mode, allow = "database", [database]
    if mode in PASTA_MODES and not pasta_available():
        mode = "isolated"  # no way out: nothing reachable but the sandbox's own loopback
    hand_over(rules, sandbox_uid())
    return make_plan(
        rules,
        staging=staging,
        code_dir=code_dir,
        run_dir=request.folder.path,
        extra_reads=_workspace_reads(request.context.workspace),
        network=mode,
        allow=allow,
        net_fd=net_fd,
    )


def _workspace_reads(workspace: Path) -> list[Path]:
    """The workspace files a run reads: its MCP servers' declarations, the commands and files
    they name, the access policy; and the DBOS template."""
    access = AccessPolicy(workspace).folder  # read live by every admission: a folder
    access.mkdir(exist_ok=True)
    found: list[Path] = [workspace / MCP_SERVERS_FILE, access]
    with contextlib.suppress(Exception):  # a broken file is the relay's error to report
        for server in load_mcp_servers(workspace).values():
            found += [Path(p) for p in (server.command, *server.args) if os.path.isabs(p)]
    template = _template()
    if template is not None:
        found.append(template)
    return [p for p in found if p.exists()]


def hand_over(rules: WriteRules, uid: int) -> None:
    """The writable areas (and what is in them) owned by ``uid``, the identity the relay will
    have outside, so that it can write them whoever wrote them before. Only root hands over."""
    if os.geteuid() != 0:
        return
    for top in rules.writable:
        for path in _tree(top, uid):
            with contextlib.suppress(FileNotFoundError):
                if os.lstat(path).st_uid != uid:
                    os.lchown(path, uid, uid)


def _tree(top: Path, uid: int) -> Iterable[str]:
    handed = os.lstat(top).st_uid == uid
    yield str(top)
    if top.is_dir() and not top.is_symlink():
        if handed and top.name == "execution":
            return  # the relay's own files, made by that identity already
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                yield os.path.join(folder, name)


@functools.cache
def _template() -> Path | None:
    """The DBOS template's path, hashed once per process (as the warm parent does)."""
    return template_path()


@functools.cache
def sandbox_probe() -> dict[str, Any] | None:
    """Whether a spawned child can enter the sandbox here, asked of a fresh process once
    (``runner.sandbox_exec --probe``): ``{"namespaces": bool, "landlock": ABI}``."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "relay_notebook.runner.sandbox_exec", "--probe"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        answer = json.loads(done.stdout or "null")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def _inside(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def pasta_available() -> bool:
    """Whether pasta (Debian's ``passt``) is installed: the outside is reachable only with it."""
    return shutil.which("pasta") is not None
