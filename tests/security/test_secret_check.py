"""The supervisor's secret check: a relay that switches its own redactor off still saves no
secret, in any form, anywhere under the workspace, and shows none."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from relay_notebook import commands
from relay_notebook.commands.settings import Settings
from relay_notebook.runner.backend import ENV_VAR
from relay_notebook.server.service import RelayService
from relay_notebook.workspace import Workspace
from tests.integration.test_secret_leaks import cell_hits, hits_in, needles, relay, scan_workspace
from tests.relays import relay_source

NAME, SECRET = "HOSTILE_TOKEN", "hs7Qz9-vault-VALUE-27182818"
ENV_NAME, ENV_SECRET = "HOSTILE_ENV_ONLY", "env4Kq-only-VALUE-16180339"
#: named like a secret, and read with vault(name) from a variable: found by its name
API_NAME, API_SECRET = "HOSTILE_API_TOKEN", "api8Zr-env-VALUE-14142135"


def every_form(value: str, label: str) -> dict[str, bytes]:
    """The integration suite's needles, plus base64url, URL-encoded, reversed and UTF-16."""
    out = needles(value, label)
    raw = value.encode()
    for shift in range(3):
        padded = b"\0" * shift + raw
        whole = len(padded) // 3 * 3
        out[f"{label} base64url+{shift}"] = base64.urlsafe_b64encode(padded[:whole])[
            4 if shift else 0 :
        ]
    out[f"{label} URL-encoded"] = urllib.parse.quote(value, safe="").encode()
    out[f"{label} reversed"] = value[::-1].encode()
    out[f"{label} UTF-16-LE"] = value.encode("utf-16-le")
    out[f"{label} UTF-16-BE"] = value.encode("utf-16-be")
    return out


NEEDLES = (
    every_form(SECRET, NAME) | every_form(ENV_SECRET, ENV_NAME) | every_form(API_SECRET, API_NAME)
)


@pytest.fixture
def home(workspace: Workspace) -> Path:
    """A workspace holding the hostile relay and one secret in its vault."""
    workspace.save_draft("hostile", relay_source("hostile_secrets"))
    commands.vault_set(workspace, NAME, SECRET)
    return workspace.home


def run_hostile(
    capsys: pytest.CaptureFixture[str], home: Path, form: str, secret: str = NAME
) -> dict[str, Any]:
    """Run the hostile relay; assert no form of a secret is under the workspace, in the CLI's
    output or in the REST body; return the run as ``relay run --json`` printed it."""
    run_input = json.dumps({"form": form, "secret": secret})
    _, printed = relay(capsys, home, "run", "hostile", "--input", run_input, "--json")
    run = json.loads(printed[printed.index("{") :])
    shown = {"relay run --json": printed}
    for args in (["logs", run["run_id"], "--json"], ["logs", run["run_id"]]):
        shown["relay " + " ".join(args)] = relay(capsys, home, *args)[1]
    shown["GET /runs/{id}"] = json.dumps(
        RelayService(Settings.from_environment(home=str(home))).run(run["run_id"])
    )
    found = scan_workspace(home, NEEDLES)
    for label, text in shown.items():
        found += hits_in(text.encode(), label, NEEDLES)
    assert found == [], f"{form}: the secret reached {found}"
    return run


def refused(run: dict[str, Any], name: str, where: str) -> None:
    """The run failed with secret-leak; its message names the secret and where it was."""
    assert run["status"] == "failed", run
    assert run["error"]["code"] == "secret-leak", run["error"]
    message = run["error"]["message"]
    assert f"vault secret {name}" in message and where in message, message
    assert message.endswith("[secret-leak]"), message
    assert "result" not in run


def test_a_relay_that_disarms_its_redactor_cannot_keep_the_raw_value(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A step returning the raw vault value after the relay emptied its redactor fails the run
    with secret-leak naming the step, and no copy of the value is left or shown."""
    refused(run_hostile(capsys, home, "raw"), NAME, "the result of step")
    assert "fetch_token" in json.dumps(commands.logs(Workspace(home), "hostile-1").run.to_dict())


@pytest.mark.parametrize("form", ["base64", "hex", "reversed", "url"])
def test_an_encoded_value_is_found_and_scrubbed(
    capsys: pytest.CaptureFixture[str], home: Path, form: str
) -> None:
    """A step returning the value base64-, hex- or URL-encoded, or reversed, fails the run with
    secret-leak, and no form of the value is left anywhere."""
    refused(run_hostile(capsys, home, form), NAME, "fetch_token")


def test_a_value_cut_across_two_step_results_is_found(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """Two steps returning the two halves of the value fail the run with secret-leak."""
    refused(run_hostile(capsys, home, "split"), NAME, "half")


@pytest.mark.parametrize(
    ("form", "name", "value"),
    [("env-literal", ENV_NAME, ENV_SECRET), ("raw", API_NAME, API_SECRET)],
)
def test_an_environment_secret_read_through_vault_is_guarded(
    capsys: pytest.CaptureFixture[str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    name: str,
    value: str,
) -> None:
    """A secret set only in the environment (named in the relay's vault("NAME") or named like a
    token), read with vault() and returned by a step, fails the run with secret-leak."""
    monkeypatch.setenv(name, value)
    refused(run_hostile(capsys, home, form, secret=name), name, "the result of step")


def test_a_clean_relay_still_succeeds_with_its_result(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """A run that saves no secret succeeds with its result intact, though it has secrets."""
    run = run_hostile(capsys, home, "clean")
    assert run["status"] == "succeeded", run
    assert run["result"] == {"greeting": "hello world", "secret_name": NAME}


def scan_postgres_rows(url: str) -> list[str]:
    """Every cell of DBOS's tables in the PostgreSQL database at ``url``, stored and decoded."""
    import psycopg

    found: list[str] = []
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'dbos'"
        ).fetchall()
        assert tables, "no DBOS tables: the run did not use this database"
        for (table,) in tables:
            for row in conn.execute(f'SELECT * FROM dbos."{table}"'):
                for cell in row:
                    found += cell_hits(cell, f"postgres dbos.{table}", NEEDLES)
    return found


def test_a_postgresql_run_keeps_no_copy_of_the_value(
    capsys: pytest.CaptureFixture[str],
    home: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With runs in PostgreSQL, the disarmed relay's raw value fails the run with secret-leak,
    and no row of DBOS's tables holds any form of it."""
    monkeypatch.setenv(ENV_VAR, database_url)
    refused(run_hostile(capsys, home, "raw"), NAME, "the result of step")
    assert scan_postgres_rows(database_url) == []
