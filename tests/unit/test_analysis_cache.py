"""The analysis cache: listings analyse a draft once per content, and never fail on the cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from relay_notebook import commands
from relay_notebook.commands import analysis_cache
from relay_notebook.commands.authoring import CheckReport
from relay_notebook.workspace import Draft, Workspace

GOOD = """from dbos import DBOS


@DBOS.step()
async def double(x):
    return 2 * x


@DBOS.workflow()
async def run(INPUT):
    return await double(INPUT["x"])
"""
BROKEN = GOOD.replace("@DBOS.workflow()\n", "")


@pytest.fixture
def analyses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The relays the listing's analyser was called for, in order."""
    seen: list[str] = []
    analyse: Callable[[Draft], CheckReport] = analysis_cache.check_draft

    def counting(draft: Draft) -> CheckReport:
        seen.append(draft.name)
        return analyse(draft)

    monkeypatch.setattr(analysis_cache, "check_draft", counting)
    return seen


def _entries(workspace: Workspace) -> list[Path]:
    return sorted((workspace.home / analysis_cache.CACHE_DIR).glob("*.json"))


def test_a_second_listing_reads_the_cache_instead_of_analysing(
    tmp_path: Path, analyses: list[str]
) -> None:
    """Listing twice analyses each unchanged draft once; the second listing says the same."""
    workspace = Workspace(tmp_path / "relays")
    workspace.save_draft("good", GOOD)
    workspace.save_draft("broken", BROKEN)
    first = [r.to_dict() for r in commands.relays(workspace)]
    assert analyses == ["broken", "good"]
    assert len(_entries(workspace)) == 2
    second = [r.to_dict() for r in commands.relays(workspace)]
    assert analyses == ["broken", "good"], "the second listing analysed a draft again"
    assert second == first
    assert [r["broken"] for r in second] == [True, False]
    assert "entrypoint-not-workflow" in str(second[0]["problem"])


def test_a_changed_draft_is_analysed_again(tmp_path: Path, analyses: list[str]) -> None:
    """Editing a draft makes the next listing analyse it and report the new verdict."""
    workspace = Workspace(tmp_path / "relays")
    workspace.save_draft("flip", GOOD)
    assert not commands.relays(workspace)[0].broken
    workspace.save_draft("flip", BROKEN)
    assert commands.relays(workspace)[0].broken
    assert analyses == ["flip", "flip"]
    workspace.save_draft("flip", GOOD)  # back to content analysed before: cached
    assert not commands.relays(workspace)[0].broken
    assert analyses == ["flip", "flip"]


def test_a_changed_helper_module_is_analysed_again(tmp_path: Path, analyses: list[str]) -> None:
    """A helper module of the draft is part of the content: breaking it is seen at once."""
    workspace = Workspace(tmp_path / "relays")
    draft = workspace.save_draft("helped", GOOD)
    (draft.folder / "helper.py").write_text("VALUE = 1\n")
    assert not commands.relays(workspace)[0].broken
    (draft.folder / "helper.py").write_text("VALUE = (\n")
    summary = commands.relays(workspace)[0]
    assert summary.broken and "helper.py" in str(summary.problem)
    assert analyses == ["helped", "helped"]


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"key": "another", "relay": "good", "entrypoint": null, "diagnostics": []}',
        b"\xff\xfe garbage",
    ],
)
def test_a_damaged_cache_entry_is_ignored_and_rewritten(
    tmp_path: Path, analyses: list[str], damage: bytes
) -> None:
    """A cache file that cannot be read back is analysed again, rewritten, and never an error."""
    workspace = Workspace(tmp_path / "relays")
    workspace.save_draft("good", BROKEN)
    before = commands.relays(workspace)[0].to_dict()
    [entry] = _entries(workspace)
    entry.write_bytes(damage)
    assert commands.relays(workspace)[0].to_dict() == before
    assert analyses == ["good", "good"]
    assert json.loads(entry.read_bytes())["key"] == entry.stem  # rewritten whole
    commands.relays(workspace)
    assert analyses == ["good", "good"]


def test_a_forged_diagnostic_in_the_cache_is_not_trusted(
    tmp_path: Path, analyses: list[str]
) -> None:
    """An entry whose diagnostics are not well-formed is analysed again, not shown."""
    workspace = Workspace(tmp_path / "relays")
    workspace.save_draft("good", GOOD)
    commands.relays(workspace)
    [entry] = _entries(workspace)
    doc = json.loads(entry.read_bytes())
    doc["diagnostics"] = [{"line": "1", "col": 0, "code": "x", "message": "m"}]
    entry.write_text(json.dumps(doc))
    assert not commands.relays(workspace)[0].broken
    assert analyses == ["good", "good"]


def test_an_unwritable_cache_still_lists(tmp_path: Path, analyses: list[str]) -> None:
    """When the cache folder cannot be made, the listing analyses and answers all the same."""
    workspace = Workspace(tmp_path / "relays")
    workspace.save_draft("good", BROKEN)
    (workspace.home / ".relay_cache").write_text("a file where the folder would go")
    assert commands.relays(workspace)[0].broken
    assert commands.relays(workspace)[0].broken
    assert analyses == ["good", "good"]


def test_the_key_follows_the_analyser_and_the_content(tmp_path: Path) -> None:
    """The same files give the same key; another source or relay name gives another."""
    workspace = Workspace(tmp_path / "relays")
    key = analysis_cache.cache_key(workspace.save_draft("a", GOOD))
    assert analysis_cache.cache_key(workspace.load_draft("a")) == key
    assert analysis_cache.cache_key(workspace.save_draft("a", GOOD + "\n")) != key
    assert analysis_cache.cache_key(workspace.save_draft("b", GOOD)) != key
    assert len(analysis_cache.analyser_version()) == 64
