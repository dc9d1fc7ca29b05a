"""The relay REST API over real HTTP: a real Jupyter server, real runs, the OpenAPI contract.

Every response is validated against the schema ``openapi.yaml`` documents for its route and
status, so the document and the server cannot drift apart unnoticed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from relay_notebook.history.run_events import read_run_events
from relay_notebook.server import OPENAPI_PATH
from relay_notebook.server.handlers import ROUTES, NoRouteHandler
from relay_notebook.workspace import Workspace
from tests.polling import wait_until
from tests.relays import relay_source

ROOT = Path(__file__).resolve().parents[2]
SPEC: dict[str, Any] = yaml.safe_load(OPENAPI_PATH.read_text(encoding="utf-8"))
GRAPH_SCHEMA = ROOT / "relay_notebook" / "schemas" / "relay-graph-v1.schema.json"
REGISTRY: Registry[Any] = Registry().with_resources(
    [
        (OPENAPI_PATH.as_uri(), Resource.from_contents(SPEC, default_specification=DRAFT202012)),
        (GRAPH_SCHEMA.as_uri(), Resource.from_contents(json.loads(GRAPH_SCHEMA.read_text()))),
    ]
)
TOKEN = "relay-api-test-token"
UNFINISHED = {"pending", "running"}

SHOP = textwrap.dedent(
    """
    def charge(sku):
        with open("charges.log", "a") as fh:  # relative: the run's execution folder
            fh.write(sku + "\\n")
        return {"charged": sku}


    async def run(INPUT, ctx):
        paid = await ctx.step("charge", charge, arguments={"sku": INPUT["sku"]})
        return {"paid": paid}
    """
)
NAP = relay_source("slow")
BAD = relay_source("bad")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Server:
    """A `jupyter server` subprocess with the relay extension, and an HTTP client for it."""

    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path
    seen: set[tuple[str, str, int]] = field(default_factory=set)

    def call(
        self,
        method: str,
        template: str,
        params: dict[str, str] | None = None,
        *,
        body: Any = None,
        raw: bytes | None = None,
        query: str = "",
        headers: dict[str, str] | None = None,
        token: str | None = TOKEN,
    ) -> Reply:
        """Send one request to ``template`` (an OpenAPI path) and validate the response."""
        path = template.format(**{k: quote(v, safe="") for k, v in (params or {}).items()})
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(
            f"{self.url}relay/api{path}{query}", data=data, method=method
        )
        request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"token {token}")
        for k, v in (headers or {}).items():
            request.add_header(k, v)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                reply = Reply(response.status, dict(response.headers), json.load(response))
        except urllib.error.HTTPError as err:
            reply = Reply(err.code, dict(err.headers), json.loads(err.read()))
        validate(reply, method, template)
        self.seen.add((method, template, reply.status))
        return reply

    def finish(self, run_id: str, timeout: float = 120) -> dict[str, Any]:
        """Poll the run until it is neither pending nor running."""

        def finished() -> dict[str, Any] | None:
            run: dict[str, Any] = self.call("GET", "/runs/{run_id}", {"run_id": run_id}).body
            return run if run["status"] not in UNFINISHED else None

        return wait_until(finished, timeout, 0.1, what=f"run {run_id} to finish")


def validate(reply: Reply, method: str, template: str) -> None:
    """The reply's status is documented for the operation and its body matches the schema."""
    responses = SPEC["paths"][template][method.lower()]["responses"]
    assert str(reply.status) in responses, f"{method} {template}: undocumented {reply.status}"
    pointer = "/".join(
        ["#", "paths", template.replace("/", "~1"), method.lower(), "responses", str(reply.status)]
    )
    response = responses[str(reply.status)]
    if "$ref" in response:
        pointer = response["$ref"]
    pointer += "/content/application~1json/schema"
    schema = {"$ref": OPENAPI_PATH.as_uri() + quote(pointer, safe="#/~")}
    errors = list(Draft202012Validator(schema, registry=REGISTRY).iter_errors(reply.body))
    assert not errors, f"{method} {template} {reply.status}: {errors[0].message}\n{reply.body}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(root: Path, *extra: str, home: Path | None = None) -> Server:
    """Start `jupyter server` on loopback; the shipped jupyter-config enables the extension."""
    state = root.parent / f"{root.name}-jupyter"
    for d in ("config", "runtime", "data"):
        (state / d).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "RELAY_HOME"}
    env.update(
        JUPYTER_CONFIG_DIR=str(state / "config"),
        JUPYTER_RUNTIME_DIR=str(state / "runtime"),
        JUPYTER_DATA_DIR=str(state / "data"),
        # the config file the wheel installs into etc/jupyter, read from the source tree
        JUPYTER_CONFIG_PATH=str(ROOT / "jupyter-config"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    port = free_port()
    log = state / "server.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "jupyter_app.py"),  # python -m, without the IRI grammar
                "jupyter_server",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={TOKEN}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.allow_root=True",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"

    def ready() -> bool:
        assert process.poll() is None, f"jupyter server exited:\n{log.read_text()[-3000:]}"
        request = urllib.request.Request(url + "api/status")
        request.add_header("Authorization", f"token {TOKEN}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    wait_until(ready, 60, 0.1, what=lambda: f"the server to answer:\n{log.read_text()[-3000:]}")
    return Server(url, home or root / "relays", process, log)


def stop_server(server: Server) -> None:
    """SIGTERM (the extension's shutdown hook runs), then kill the process group."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(10)


@contextlib.contextmanager
def seeded_server(
    tmp_path_factory: pytest.TempPathFactory, name: str, seed: Callable[[Path], None]
) -> Iterator[Server]:
    """A server on a new root folder whose workspace ``<root>/relays`` ``seed`` filled first,
    stopped on leaving."""
    root = tmp_path_factory.mktemp(name) / "root"
    root.mkdir()
    seed(root / "relays")
    server = start_server(root)
    try:
        yield server
    finally:
        stop_server(server)


def seed(home: Path) -> None:
    """The relays the tests call: five (native DBOS), shop (legacy ctx), nap, and a bad one."""
    ws = Workspace(home)
    ws.save_draft("five", relay_source("five"))
    ws.save_draft("shop", SHOP)
    ws.save_draft("nap", NAP)
    ws.save_draft("broken", BAD)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module, serving ``<root_dir>/relays`` (no RELAY_HOME, no trait)."""
    with seeded_server(tmp_path_factory, "api", seed) as srv:
        yield srv
    log = srv.log.read_text()
    uncaught = re.findall(r"Uncaught exception (\S+ \S+)", log)
    assert set(uncaught) <= {"POST /relay/api/relays/nap/runs"}, log[-3000:]


def documented() -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in SPEC["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    }


def test_the_openapi_document_and_the_routes_match() -> None:
    """Every documented path and method has a route and handler method, and vice versa."""
    implemented = set()
    for pattern, handler, _ in ROUTES:
        if handler is NoRouteHandler:
            continue
        template = re.sub(r"\(\?P<(\w+)>(?:\[\^/\]\+|\.\+)\)", r"{\1}", pattern).removeprefix(
            "relay/api"
        )
        for method in ("get", "post", "put", "patch", "delete"):
            if method in vars(handler):
                implemented.add((method.upper(), template))
    assert implemented == documented()
    Draft202012Validator.check_schema({"$defs": SPEC["components"]["schemas"]})


def test_every_route_requires_the_server_token(server: Server) -> None:
    """Without a token, or with a wrong one, every operation answers 403 `forbidden`."""
    params = {"name": "five", "run_id": "five-1", "path": "call-1/receipt.json"}
    for method, template in sorted(documented()):
        for token in (None, "not-the-token"):
            body = {} if method == "POST" else None
            reply = server.call(method, template, params, body=body, token=token)
            assert reply.status == 403, (method, template, reply.body)
            assert reply.body["error"]["code"] == "forbidden"


def test_every_documented_operation_answers_and_other_urls_are_json_404s(server: Server) -> None:
    """A documented route never falls through; an unknown URL or method is a JSON error."""
    params = {"name": "ghost", "run_id": "ghost-1", "path": "call-1/receipt.json"}
    for method, template in sorted(documented()):
        body = {"retry": True} if method == "POST" else None
        reply = server.call(method, template, params, body=body)
        error = reply.body.get("error", {}) if isinstance(reply.body, dict) else {}
        assert error.get("code") not in {"route-not-found", "method-not-allowed"}, (
            method,
            template,
            reply.body,
        )
    for url, method, code in [
        ("relay/api/nowhere", "GET", "route-not-found"),
        ("relay/api/runs/five-1/steps", "GET", "route-not-found"),
        ("relay/api/relays", "DELETE", "method-not-allowed"),
    ]:
        request = urllib.request.Request(server.url + url, method=method)
        request.add_header("Authorization", f"token {TOKEN}")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        assert json.loads(caught.value.read())["error"]["code"] == code


def test_a_relay_is_listed_with_its_graph_and_check_report(server: Server) -> None:
    """GET relays lists the workspace; GET relays/five has the flow graph and an ok check."""
    listed = {r["name"]: r for r in server.call("GET", "/relays").body}
    assert set(listed) >= {"five", "shop", "nap", "broken"}
    assert listed["five"]["access"] == "granted"
    five = server.call("GET", "/relays/{name}", {"name": "five"}).body
    assert five["check"]["ok"] is True and five["manifest"]["relay_durability"] == "dbos"
    labels = {n["label"] for n in five["graph"]["nodes"] if n["type"] == "step"}
    assert {"fetch", "add"} <= labels
    broken = server.call("GET", "/relays/{name}", {"name": "broken"}).body
    assert broken["check"]["ok"] is False and broken["check"]["errors"] >= 1


def test_publishing_creates_a_release_once(server: Server) -> None:
    """The first publish is 201 with a new release; publishing the same draft again is 200."""
    first = server.call("POST", "/relays/{name}/releases", {"name": "five"})
    assert first.status in {200, 201}
    again = server.call("POST", "/relays/{name}/releases", {"name": "five"})
    assert again.status == 200 and again.body["created"] is False
    assert again.body["hash"] == first.body["hash"]
    listed = server.call("GET", "/relays/{name}/releases", {"name": "five"}).body
    assert [r["hash"] for r in listed][-1] == first.body["hash"]
    summary = {r["name"]: r for r in server.call("GET", "/relays").body}["five"]
    assert summary["latest"] == {"version": first.body["version"], "hash": first.body["hash"]}


def test_a_run_is_started_and_polled_until_it_succeeds(server: Server) -> None:
    """POST runs answers 202 at once; polling the run shows its result, steps and trace."""
    started = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body={"input": {"n": 3}})
    assert started.status == 202 and started.body["relay"] == "five"
    run_id = started.body["run_id"]
    assert started.headers["Location"].endswith(f"/relay/api/runs/{run_id}")
    run = server.finish(run_id)
    assert run["status"] == "succeeded" and run["result"] == {"total": 30}
    assert [s["name"] for s in run["steps"]].count("fetch") == 3
    assert run["trace"]["run_id"] == run_id and run["pending_calls"] == []
    listed = server.call("GET", "/runs", query="?relay=five").body
    assert run_id in [r["run_id"] for r in listed]
    assert run_id in [r["run_id"] for r in server.call("GET", "/runs").body]


def test_a_release_is_run_by_reference(server: Server) -> None:
    """A run with "release": "latest" runs the frozen release and says which."""
    release = server.call("POST", "/relays/{name}/releases", {"name": "five"}).body
    body = {"input": {"n": 2}, "release": "latest"}
    started = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body)
    run = server.finish(started.body["run_id"])
    assert run["status"] == "succeeded" and run["result"] == {"total": 10}
    assert run["release"] == {"version": release["version"], "hash": release["hash"]}


def test_a_crashed_run_is_recovered_with_reused_checkpoints(server: Server) -> None:
    """Crash after fetch#2, recover over the API: the run succeeds and reuses checkpoints."""
    body = {"input": {"n": 3}, "crash": "after:fetch#2"}
    started = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body)
    run_id = started.body["run_id"]
    crashed = server.finish(run_id)
    assert crashed["status"] == "interrupted" and crashed["error"]["code"] == "interrupted"
    recovering = server.call("POST", "/runs/{run_id}/recover", {"run_id": run_id})
    assert recovering.status == 202 and recovering.body["attempt"] == 2
    run = server.finish(run_id)
    assert run["status"] == "succeeded" and run["result"] == {"total": 30}
    assert run["attempt"] == 2 and run["attempts"][1]["reused"]
    assert any(2 in s["reused_in"] for s in run["steps"] if s["name"] == "fetch")
    again = server.call("POST", "/runs/{run_id}/recover", {"run_id": run_id})
    assert again.status == 200 and again.body["status"] == "succeeded"
    assert again.body["result"] == {"total": 30} and again.body["attempt"] == 2


def test_an_idempotency_key_returns_the_same_run(server: Server) -> None:
    """A repeated delivery with the same key answers 200 with the first run; no second run."""
    before = len(server.call("GET", "/runs", query="?relay=five").body)
    body = {"input": {"n": 1}}
    key = {"Idempotency-Key": "order-7f3a"}
    first = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body, headers=key)
    second = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body, headers=key)
    assert (first.status, second.status) == (202, 200)
    assert second.body["run_id"] == first.body["run_id"]
    assert len(server.call("GET", "/runs", query="?relay=five").body) == before + 1
    other = {"input": {"n": 2}}
    reused = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=other, headers=key)
    assert reused.status == 422 and reused.body["error"]["code"] == "idempotency-key-reused"
    assert first.body["run_id"] in reused.body["error"]["message"]
    server.finish(first.body["run_id"])


def test_racing_deliveries_of_one_key_start_one_run(server: Server) -> None:
    """Four simultaneous deliveries with one key: one 202, three 200s, all the same run."""
    body = {"input": {"n": 2}}
    key = {"Idempotency-Key": "race-1"}

    def deliver(_: int) -> Reply:
        return server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body, headers=key)

    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(deliver, range(4)))
    assert sorted(r.status for r in replies) == [200, 200, 200, 202]
    assert len({r.body["run_id"] for r in replies}) == 1
    assert server.finish(replies[0].body["run_id"])["result"] == {"total": 10}


def test_bad_input_is_a_400_with_a_stable_code(server: Server) -> None:
    """Malformed bodies, fields, crash specs, names, run ids and keys are 400s with codes."""
    five = {"name": "five"}
    cases: list[tuple[str, str, dict[str, str], dict[str, Any], str]] = [
        ("POST", "/relays/{name}/runs", five, {"raw": b"{not json"}, "invalid-request"),
        ("POST", "/relays/{name}/runs", five, {"body": [1, 2]}, "invalid-request"),
        ("POST", "/relays/{name}/runs", five, {"body": {"inputs": {}}}, "invalid-request"),
        ("POST", "/relays/{name}/runs", five, {"body": {"release": 3}}, "invalid-request"),
        (
            "POST",
            "/relays/{name}/runs",
            five,
            {"body": {"crash": "sideways"}},
            "invalid-crash-spec",
        ),
        (
            "POST",
            "/relays/{name}/runs",
            five,
            {"body": {"crash": "after:nosuch"}},
            "invalid-crash-spec",
        ),
        (
            "POST",
            "/relays/{name}/runs",
            five,
            {"body": {}, "headers": {"Idempotency-Key": "k" * 300}},
            "invalid-request",
        ),
        ("GET", "/relays/{name}", {"name": "no.such"}, {}, "invalid-relay-name"),
        ("POST", "/relays/{name}/runs", {"name": "../five"}, {}, "invalid-relay-name"),
        ("GET", "/runs/{run_id}", {"run_id": "not a run"}, {}, "invalid-run-id"),
        ("POST", "/relays/{name}/releases", five, {"raw": b"[oops"}, "invalid-request"),
    ]
    before = len(server.call("GET", "/runs", query="?relay=five").body)
    for method, template, params, kwargs, code in cases:
        reply = server.call(method, template, params, **kwargs)
        assert reply.status == 400, (template, kwargs, reply.body)
        assert reply.body["error"]["code"] == code, (template, kwargs, reply.body)
        assert "Traceback" not in reply.body["error"]["message"]
    assert len(server.call("GET", "/runs", query="?relay=five").body) == before


def test_an_unexpected_failure_is_a_500_without_a_traceback(server: Server) -> None:
    """A hand-corrupted idempotency record answers 500 `internal-error`; the log keeps details."""
    record = server.home / ".relay_api" / "idempotency.json"
    record.parent.mkdir(exist_ok=True)
    saved = record.read_bytes() if record.exists() else None
    record.write_text("{half a record")
    try:
        key = {"Idempotency-Key": "after-corruption"}
        reply = server.call("POST", "/relays/{name}/runs", {"name": "nap"}, body={}, headers=key)
    finally:
        if saved is None:
            record.unlink()
        else:
            record.write_bytes(saved)
    assert reply.status == 500 and reply.body["error"]["code"] == "internal-error"
    assert "Traceback" not in reply.body["error"]["message"]
    assert "JSONDecodeError" in server.log.read_text()


def test_an_unknown_relay_release_or_run_is_a_404(server: Server) -> None:
    """A relay, release or run that does not exist answers 404 with what to do next."""
    cases: list[tuple[str, str, dict[str, str], dict[str, Any], str, str]] = [
        ("GET", "/relays/{name}", {"name": "ghost"}, {}, "", "relay-not-found"),
        ("POST", "/relays/{name}/runs", {"name": "ghost"}, {"body": {}}, "", "relay-not-found"),
        ("POST", "/relays/{name}/grant", {"name": "ghost"}, {}, "", "relay-not-found"),
        ("GET", "/runs", {}, {}, "?relay=ghost", "relay-not-found"),
        ("GET", "/runs/{run_id}", {"run_id": "five-999"}, {}, "", "run-not-found"),
        ("POST", "/runs/{run_id}/recover", {"run_id": "five-999"}, {}, "", "run-not-found"),
        (
            "POST",
            "/relays/{name}/runs",
            {"name": "five"},
            {"body": {"release": "v99"}},
            "",
            "release-not-found",
        ),
    ]
    for method, template, params, kwargs, query, code in cases:
        reply = server.call(method, template, params, query=query, **kwargs)
        assert reply.status == 404, (template, reply.body)
        assert reply.body["error"]["code"] == code


def test_reconcile_with_nothing_pending_is_refused(server: Server) -> None:
    """Reconciling a run with no uncertain call, or with a malformed body, is a 400."""
    started = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body={"input": {"n": 1}})
    run_id = started.body["run_id"]
    server.finish(run_id)
    nothing = server.call(
        "POST", "/runs/{run_id}/reconcile", {"run_id": run_id}, body={"result": {"ok": True}}
    )
    assert nothing.status == 400 and nothing.body["error"]["code"] == "nothing-to-reconcile"
    assert f"POST relay/api/runs/{run_id}/recover" in nothing.body["error"]["message"]
    for body in ({}, {"result": 1, "retry": True}, {"retry": "yes"}, {"answer": 1}):
        reply = server.call("POST", "/runs/{run_id}/reconcile", {"run_id": run_id}, body=body)
        assert reply.status == 400 and reply.body["error"]["code"] == "invalid-request", body


def test_an_uncertain_call_is_reconciled_and_the_run_recovered(server: Server) -> None:
    """A ctx.step cut off mid-call holds recovery; reconcile gives its result; recovery ends."""
    body = {"input": {"sku": "A"}, "crash": "during:step:charge"}
    run_id = server.call("POST", "/relays/{name}/runs", {"name": "shop"}, body=body).body["run_id"]
    assert server.finish(run_id)["status"] == "interrupted"
    held = server.call("POST", "/runs/{run_id}/recover", {"run_id": run_id})
    assert held.status == 200 and held.body["status"] == "needs_reconciliation"
    pending = server.call("GET", "/runs/{run_id}", {"run_id": run_id}).body["pending_calls"]
    assert len(pending) == 1
    decided = server.call(
        "POST", "/runs/{run_id}/reconcile", {"run_id": run_id}, body={"result": {"charged": "A"}}
    )
    assert decided.status == 200 and decided.body["key"] == pending[0]["key"]
    assert decided.body["state"] == "done"
    assert server.call("POST", "/runs/{run_id}/recover", {"run_id": run_id}).status == 202
    run = server.finish(run_id)
    assert run["status"] == "succeeded" and run["result"] == {"paid": {"charged": "A"}}
    charges = server.home / "shop" / "runs" / f"iteration-{run_id.rsplit('-', 1)[1]}-hook"
    assert (charges / "execution/charges.log").read_text().splitlines() == ["A"]  # not twice


def test_revoked_access_denies_runs_and_recovery_until_granted(server: Server) -> None:
    """After revoke a new run is 409 and recovery is denied; after grant recovery succeeds."""
    body = {"input": {"n": 2}, "crash": "after:fetch#1"}
    run_id = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body).body["run_id"]
    assert server.finish(run_id)["status"] == "interrupted"
    revoked = server.call("POST", "/relays/{name}/revoke", {"name": "five"})
    assert revoked.body == {"relay": "five", "access": "revoked"}
    try:
        refused = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body={})
        assert refused.status == 409 and refused.body["error"]["code"] == "access-revoked"
        denied = server.call("POST", "/runs/{run_id}/recover", {"run_id": run_id})
        assert denied.status == 200 and denied.body["status"] == "denied"
    finally:
        granted = server.call("POST", "/relays/{name}/grant", {"name": "five"})
    assert granted.body["access"] == "granted"
    assert server.call("POST", "/runs/{run_id}/recover", {"run_id": run_id}).status == 202
    assert server.finish(run_id)["status"] == "succeeded"


def test_a_relay_failing_admission_is_a_422_with_diagnostics(server: Server) -> None:
    """Publishing or running a relay that fails admission is 422 with every diagnostic."""
    for template in ("/relays/{name}/releases", "/relays/{name}/runs"):
        reply = server.call("POST", template, {"name": "broken"}, body={})
        assert reply.status == 422 and reply.body["error"]["code"] == "admission-failed"
        codes = {d["code"] for d in reply.body["error"]["diagnostics"]}
        assert codes, reply.body


def test_keys_survive_a_restart_and_shutdown_interrupts_live_runs(tmp_path: Path) -> None:
    """Stopping the server interrupts its live run; a restarted server still knows the key."""
    root = tmp_path / "root"
    root.mkdir()
    home = root / "ws"
    seed(home)
    first = start_server(root, "--RelayExtension.home=ws", home=home)
    try:
        key = {"Idempotency-Key": "nap-1"}
        body = {"input": {"seconds": 600}}
        started = first.call("POST", "/relays/{name}/runs", {"name": "nap"}, body=body, headers=key)
        run_id = started.body["run_id"]
        wait_until(
            lambda: first.call("GET", "/runs/{run_id}", {"run_id": run_id}).body["steps"],
            interval=0.1,
            what="the nap step to start",
        )
    finally:
        stop_server(first)
    assert (home / ".relay_api" / "idempotency.json").is_file()
    second = start_server(root, "--RelayExtension.home=ws", home=home)
    try:
        run = second.call("GET", "/runs/{run_id}", {"run_id": run_id}).body
        assert run["status"] == "interrupted" and run["error"]["code"] == "interrupted"
        again = second.call("POST", "/relays/{name}/runs", {"name": "nap"}, body=body, headers=key)
        assert again.status == 200 and again.body["run_id"] == run_id
        assert [r["run_id"] for r in second.call("GET", "/runs").body] == [run_id]
    finally:
        stop_server(second)


def test_the_api_runs_and_recovers_on_postgresql(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started with RELAY_DATABASE_URL runs, crashes and recovers on PostgreSQL; its
    responses (attempts with their executor) still match the OpenAPI document."""
    root = tmp_path / "root"
    root.mkdir()
    seed(root / "relays")
    monkeypatch.setenv("RELAY_DATABASE_URL", database_url)
    srv = start_server(root)
    try:
        body = {"input": {"n": 3}, "crash": "after:fetch#2"}
        run_id = srv.call("POST", "/relays/{name}/runs", {"name": "five"}, body=body).body["run_id"]
        assert srv.finish(run_id)["status"] == "interrupted"
        srv.call("POST", "/runs/{run_id}/recover", {"run_id": run_id})
        run = srv.finish(run_id)
        assert run["status"] == "succeeded" and run["result"] == {"total": 30}
        assert [a["executor_id"] for a in run["attempts"]] == ["relay-local", "relay-local"]
        assert any(2 in s["reused_in"] for s in run["steps"] if s["name"] == "fetch")
    finally:
        stop_server(srv)
    meta = json.loads((root / "relays/five/runs/iteration-1-hook/run.json").read_text())
    assert meta["database"]["kind"] == "postgresql"
    assert not (root / "relays/five/runs/iteration-1-hook/.relay_dbos/dbos.sqlite").exists()


def test_a_run_is_forked_over_the_api(server: Server) -> None:
    """POST /runs/{id}/fork from fetch#2 with a new output for add#1 starts a run whose first
    two calls are copied (one edited) and the rest fresh; a call never made is a 409."""
    started = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body={"input": {"n": 3}})
    parent = server.finish(started.body["run_id"])
    assert parent["result"] == {"total": 30}
    body = {"from": "fetch#2", "set": {"add#1": 100}}
    forked = server.call("POST", "/runs/{run_id}/fork", {"run_id": parent["run_id"]}, body=body)
    assert forked.status == 202 and forked.body["run_id"] != parent["run_id"]
    run = server.finish(forked.body["run_id"])
    assert run["status"] == "succeeded" and run["result"] == {"total": 130}
    assert [s["copied_from"] for s in run["steps"]][:2] == [parent["run_id"], parent["run_id"]]
    assert run["graph"]["run"]["fork"]["edited"] == ["add#1"]
    refused = server.call(
        "POST", "/runs/{run_id}/fork", {"run_id": parent["run_id"]}, body={"from": "nope#1"}
    )
    assert refused.status == 409 and refused.body["error"]["code"] == "fork-refused"
    missing = server.call("POST", "/runs/{run_id}/fork", {"run_id": parent["run_id"]}, body={})
    assert missing.status == 400 and missing.body["error"]["code"] == "invalid-request"
    for member in (parent["run_id"], run["run_id"]):  # the same tree, asked from either run
        tree = server.call("GET", "/runs/{run_id}/lineage", {"run_id": member}).body
        assert tree["run_id"] == parent["run_id"] and "fork" not in tree
        assert [(f["run_id"], f["status"], f["fork"]["from"]) for f in tree["forks"]] == [
            (run["run_id"], "succeeded", "fetch#2")
        ]
    absent = server.call("GET", "/runs/{run_id}/lineage", {"run_id": "five-999"})
    assert absent.status == 404 and absent.body["error"]["code"] == "run-not-found"


def test_a_notebooks_own_workspace_is_served_by_parameter(server: Server) -> None:
    """``?workspace=`` serves another workspace under the root (the side panel passes the one a
    notebook's kernel uses): its relays, a run started and finished there, and its description;
    the server's own stays as it was; a folder outside the root or missing is refused."""
    root = server.home.parent
    Workspace(root / "notebooks" / "relays").save_draft("solo", relay_source("five"))
    own = server.call("GET", "/workspace").body
    assert own["home"] == str(server.home) and own["label"] == "relays" and own["default"]
    query = "?workspace=notebooks/relays"
    other = server.call("GET", "/workspace", query=query).body
    assert other["label"] == "notebooks/relays" and other["default"] is False
    assert other["relays"] == 1 and other["home"] == str(root / "notebooks" / "relays")
    listed = server.call("GET", "/relays", query=query).body
    assert [r["name"] for r in listed] == ["solo"]
    assert "solo" not in [r["name"] for r in server.call("GET", "/relays").body]
    started = server.call(
        "POST", "/relays/{name}/runs", {"name": "solo"}, body={"input": {"n": 2}}, query=query
    )
    run_id = started.body["run_id"]

    def finished() -> dict[str, object] | None:
        run = server.call("GET", "/runs/{run_id}", {"run_id": run_id}, query=query).body
        return None if run["status"] in UNFINISHED else run

    run = wait_until(finished, timeout=120, what=f"run {run_id} to finish")
    assert run["status"] == "succeeded" and run["result"] == {"total": 10}
    assert len(list((root / "notebooks" / "relays" / "solo" / "runs").glob("*/run.json"))) == 1
    missing = server.call("GET", "/runs/{run_id}", {"run_id": run_id})
    assert missing.status == 404 and missing.body["error"]["code"] == "run-not-found"
    outside = server.call("GET", "/relays", query="?workspace=/tmp")
    assert outside.status == 400 and outside.body["error"]["code"] == "workspace-refused"
    assert "--RelayExtension.home=/tmp" in outside.body["error"]["message"]
    absent = server.call("GET", "/workspace", query="?workspace=nowhere/relays")
    assert absent.status == 400 and absent.body["error"]["code"] == "workspace-not-found"
    # tornado drops control characters from query arguments: a NUL names no workspace
    nul = server.call("GET", "/relays", query="?workspace=%00")
    assert nul.status == 200 and "solo" not in [r["name"] for r in nul.body]
    unexpandable = server.call("GET", "/relays", query="?workspace=~nosuchuser/x")
    assert unexpandable.status == 400, unexpandable.body
    assert unexpandable.body["error"]["code"] in ("workspace-refused", "workspace-not-found")


def test_a_waiting_run_is_answered_by_a_message(tmp_path: Path) -> None:
    """``POST /runs/{id}/messages``: a run waiting for an approval resumes (202) and finishes
    with the message's value; the same Idempotency-Key again delivers nothing (200,
    ``duplicate``); a message to the finished run is refused (409, ``run-not-waiting``)."""
    root = tmp_path / "root"
    root.mkdir()
    Workspace(root / "relays").save_draft("refund", relay_source("refund"))
    srv = start_server(root, "--RelayExtension.wait_grace=0.5")
    try:
        started = srv.call(
            "POST", "/relays/{name}/runs", {"name": "refund"}, body={"input": {"order": "R-1"}}
        )
        run_id = started.body["run_id"]

        def status(wanted: str) -> dict[str, Any] | None:
            run = srv.call("GET", "/runs/{run_id}", {"run_id": run_id}).body
            return run if run["status"] == wanted else None

        run = wait_until(lambda: status("waiting"), timeout=120, what="the run to wait")
        assert run["error"]["code"] == "waiting"
        assert f"relay send {run_id} approval JSON" in run["error"]["message"]
        body = {"topic": "approval", "message": {"approved": True, "note": "via REST"}}
        key = {"Idempotency-Key": "approve-R-1"}
        sent = srv.call("POST", "/runs/{run_id}/messages", {"run_id": run_id}, body=body,
                        headers=key)  # fmt: skip
        assert sent.status == 202 and sent.body["resumed"] and not sent.body["duplicate"]
        run = wait_until(lambda: status("succeeded"), timeout=120, what="the run to finish")
        assert run["result"] == {"status": "paid", "paid": 40, "note": "via REST"}
        again = srv.call("POST", "/runs/{run_id}/messages", {"run_id": run_id}, body=body,
                         headers=key)  # fmt: skip
        assert again.status == 200 and again.body["duplicate"] and not again.body["resumed"]
        late = srv.call("POST", "/runs/{run_id}/messages", {"run_id": run_id}, body=body)
        assert late.status == 409 and late.body["error"]["code"] == "run-not-waiting"
        bad = srv.call("POST", "/runs/{run_id}/messages", {"run_id": run_id}, body={"message": 1})
        assert bad.status == 400 and bad.body["error"]["code"] == "invalid-request"
    finally:
        stop_server(srv)


def test_a_runs_events_and_streams_are_served(server: Server) -> None:
    """``GET /runs/{id}/events`` is the reader's document (values, function ids, the closed
    stream); the run's graph carries the latest of them for the side panel's strip."""
    Workspace(server.home).save_draft("streamer", relay_source("streamer"))
    body = {"input": {"parts": 2, "pause": 0.05}}
    started = server.call("POST", "/relays/{name}/runs", {"name": "streamer"}, body=body)
    run = server.finish(started.body["run_id"])
    assert run["status"] == "succeeded"
    events = server.call("GET", "/runs/{run_id}/events", {"run_id": run["run_id"]}).body
    assert events == read_run_events(Workspace(server.home), run["run_id"]).to_dict()
    assert [s["value"] for s in events["streams"]] == ["part 0", "part 1"]
    assert events["closed"] == [{"workflow_id": run["run_id"], "key": "output"}]
    strip = run["graph"]["run"]["events"]
    assert strip["events"][0]["preview"] == '{"done": 2}'
    assert strip["streams"][0]["count"] == 2
    absent = server.call("GET", "/runs/{run_id}/events", {"run_id": "streamer-999"})
    assert absent.status == 404 and absent.body["error"]["code"] == "run-not-found"


def test_a_fork_killed_while_it_was_made_is_served_and_recovered(server: Server) -> None:
    """`relay fork` killed after DBOS forked the workflow leaves the fork `creating`: REST lists
    and shows it as such (a status the schema documents) and `POST recover` finishes it."""
    Workspace(server.home).save_draft("forky", relay_source("five"))
    body = {"input": {"n": 2}}
    parent = server.finish(
        server.call("POST", "/relays/{name}/runs", {"name": "forky"}, body=body).body["run_id"]
    )
    assert parent["status"] == "succeeded"
    env = {**os.environ, "RELAY_HOME": str(server.home), "RELAY_TEST_KILL_AT": "fork:forked"}
    killed = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "fork", parent["run_id"], "--from", "add#2"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    listed = server.call("GET", "/runs", query="?relay=forky").body
    fork_id = next(r["run_id"] for r in listed if r["run_id"] != parent["run_id"])
    assert [r["status"] for r in listed if r["run_id"] == fork_id] == ["creating"]
    shown = server.call("GET", "/runs/{run_id}", {"run_id": fork_id}).body
    assert shown["status"] == "creating"
    server.call("POST", "/runs/{run_id}/recover", {"run_id": fork_id})
    done = server.finish(fork_id)
    assert done["status"] == "succeeded" and done["result"] == parent["result"], done
