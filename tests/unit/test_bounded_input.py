"""Bounded input: manifests, run inputs, ids, names, paths and sources refused with a coded line.

Each test drives the real ``relay`` command in-process (``relay_notebook.cli.main``) or the
workspace and runner entry points on a fresh workspace; none of them starts a child process.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from relay_notebook.cli import main
from relay_notebook.errors import InvalidInputError, InvalidManifestError
from relay_notebook.record.folders import list_run_folders
from relay_notebook.runner.run_input import MAX_INPUT_BYTES, check_run_input
from relay_notebook.runner.runs import create_run
from relay_notebook.workspace import Manifest, Workspace, parse_manifest
from relay_notebook.workspace.manifest import MAX_MANIFEST_BYTES
from tests.relays import relay_path, relay_source


def relay(home: Path, *args: str) -> tuple[int, str, str]:
    """Run ``relay --home HOME ARGS...`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--home", str(home), *args])
    return code, out.getvalue(), err.getvalue()


def error_line(home: Path, *args: str) -> str:
    """The one stderr line of a refused command (exit 1 or 2, never an internal error)."""
    code, _, err = relay(home, *args)
    lines = err.strip().splitlines()
    assert code in (1, 2) and len(lines) == 1, err
    assert lines[0].startswith("relay: error: ") and "[internal-error]" not in lines[0], err
    return lines[0]


def bomb(levels: int) -> str:
    """A YAML alias bomb: each level repeats the previous one nine times."""
    parts = ["&a [x,x,x,x,x,x,x,x,x]"]
    for prev, cur in zip("abcdefghij", "bcdefghij"[: levels - 1], strict=False):
        parts.append(f"&{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "description: [" + ", ".join(parts) + "]\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A workspace holding the five relay (saved, never run)."""
    Workspace(tmp_path / "relays").save_draft("five", relay_source("five"))
    return tmp_path / "relays"


def test_a_yaml_alias_bomb_is_refused_quickly_with_a_short_message(home: Path) -> None:
    """A 300-byte alias bomb in relay.yaml is refused in well under a second by every command."""
    (home / "five" / "relay.yaml").write_text(bomb(7))  # 236 bytes, 4.8 million values
    started = time.monotonic()
    for command in (["check", "five"], ["graph", "five"], ["publish", "five"], ["run", "five"]):
        line = error_line(home, *command)
        assert line.endswith("[invalid-manifest]") and "aliases" in line
        assert len(line) < 400
    assert time.monotonic() - started < 5


def test_a_small_bomb_below_the_bound_is_described_by_an_excerpt() -> None:
    """A manifest error quotes at most a short excerpt of a value, never its expansion."""
    with pytest.raises(InvalidManifestError) as caught:
        parse_manifest(bomb(4))  # 9**4 values: under the expansion bound, still a bad value
    assert len(str(caught.value)) < 300 and "description" in str(caught.value)


def test_a_recursive_alias_and_deep_nesting_are_refused() -> None:
    """An alias to its own parent and nesting beyond the parser's reach are coded errors."""
    for text in ("a: &a [*a]\n", "[" * 20000 + "]" * 20000):
        with pytest.raises(InvalidManifestError):
            parse_manifest(text)


def test_a_manifest_file_over_the_size_limit_is_refused(home: Path) -> None:
    """relay.yaml over 64 KiB is refused before it is parsed."""
    (home / "five" / "relay.yaml").write_text("# pad\n" * (MAX_MANIFEST_BYTES // 5))
    assert "65,536" in error_line(home, "check", "five")


def test_non_utf8_manifest_and_source_are_coded_errors(home: Path, tmp_path: Path) -> None:
    """A relay.yaml or relay.py that is not UTF-8 names the file and says how to fix it."""
    (home / "five" / "relay.yaml").write_bytes(b"description: caf\xe9\n")
    assert error_line(home, "check", "five").endswith("[invalid-manifest]")
    (home / "five" / "relay.yaml").write_bytes(b"kind: relay\n")
    (home / "five" / "relay.py").write_bytes(b"x = '\xff'\n")
    assert error_line(home, "check", "five").endswith("[invalid-source]")
    (tmp_path / "latin.py").write_bytes(b"x = '\xff'\n")
    assert error_line(home, "check", str(tmp_path / "latin.py")).endswith("[invalid-source]")


def test_a_bom_or_a_coding_declaration_is_read_as_python_reads_it(
    home: Path, tmp_path: Path
) -> None:
    """Sources with a UTF-8 BOM or a latin-1 coding line are admitted and kept byte for byte."""
    body = relay_source("five")
    bom = tmp_path / "withbom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + body.encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\nLABEL = 'caf\xe9'\n" + body.encode())
    for path in (bom, latin):
        code, out, err = relay(home, "check", str(path))
        assert code == 0 and "admitted" in out, err
        assert (home / path.stem / "relay.py").read_bytes() == path.read_bytes()
    assert "LABEL = 'café'" in Workspace(home).load_draft("latin").source
    (home / "latin" / "helpers.py").write_bytes(b"\xef\xbb\xbfHELP = 1\n")  # a BOM helper
    assert relay(home, "check", "latin")[0] == 0


def test_run_input_is_bounded_strict_json(home: Path, tmp_path: Path) -> None:
    """NaN, lone surrogates, deep nesting and inputs over 1 MiB are refused; no run is made."""
    relay(home, "revoke", "five")  # an input let through would end [access-revoked], unrun
    revoked = ["run", "five"]
    cases = {
        "NaN": "NaN",
        "[1e999]": "inf",
        '"\udcff"': "surrogate",
        '"\\udcff"': "surrogate",
        "[" * 3000 + "]" * 3000: "deep",
        "[" * 101 + "]" * 101: "deep",
        json.dumps("x" * MAX_INPUT_BYTES): "limit",
    }
    for text, why in cases.items():
        line = error_line(home, *revoked, "--input", text)
        assert line.endswith("[invalid-input]"), (why, line)
        assert len(line) < 400
    (tmp_path / "bad.json").write_bytes(b'{"a": "\xff"}')
    assert error_line(home, *revoked, "--input-file", str(tmp_path / "bad.json")).endswith(
        "[invalid-input]"
    )
    (tmp_path / "big.json").write_text(json.dumps(["y" * 1000] * 2000))
    assert "1 MiB" in error_line(home, *revoked, "--input-file", str(tmp_path / "big.json"))
    assert list_run_folders(Workspace(home), "five") == []


def test_a_long_input_file_path_is_cut_at_its_start_so_the_file_name_shows(
    home: Path, tmp_path: Path
) -> None:
    """A missing --input-file under a deep folder: the line keeps the path's end, stays short."""
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 6) / "missing-input.json"
    line = error_line(home, "run", "five", "--input-file", str(deep))
    assert line.endswith("No such file or directory. [invalid-input]"), line
    assert "--input-file '..." in line, line
    assert "a-rather-long-folder-name/missing-input.json'" in line, line
    assert len(line) < 200, line


def test_create_run_enforces_the_same_rule_for_every_caller(home: Path) -> None:
    """A Python value (as the magics and REST pass it) is held to the CLI's rule in create_run."""
    ws = Workspace(home)
    draft = ws.load_draft("five")
    nested: list[object] = []
    for _ in range(150):
        nested = [nested]
    for bad in (float("nan"), {"x": "\ud800"}, nested, "z" * (MAX_INPUT_BYTES + 1), {1j: 2}):
        with pytest.raises(InvalidInputError):
            create_run(ws, draft, run_input=bad)
    assert list_run_folders(ws, "five") == []
    assert check_run_input({"n": 1}) == len('{"n":1}')


def test_run_ids_and_crash_counts_are_bounded_ascii_numbers(home: Path) -> None:
    """5,000-digit run ids and #N, and non-ASCII digits, are refused as malformed."""
    for run_id in ("five-" + "9" * 5000, "five-" + "9" * 300, "five-\u0661"):
        for command in ("logs", "recover"):
            line = error_line(home, command, run_id)
            assert line.endswith("[invalid-run-id]") and len(line) < 400
    line = error_line(home, "run", "five", "--crash", "after:fetch#" + "9" * 5000)
    assert line.endswith("[invalid-crash-spec]") and len(line) < 400


def test_empty_release_and_crash_are_refused_not_ignored(home: Path) -> None:
    """``--release ""``, ``--crash ""`` and ``--release v١`` are errors; no run starts."""
    assert relay(home, "publish", "five")[0] == 0
    relay(home, "revoke", "five")
    assert error_line(home, "run", "five", "--release", "v\u0661").endswith("[release-not-found]")
    assert error_line(home, "verify", "five", "\u0661").endswith("[release-not-found]")
    assert error_line(home, "run", "five", "--release", "").endswith("[release-not-found]")
    assert error_line(home, "run", "five", "--crash", "").endswith("[invalid-crash-spec]")
    assert list_run_folders(Workspace(home), "five") == []


def test_a_crash_point_the_relay_cannot_reach_is_refused_naming_the_known_ones(home: Path) -> None:
    """``--crash`` naming a missing step, agent or MCP server lists the points that exist."""
    relay(home, "revoke", "five")
    for spec in ("after:nope", "after:agent:nope", "during:mcp:crm.update", "after:step:x"):
        line = error_line(home, "run", "five", "--crash", spec)
        assert line.endswith("[invalid-crash-spec]") and "add, fetch" in line, line
    assert list_run_folders(Workspace(home), "five") == []


def test_names_and_homes_the_file_system_refuses_are_coded_errors(
    home: Path, tmp_path: Path
) -> None:
    """Names over 255 bytes, a home under /proc or inside a file, a bad URL: coded lines."""
    assert error_line(home, "check", "a" * 300).endswith("[invalid-relay-name]")
    assert error_line(home, "check", "a" * 300 + ".py").endswith("[invalid-relay-name]")
    assert error_line(home, "releases", "é" * 200).endswith("[invalid-relay-name]")
    five = str(relay_path("five"))
    assert error_line(Path("/proc"), "check", five).endswith("[workspace-error]")
    (tmp_path / "plain").write_text("x")
    assert error_line(tmp_path / "plain" / "sub", "check", five).endswith("[workspace-error]")
    assert error_line(tmp_path / ("d" * 300), "runs").endswith("[workspace-error]")
    for url in ("postgresql://u:p@[::1/db", "postgresql://u@h:port/db", "garbage"):
        line = error_line(home, "--database-url", url, "runs")
        assert line.endswith("[invalid-database-url]") and "p@" not in line


def test_durability_none_with_a_dbos_workflow_is_refused_with_the_reason(home: Path) -> None:
    """A @DBOS.workflow relay with relay_durability: none fails admission saying why."""
    ws = Workspace(home)
    ws.save_draft("five", relay_source("five"), Manifest(relay_durability="none"))
    code, out, _ = relay(home, "check", "five", "--json")
    report = json.loads(out)
    assert code == 1 and [d["code"] for d in report["diagnostics"]] == ["durability-needs-dbos"]
    assert "relay_durability: none" in report["diagnostics"][0]["message"]
    code, _, err = relay(home, "run", "five")
    assert code == 1 and err.strip().splitlines()[-1].endswith("[admission-failed]")
    ws.save_draft("once", relay_source("once"), Manifest(relay_durability="none"))
    assert relay(home, "check", "once")[0] == 0  # a legacy relay runs once without DBOS


def _save_many(home: str, source: str, rounds: int) -> int:
    """Save the draft ``rounds`` times and read it back each time; the count of bad reads."""
    ws, bad = Workspace(home), 0
    for i in range(rounds):
        text = f"{source}\n# save {i}\n"
        ws.save_draft("five", text)
        if not ws.load_draft("five").source.startswith(source):
            bad += 1
    return bad


def test_concurrent_draft_saves_never_collide_or_publish_an_empty_file(home: Path) -> None:
    """Four processes saving one draft at once all succeed and never read a partial relay.py."""
    source = relay_source("five")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        bad = pool.starmap(_save_many, [(str(home), source, 150)] * 4)
    assert bad == [0, 0, 0, 0]
    assert not [p for p in (home / "five").iterdir() if p.name.endswith(".tmp")]
