"""Fuzzed CLI arguments and REST requests: every answer is a coded error, never a bug.

Hypothesis drives the real ``relay`` command in-process and a real Jupyter server over HTTP
(started as in test_rest_api). The relay that runs would start is revoked, so the fuzz costs no
child processes: an input that passed every check ends ``[access-revoked]``, not in a run.
"""

from __future__ import annotations

import contextlib
import io
import json
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay_notebook.cli import main
from relay_notebook.server.handlers import MAX_BODY_BYTES
from relay_notebook.workspace import Workspace
from tests.integration.test_rest_api import Server, seeded_server
from tests.relays import relay_path, relay_source

FUZZ = settings(
    max_examples=150,
    deadline=3000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,
)


def seed(home: Path) -> None:
    """five (revoked: nothing ever runs), nap (granted, for real runs) and a damaged run."""
    ws = Workspace(home)
    ws.save_draft("five", relay_source("five"))
    ws.save_draft("nap", relay_source("nap"))
    damaged = home / "five" / "runs" / "iteration-1-hook"
    damaged.mkdir(parents=True)
    (damaged / "run.json").write_text('{"run_id": "five-1", "attem')
    assert main(["--home", str(home), "revoke", "five"]) == 0


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded workspace plus odd files for path arguments."""
    root = tmp_path_factory.mktemp("fuzz")
    seed(root / "relays")
    (root / "latin.json").write_bytes(b'{"a": "\xe9"}')
    (root / "latin.py").write_bytes(b"x = '\xe9'\n")
    (root / "plain").write_text("not a folder")
    return root / "relays"


# -- the CLI ----------------------------------------------------------------------------------

argv_text = st.one_of(
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.text(st.characters(blacklist_characters="\x00"), max_size=40),
    st.sampled_from(["", "five", "five-1", "five-" + "9" * 5000, "five-" + "9" * 300,
                     "five-\u0661", "a" * 300, "é" * 200, "../five", "nap", "latest", "v1"]),
)  # fmt: skip
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)
json_text = st.one_of(
    json_value.map(lambda v: json.dumps(v, allow_nan=True)),
    argv_text,
    st.sampled_from(["NaN", "[Infinity]", '"\\udcff"', "[" * 3000 + "]" * 3000, "{" * 200]),
)


@st.composite
def command_lines(draw: st.DrawFn, root: Path) -> list[str]:
    """One ``relay`` command line, from the grammar of the parser, with fuzzed values."""
    home = draw(
        st.sampled_from(
            [str(root / "relays")] * 6
            + ["/proc", str(root / "plain" / "sub"), str(root / ("d" * 300)), "~nobody-x/r"]
        )
    )
    prefix = ["--home", home]
    if draw(st.integers(0, 9)) == 0:
        prefix += ["--database-url", draw(argv_text | st.just("postgresql://u@[::1/db"))]
    path = st.sampled_from(
        [str(root / "latin.json"), str(root / "latin.py"), str(root / "plain"), "/proc",
         "/dev/null", str(root / "nope.py"), "a" * 300 + ".py", str(relay_path("five"))]
    ) | argv_text  # fmt: skip
    name = st.sampled_from(["five", "nap", "ghost"]) | argv_text
    target = name | path
    kind = draw(
        st.sampled_from(
            ["check", "graph", "publish", "releases", "verify", "run", "recover", "runs",
             "logs", "revoke", "reconcile", "workers"]
        )
    )  # fmt: skip
    if kind in ("check", "graph", "publish"):
        args = [kind, draw(target), *draw(st.sampled_from([[], ["--json"]]))]
    elif kind in ("releases", "revoke"):
        args = [kind, draw(name)]
    elif kind == "verify":
        args = [kind, draw(name), *draw(st.lists(argv_text, max_size=1))]
    elif kind == "run":
        args = [kind, "five"]
        source = draw(st.integers(0, 2))
        if source == 1:
            args += ["--input", draw(json_text)]
        elif source == 2:
            args += ["--input-file", draw(path)]
        for option in ("--release", "--crash"):
            if draw(st.booleans()):
                args += [option, draw(argv_text | st.sampled_from(["after:fetch", "during:add#2"]))]
        args += draw(st.sampled_from([[], ["--json"], ["--queue", "--detach"]]))
    elif kind in ("recover", "logs"):
        args = [kind, draw(argv_text), *draw(st.sampled_from([[], ["--json"]]))]
    elif kind == "runs":
        args = [kind, *draw(st.lists(name, max_size=1)), *draw(st.sampled_from([[], ["--json"]]))]
    elif kind == "reconcile":
        args = [kind, draw(argv_text)]
        args += draw(st.sampled_from([[], ["--retry"], ["--result", draw(json_text)]]))
    else:
        args = [kind]
    return prefix + args


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``relay ARGV`` in this process: its exit status and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def test_fuzzed_command_lines_never_end_in_an_internal_error(home: Path) -> None:
    """Hypothesis-made command lines exit 0, 1 or 2 with coded lines, never a bug."""

    @FUZZ
    @given(argv=command_lines(home.parent))
    def check(argv: list[str]) -> None:
        code, err = run_cli(argv)
        assert "[internal-error]" not in err and "Traceback" not in err, (argv[:6], err[-500:])
        assert code in (0, 1, 2), (argv[:6], code, err[-500:])
        for line in err.strip().splitlines():
            if line.startswith("relay: error: "):
                assert line.rstrip().endswith("]") and len(line) < 2000, line[:300]

    check()
    assert not list((home / "five" / "runs").glob("iteration-2-hook")), "a fuzzed run started"


# -- the REST API ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real Jupyter server with the relay extension, on a seeded workspace."""
    with seeded_server(tmp_path_factory, "fuzz-api", seed) as srv:
        yield srv
    assert "Uncaught exception" not in srv.log.read_text()


url_text = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=30) | (
    st.sampled_from(["five", "five-1", "five-" + "9" * 300, "five-" + "9" * 5000, "nap-\u0661"])
)
body = st.one_of(
    json_value.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "input": json_value,
            "release": json_value | st.text(max_size=8),
            "crash": st.text(string.printable, max_size=12) | st.just("after:fetch"),
            "result": json_value,
            "retry": json_value,
            "key": json_value,
        },
    ).map(lambda d: json.dumps(d, allow_nan=True).encode()),
    st.binary(max_size=60),
    st.sampled_from([b"[" * 100_000, b'{"input": NaN}', b'{"input": "\\udcff"}']),
)
ROUTES = [
    ("GET", "/relays/{name}"),
    ("GET", "/relays/{name}/releases"),
    ("POST", "/relays/{name}/releases"),
    ("POST", "/relays/{name}/runs"),
    ("POST", "/relays/{name}/revoke"),
    ("GET", "/runs"),
    ("GET", "/runs/{run_id}"),
    ("POST", "/runs/{run_id}/recover"),
    ("POST", "/runs/{run_id}/reconcile"),
]


def test_fuzzed_requests_never_answer_500(server: Server) -> None:
    """Hypothesis-made names, run ids and bodies get documented coded answers, never a 500."""

    @FUZZ
    @given(route=st.sampled_from(ROUTES), value=url_text, raw=body, use_five=st.booleans())
    def check(route: tuple[str, str], value: str, raw: bytes, use_five: bool) -> None:
        method, template = route
        name = "five" if use_five and "{name}" in template else value
        params = {"name": name, "run_id": value}
        reply = server.call(method, template, params, raw=raw if method == "POST" else None)
        assert reply.status != 500, (method, template, reply.body)
        if reply.status >= 400:
            assert reply.body["error"]["code"] != "internal-error", reply.body

    check()


def test_run_ids_of_hundreds_of_digits_are_bad_requests(server: Server) -> None:
    """300- and 5,000-digit run ids answer 400 ``invalid-run-id`` on every run route."""
    for digits in (300, 5000):
        run_id = "five-" + "9" * digits
        for method, template in [r for r in ROUTES if "{run_id}" in r[1]]:
            reply = server.call(method, template, {"run_id": run_id}, body={"retry": True})
            assert reply.status == 400 and reply.body["error"]["code"] == "invalid-run-id"


def test_a_body_over_the_limit_answers_413_and_deep_json_400(server: Server) -> None:
    """A 5 MiB body is refused as ``request-too-large``; 100,000-deep JSON as invalid."""
    big = json.dumps({"input": "x" * (MAX_BODY_BYTES + 1024 * 1024)}).encode()
    reply = server.call("POST", "/relays/{name}/runs", {"name": "five"}, raw=big)
    assert reply.status == 413 and reply.body["error"]["code"] == "request-too-large"
    reply = server.call("POST", "/relays/{name}/runs", {"name": "five"}, raw=b"[" * 100_000)
    assert reply.status == 400 and reply.body["error"]["code"] == "invalid-request"
    over = {"input": "y" * (1024 * 1024)}  # under the body limit, over the input limit
    reply = server.call("POST", "/relays/{name}/runs", {"name": "five"}, body=over)
    assert reply.status == 400 and reply.body["error"]["code"] == "invalid-input"


def test_listing_marks_a_damaged_run_instead_of_failing(server: Server) -> None:
    """``GET /runs`` answers 200 with the damaged run marked and its file named."""
    reply = server.call("GET", "/runs")
    damaged = [r for r in reply.body if r["run_id"] == "five-1"]
    assert reply.status == 200 and damaged[0]["status"] == "damaged"
    assert "run.json" in damaged[0]["problem"]
    reply = server.call("GET", "/runs/{run_id}", {"run_id": "five-1"})
    assert reply.status == 409 and reply.body["error"]["code"] == "run-record-damaged"


def test_an_empty_body_and_an_empty_input_are_one_idempotent_request(server: Server) -> None:
    """``{}`` and ``{"input": {}}`` under one Idempotency-Key start one run between them."""
    headers = {"Idempotency-Key": "same-request-1"}
    first = server.call("POST", "/relays/{name}/runs", {"name": "nap"}, body={}, headers=headers)
    again = server.call(
        "POST", "/relays/{name}/runs", {"name": "nap"}, body={"input": {}}, headers=headers
    )
    assert (first.status, again.status) == (202, 200)
    assert first.body["run_id"] == again.body["run_id"]
    done: dict[str, Any] = server.finish(first.body["run_id"])
    assert done["status"] == "succeeded" and done["result"] == {"slept": 0}
