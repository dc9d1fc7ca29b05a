"""Workspace: names, manifests, drafts and targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_notebook.commands.settings import Settings
from relay_notebook.errors import (
    InvalidManifestError,
    InvalidNameError,
    InvalidTargetError,
    RelayNotFoundError,
)
from relay_notebook.workspace import Manifest, Workspace, parse_manifest, validate_relay_name


@pytest.mark.parametrize("name", ["invoice", "a", "Invoice_2", "my-relay", "x" * 64])
def test_good_names_are_accepted(name: str) -> None:
    """Names of letters, digits, '_' and '-' starting with a letter are valid."""
    assert validate_relay_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "cannot be empty"),
        ("../etc", "looks like a path"),
        ("a/b", "looks like a path"),
        ("..", "looks like a path"),
        ("1invoice", "start with a letter"),
        ("_x", "start with a letter"),
        ("in voice", "contains ' '"),
        ("naïve", "contains 'ï'"),
        ("x" * 65, "65 characters"),
        (".hidden", "start with a letter"),
    ],
)
def test_bad_names_say_why_and_suggest(name: str, why: str) -> None:
    """Every invalid name is rejected with the reason and a suggested valid name."""
    with pytest.raises(InvalidNameError) as info:
        validate_relay_name(name)
    assert why in str(info.value)
    assert "[invalid-relay-name]" in str(info.value)
    if name:
        assert "try '" in str(info.value)


def test_home_defaults_to_relays_then_env_then_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace is ./relays, unless RELAY_HOME is set at the boundary, unless --home is
    given; a Workspace itself never reads the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RELAY_HOME", raising=False)
    assert Settings.from_environment().workspace().home == tmp_path / "relays"
    monkeypatch.setenv("RELAY_HOME", str(tmp_path / "env-home"))
    assert Settings.from_environment().workspace().home == tmp_path / "env-home"
    assert Workspace().home == tmp_path / "relays"
    arg = Settings.from_environment(home=str(tmp_path / "arg"))
    assert arg.workspace().home == tmp_path / "arg"


def test_save_and_load_draft_round_trip(workspace: Workspace, invoice_source: str) -> None:
    """A saved draft has relay.yaml with the defaults and relay.py with the exact source."""
    draft = workspace.save_draft("invoice", invoice_source)
    assert draft.source == invoice_source
    assert draft.manifest.relay_durability == "dbos"
    text = (workspace.home / "invoice" / "relay.yaml").read_text()
    assert "kind: relay" in text and "relay_runtime: python" in text
    assert workspace.list_relays() == ["invoice"]
    assert workspace.load_draft("invoice").source == invoice_source


def test_saving_again_keeps_the_manifest(workspace: Workspace) -> None:
    """Re-saving a draft's source does not reset its variables."""
    workspace.save_draft("r", "x = 1\n", Manifest(variables={"region": "eu"}))
    draft = workspace.save_draft("r", "x = 2\n")
    assert draft.manifest.variables == {"region": "eu"}
    assert draft.source == "x = 2\n"


def test_draft_files_skip_runs_releases_and_caches(workspace: Workspace) -> None:
    """Only authored files are part of a draft; runs, releases and caches are not."""
    draft = workspace.save_draft("r", "x = 1\n")
    (draft.folder / "helpers").mkdir()
    (draft.folder / "helpers" / "pricing.py").write_text("RATE = 2\n")
    (draft.folder / "fixtures.json").write_text("{}")
    for junk in [
        "runs/iteration-1-hook/relay_result.json",
        "releases/abc/relay.py",
        "__pycache__/relay.cpython-311.pyc",
        ".ipynb_checkpoints/x.py",
    ]:
        (draft.folder / junk).parent.mkdir(parents=True, exist_ok=True)
        (draft.folder / junk).write_text("junk")
    assert draft.files() == ["fixtures.json", "helpers/pricing.py", "relay.py", "relay.yaml"]


def test_missing_relay_lists_the_known_ones(workspace: Workspace) -> None:
    """Loading an unknown relay names the relays that exist and how to create one."""
    workspace.save_draft("invoice", "x = 1\n")
    with pytest.raises(RelayNotFoundError) as info:
        workspace.load_draft("invocie")
    assert "Relays here: invoice" in str(info.value)
    assert "%%relay invocie" in str(info.value)


def test_py_target_is_saved_as_draft_named_after_stem(tmp_path: Path, workspace: Workspace) -> None:
    """A .py TARGET becomes the draft of the relay named after the file's stem."""
    path = tmp_path / "greeter.py"
    path.write_text("print('hi')\n")
    draft = workspace.resolve_target(str(path))
    assert draft.name == "greeter"
    assert (workspace.home / "greeter" / "relay.py").read_text() == "print('hi')\n"


def test_bad_targets_are_explained(tmp_path: Path, workspace: Workspace) -> None:
    """Missing files, non-.py files and badly named files each get a clear error."""
    with pytest.raises(InvalidTargetError, match="no such file"):
        workspace.resolve_target(str(tmp_path / "nope.py"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InvalidTargetError, match=r"expected a \.py file"):
        workspace.resolve_target(str(tmp_path / "notes.txt"))
    (tmp_path / "2fast.py").write_text("x")
    with pytest.raises(InvalidNameError):
        workspace.resolve_target(str(tmp_path / "2fast.py"))


def test_manifest_accepts_the_documented_keys() -> None:
    """kind, runtime, durability, variables and model parse into the Manifest."""
    m = parse_manifest(
        "kind: relay\nrelay_runtime: python\nrelay_durability: none\n"
        "model: scripted:fixtures.json\nvariables:\n  region: eu\n"
    )
    assert m.relay_durability == "none"
    assert m.model == "scripted:fixtures.json"
    assert m.variables == {"region": "eu"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("kind: job\n", "kind"),
        ("relay_durability: temporal\n", "relay_durability"),
        ("variables:\n  count: 3\n", "expected a string, got int 3"),
        ("variables:\n  nested: {a: b}\n", "expected a string"),
        ("colour: blue\n", "unknown key 'colour'"),
        ("variables:\n  1: x\n", "variables.1: a variable's name must be a string"),
        ("variables: [a]\n", "variables: expected a mapping of names to strings, got a list"),
        ("model: 3\n", "model: expected a string, got int 3"),
        ("- a\n- b\n", "must be a mapping"),
        ("kind: [relay\n", "not valid YAML at line"),
    ],
)
def test_bad_manifests_name_the_problem(text: str, fragment: str) -> None:
    """Each invalid manifest is rejected with the offending key and the expected shape."""
    with pytest.raises(InvalidManifestError) as info:
        parse_manifest(text, where="relays/r/relay.yaml")
    assert fragment in str(info.value)
    assert "relays/r/relay.yaml" in str(info.value)


def test_a_manifest_built_in_code_is_checked_too() -> None:
    """``Manifest(...)`` refuses what ``relay.yaml`` may not hold, with the same words."""
    with pytest.raises(InvalidManifestError, match="relay_durability: expected 'dbos' or 'none'"):
        Manifest(relay_durability="temporal")  # type: ignore[arg-type]
    assert Manifest(variables={"region": "eu"}).to_dict(exclude_none=True) == {
        "kind": "relay", "relay_runtime": "python", "relay_durability": "dbos",
        "variables": {"region": "eu"},
    }  # fmt: skip
