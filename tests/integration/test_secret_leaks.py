"""The leak suite: real runs try every way we know to get a vault value saved or shown.

After each run, every byte under the workspace (the vault's own file aside) is scanned for the
value, its base64 (at each alignment) and its hex: files as they are, every cell of every
SQLite database both as stored and base64-decoded, DBOS's pickles loaded with a restricted
unpickler, the CLI's output (``run``, ``logs``, ``runs``) and the REST API's run body; with a
PostgreSQL system database, every cell of every table in it as well.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import cli, commands
from relay_notebook.commands.settings import Settings
from relay_notebook.runner.backend import ENV_VAR
from relay_notebook.server.service import RelayService
from relay_notebook.workspace import Manifest, Workspace
from tests.relays import relay_source

NAME, SECRET = "LEAK_TOKEN", "lk7Qz9-vault-VALUE-31415926"
SCRIPT = {
    "looker": [{"tool_calls": [{"name": "lookup", "arguments": {"sku": "A"}}]}, {"content": "ok"}],
    "fetcher": [
        {"tool_calls": [{"name": "fetch_token", "arguments": {"sku": "A"}}]},
        {"content": "fetched"},
    ],
}


def needles(value: str, label: str) -> dict[str, bytes]:
    """The value as it is and as JSON and repr() escape it, its hex, and its base64 at each of
    the three alignments it can start at."""
    raw = value.encode()
    out = {
        "value": raw,
        "JSON-escaped": json.dumps(value)[1:-1].encode(),
        "JSON-escaped (unicode)": json.dumps(value, ensure_ascii=False)[1:-1].encode(),
        "repr-escaped": repr(value)[1:-1].encode(),
        "hex": raw.hex().encode(),
        "HEX": raw.hex().upper().encode(),
    }
    for shift in range(3):
        padded = b"\0" * shift + raw
        whole = len(padded) // 3 * 3  # the last group depends on the bytes that follow
        out[f"base64+{shift}"] = base64.b64encode(padded[:whole])[4 if shift else 0 :]
    return {f"{label} {form}": needle for form, needle in out.items()}


#: a second secret with quotes, a backslash and non-ASCII letters, which escaping changes
QUOTED_NAME, QUOTED = "LEAK_QUOTED", 'Pä"ss\\wörd-Ω-27182818'
NEEDLES = needles(SECRET, NAME) | needles(QUOTED, QUOTED_NAME)


class _Stub:
    """Stands in for any class a pickle names outside builtins; keeps what it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs, self.state = args, kwargs, None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"_Stub({self.args!r}, {self.kwargs!r}, {self.state!r})"


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name not in {"eval", "exec", "getattr", "__import__"}:
            return super().find_class(module, name)
        return type(name, (_Stub,), {})


def hits_in(data: bytes, where: str, needles: dict[str, bytes] = NEEDLES) -> list[str]:
    """Which forms of the secret (``needles``) ``data`` holds, labelled with ``where``."""
    return [f"{where}: {label}" for label, needle in needles.items() if needle in data]


def _decoded(cell: str | bytes) -> list[bytes]:
    """A DBOS cell as base64 and, when it is one, the pickle inside loaded and shown."""
    try:
        data = base64.b64decode(cell, validate=True)
    except (binascii.Error, ValueError):
        return []
    out = [data]
    if data[:1] == b"\x80":
        try:
            out.append(repr(_SafeUnpickler(io.BytesIO(data)).load()).encode())
        except Exception as exc:
            out.append(f"unloadable pickle: {exc!r}".encode())
    return out


def scan_database(path: Path, needles: dict[str, bytes] = NEEDLES) -> list[str]:
    """Every cell of every table of the SQLite file at ``path``, as stored and decoded."""
    found: list[str] = []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    found += cell_hits(cell, f"{path.name}:{table}", needles)
    finally:
        conn.close()
    return found


def cell_hits(cell: Any, where: str, needles: dict[str, bytes] = NEEDLES) -> list[str]:
    """The needles in one database cell, as stored and decoded."""
    if isinstance(cell, memoryview):
        cell = bytes(cell)
    if not isinstance(cell, str | bytes):
        cell = json.dumps(cell, default=str) if isinstance(cell, dict | list) else None
        if cell is None:
            return []
    found = hits_in(cell.encode() if isinstance(cell, str) else cell, where, needles)
    for data in _decoded(cell):
        found += hits_in(data, f"{where} (decoded)", needles)
    return found


def scan_postgres(url: str, needles: dict[str, bytes] = NEEDLES) -> list[str]:
    """Every cell of every table in the DBOS and kit schemas of the database at ``url``."""
    import psycopg

    found: list[str] = []
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        assert len(tables) > 5
        for schema, table in tables:
            for row in conn.execute(f'SELECT * FROM "{schema}"."{table}"'):
                for cell in row:
                    found += cell_hits(cell, f"postgres {schema}.{table}", needles)
    return found


def scan_workspace(home: Path, needles: dict[str, bytes] = NEEDLES) -> list[str]:
    """Every file under the workspace except the vault's own store, and every cell of every
    SQLite database in it."""
    found: list[str] = []
    for path in sorted(home.rglob("*")):
        if ".relay_vault" in path.parts or not path.is_file():
            continue
        data = path.read_bytes()
        found += hits_in(data, str(path.relative_to(home)), needles)
        if data.startswith(b"SQLite format 3\0"):
            found += scan_database(path, needles)
    return found


def relay(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str]:
    """``relay --home HOME ARGS`` in this process: exit status and everything it printed."""
    capsys.readouterr()
    status = cli.main(["--home", str(home), *args])
    out = capsys.readouterr()
    return status, out.out + out.err


@pytest.fixture
def home(workspace: Workspace) -> Path:
    """A workspace holding the leaky relay, its model script and the secret in the vault."""
    source = relay_source("leaky")
    workspace.save_draft("leaky", source, Manifest(model="scripted:fixtures.json"))
    (workspace.relay_dir("leaky") / "fixtures.json").write_text(json.dumps(SCRIPT))
    plain = relay_source("leaky_plain")
    workspace.save_draft("plain", plain, Manifest(relay_durability="none"))
    commands.vault_set(workspace, NAME, SECRET)
    commands.vault_set(workspace, QUOTED_NAME, QUOTED)
    return workspace.home


def attempt(
    capsys: pytest.CaptureFixture[str],
    home: Path,
    leak: str,
    name: str = "leaky",
    secret: str = NAME,
) -> dict[str, Any]:
    """Run relay ``name`` with ``leak`` of ``secret``; assert nothing anywhere holds either
    secret; return the run."""
    run_input = json.dumps({"leak": leak, "secret": secret})
    _, printed = relay(capsys, home, "run", name, "--input", run_input, "--json")
    run = json.loads(printed[printed.index("{") :])
    shown = {"relay run": printed}
    for args in (["logs", run["run_id"], "--json"], ["logs", run["run_id"]], ["runs", "--json"]):
        shown["relay " + " ".join(args)] = relay(capsys, home, *args)[1]
    shown["GET /runs/{id}"] = json.dumps(
        RelayService(Settings.from_environment(home=str(home))).run(run["run_id"])
    )
    found = scan_workspace(home)
    if os.environ.get(ENV_VAR):
        found += scan_postgres(os.environ[ENV_VAR])
    for label, text in shown.items():
        found += hits_in(text.encode(), label)
    assert found == [], f"{leak}: the secret reached {found}"
    return run


def attempt_files(home: Path, name: str) -> list[str]:
    """The text of every ``name`` file the run's attempts left (stdout.log, stderr.log)."""
    return [p.read_text() for p in sorted(home.rglob(name))]


WITHHELD = "raised carrying the value of vault secret LEAK_TOKEN"
REFUSED = "DBOS was about to save in the run's history"


def refused_with(run: dict[str, Any], *fragments: str) -> None:
    """The run failed with secret-leak, and its message says each of ``fragments``."""
    message = run["error"]["message"]
    assert run["status"] == "failed" and message.startswith("SecretLeakError: "), message
    assert "[secret-leak]" in message and all(f in message for f in fragments), message


@pytest.mark.parametrize(
    ("how", "raised"),
    [
        ("message", "ValueError"),
        ("attribute", "Carrier"),
        ("notes", "RuntimeError"),
        ("cause", "RuntimeError"),
        ("group", "ExceptionGroup"),
    ],
)
def test_a_step_error_carrying_the_secret_is_withheld(
    capsys: pytest.CaptureFixture[str], home: Path, how: str, raised: str
) -> None:
    """A step raising with the secret in its message, an attribute, a note, its cause or a
    sub-exception fails the run with secret-leak naming the error's type, and saves none of
    it."""
    refused_with(attempt(capsys, home, f"step-{how}"), f"{raised} {WITHHELD}")


@pytest.mark.parametrize(
    ("how", "raised"),
    [("attribute", "Carrier"), ("notes", "RuntimeError"), ("cause", "RuntimeError")],
)
def test_a_workflow_error_carrying_the_secret_is_withheld(
    capsys: pytest.CaptureFixture[str], home: Path, how: str, raised: str
) -> None:
    """The run's own workflow raising with the secret hidden in the error saves none of it."""
    refused_with(attempt(capsys, home, f"workflow-{how}"), f"{raised} {WITHHELD}")


@pytest.mark.parametrize(
    ("leak", "what"),
    [
        ("child-input", "The input of a workflow that"),
        ("set-event", "A value that"),
        ("set-event-portable", "A value that"),
        ("write-stream", "A value that"),
        ("send", "A value that"),
    ],
)
def test_values_dbos_saves_for_the_relay_are_refused(
    capsys: pytest.CaptureFixture[str], home: Path, leak: str, what: str
) -> None:
    """A child workflow's argument, an event (pickled or portable JSON), a stream value, a
    message or a plain child workflow's result carrying the secret is refused where DBOS
    writes it."""
    refused_with(attempt(capsys, home, leak), f"{what} {REFUSED}")


def test_a_sync_child_workflows_result_is_refused_as_it_returns(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A sync child workflow is watched as an async one is: its result carrying the secret is
    refused as it returns, before DBOS could save it."""
    refused_with(
        attempt(capsys, home, "sync-child-result"),
        "The result of workflow 'sync_child' carries the value of vault secret",
    )


def test_a_plain_child_workflow_error_is_withheld(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A sync child workflow (which the kit does not wrap) raising an error whose attribute
    holds the secret is saved by DBOS as a secret-leak error."""
    refused_with(attempt(capsys, home, "sync-child-raise"), f"Carrier {WITHHELD}")


@pytest.mark.parametrize("leak", ["child-id", "event-key"])
def test_identifiers_carrying_the_secret_are_refused(
    capsys: pytest.CaptureFixture[str], home: Path, leak: str
) -> None:
    """A child workflow id or an event key made from the secret is refused before DBOS saves
    it."""
    refused_with(attempt(capsys, home, leak), "as an identifier")


@pytest.mark.parametrize(
    ("leak", "what"),
    [
        ("deep-step", "The result of step 'deep_result'"),
        ("deep-result", "The result of workflow 'run'"),
        ("object-step", "The result of step 'sync_step_object'"),
    ],
)
def test_a_result_hiding_the_secret_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], home: Path, leak: str, what: str
) -> None:
    """A step or run result with the secret 60 levels down, or inside an object's field, is
    refused with a message naming the step, and never printed."""
    refused_with(attempt(capsys, home, leak), what)


@pytest.mark.parametrize("leak", ["print", "fd-write", "fd-write-split"])
def test_output_of_the_relay_is_scrubbed(
    capsys: pytest.CaptureFixture[str], home: Path, leak: str
) -> None:
    """print(), logging, DBOS.logger and raw writes to fd 1 and 2 (even split in two) reach
    the attempt's logs with the secret replaced by its name."""
    run = attempt(capsys, home, leak)
    assert run["status"] == "succeeded"
    logs = "".join(attempt_files(home, "stdout.log") + attempt_files(home, "stderr.log"))
    assert f"token [vault:{NAME}]" in logs


def test_the_stderr_tail_of_a_crashed_attempt_is_scrubbed(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A child that writes the secret to fd 2 and dies: the tail kept in run.json, the trace,
    the logs and the REST body shows the secret's name only."""
    run = attempt(capsys, home, "crash")
    assert run["status"] == "interrupted"
    assert f"fatal: token [vault:{NAME}]" in run["error"]["stderr"]


def test_a_tool_error_handed_to_the_model_is_scrubbed(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A tool raising with the secret in its message: the agent's receipt and the ledger keep
    only the secret's name, and the model's answer ends the run."""
    run = attempt(capsys, home, "tool-error")
    assert run["status"] == "succeeded" and run["result"] == "ok"


def test_a_restarted_agent_tool_error_is_scrubbed(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """In recovery='restart' mode a tool raising with the secret stops the agent; the error
    DBOS saves for the agent's step names the secret only."""
    run = attempt(capsys, home, "restart-tool-error")
    assert run["status"] == "failed" and f"[vault:{NAME}]" in run["error"]["message"]


def test_the_restart_journal_refuses_a_tool_result_carrying_the_secret(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """In recovery='restart' mode a tool returning the secret is refused, not journaled."""
    refused_with(attempt(capsys, home, "journal"), "tool 'fetch_token' returned the value")


def test_a_run_without_dbos_refuses_a_result_carrying_the_secret(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A relay_durability: none program returning the secret fails with secret-leak; no result
    file holds it and the CLI does not print it."""
    refused_with(attempt(capsys, home, "result", name="plain"), "The result of run()")


def test_a_run_input_carrying_the_secret_is_refused_before_anything_is_saved(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """``relay run --input`` holding the secret exits 2 with one invalid-input line naming the
    secret, and creates no run: no file and no output holds the value."""
    run_input = json.dumps({"leak": "none", "x": [{"deep": SECRET}]})
    status, printed = relay(capsys, home, "run", "leaky", "--input", run_input)
    assert status == 2 and printed.strip().endswith("[invalid-input]"), printed
    assert f"vault secret {NAME}" in printed
    assert scan_workspace(home) + hits_in(printed.encode(), "relay run") == []
    assert commands.runs(Workspace(home)) == []


def test_the_rest_api_shows_no_form_of_the_secret(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """Over real HTTP, the runs a crash, an error attribute, raw fd writes and a journaled
    tool result tried to leak through, and one started by POST, show no form of the secret in
    any GET or POST response."""
    from tests.integration.test_rest_api import start_server, stop_server

    run_ids = [attempt(capsys, home, leak)["run_id"] for leak in ("crash", "step-attribute")]
    server = start_server(home.parent)
    try:
        started = server.call(
            "POST", "/relays/{name}/runs", {"name": "leaky"}, body={"input": {"leak": "fd-write"}}
        )
        refused = server.call(
            "POST", "/relays/{name}/runs", {"name": "leaky"}, body={"input": {"x": [SECRET]}}
        )
        assert refused.status == 400 and NAME in json.dumps(refused.body), refused.body
        bodies = {"POST /relays/leaky/runs": started.body, "POST refused": refused.body}
        bodies["GET /runs/{new}"] = server.finish(started.body["run_id"])
        for run_id in run_ids:
            bodies[f"GET /runs/{run_id}"] = server.call(
                "GET", "/runs/{run_id}", {"run_id": run_id}
            ).body
        bodies["GET /runs"] = server.call("GET", "/runs").body
        bodies["GET /relays/leaky"] = server.call("GET", "/relays/{name}", {"name": "leaky"}).body
    finally:
        stop_server(server)
    assert bodies["GET /runs/{new}"]["status"] == "succeeded"
    found = scan_workspace(home)
    for label, body in bodies.items():
        found += hits_in(json.dumps(body).encode(), label)
    assert found == []


@pytest.mark.parametrize(
    ("leak", "fragment"),
    [
        ("step-attribute", f"Carrier {WITHHELD}"),
        ("workflow-notes", f"RuntimeError {WITHHELD}"),
        ("sync-child-raise", f"Carrier {WITHHELD}"),
        ("child-input", f"The input of a workflow that {REFUSED}"),
        ("set-event", f"A value that {REFUSED}"),
        ("write-stream", f"A value that {REFUSED}"),
        ("send", f"A value that {REFUSED}"),
        ("child-id", "as an identifier"),
        ("event-key", "as an identifier"),
        ("deep-result", "The result of workflow 'run'"),
    ],
)
def test_a_postgresql_system_database_holds_no_form_of_the_secret(
    capsys: pytest.CaptureFixture[str],
    home: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    leak: str,
    fragment: str,
) -> None:
    """With runs in PostgreSQL, the same leak attempts are refused and no row of any table
    (base64-decoded and unpickled) holds the secret."""
    monkeypatch.setenv(ENV_VAR, database_url)
    refused_with(attempt(capsys, home, leak), fragment)


@pytest.mark.parametrize(
    "leak",
    ["step-message", "workflow-notes", "set-event", "print", "fd-write", "crash", "journal"],
)
def test_a_secret_that_escaping_changes_is_found_in_every_form(
    capsys: pytest.CaptureFixture[str], home: Path, leak: str
) -> None:
    """A secret with quotes, a backslash and non-ASCII letters is kept out of the ledger, the
    trace, the logs and DBOS as it is and in its JSON- and repr-escaped forms."""
    run = attempt(capsys, home, leak, secret=QUOTED_NAME)
    logs = attempt_files(home, "stdout.log") + attempt_files(home, "stderr.log")
    assert QUOTED_NAME in json.dumps(run) + "".join(logs)  # the attempt reached the secret
