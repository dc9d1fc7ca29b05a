"""Releases: content hashing, idempotence, immutability and tamper detection."""

from __future__ import annotations

import json
import os
import stat

import pytest

from relay_notebook.errors import ReleaseNotFoundError
from relay_notebook.workspace import (
    Workspace,
    content_hash,
    freeze_release,
    list_releases,
    resolve_release,
    verify_release,
)


def test_hash_depends_on_paths_and_bytes_not_order() -> None:
    """The hash changes with any path or byte and ignores listing order."""
    base = content_hash([("a.py", b"1"), ("b.py", b"2")])
    assert base == content_hash([("b.py", b"2"), ("a.py", b"1")])
    assert base != content_hash([("a.py", b"1"), ("c.py", b"2")])
    assert base != content_hash([("a.py", b"1"), ("b.py", b"3")])
    # moving bytes between the path and the content cannot collide
    assert content_hash([("ab", b"c")]) != content_hash([("a", b"bc")])


def test_publish_freezes_files_with_release_json(workspace: Workspace) -> None:
    """A release folder holds every draft file and a RELEASE.json with checksums."""
    draft = workspace.save_draft("r", "x = 1\n")
    release, created = freeze_release(draft, workspace)
    assert created and release.version == 1
    assert release.folder == workspace.home / "r" / "releases" / release.hash
    assert (release.folder / "relay.py").read_text() == "x = 1\n"
    meta = json.loads((release.folder / "RELEASE.json").read_text())
    assert meta["hash"] == release.hash and meta["version"] == 1
    assert sorted(meta["files"]) == ["relay.py", "relay.yaml"]


def test_identical_content_returns_the_existing_release(workspace: Workspace) -> None:
    """Publishing the same content twice yields one release, not two."""
    draft = workspace.save_draft("r", "x = 1\n")
    first, _ = freeze_release(draft, workspace)
    again, created = freeze_release(workspace.load_draft("r"), workspace)
    assert not created and again.hash == first.hash
    assert len(list_releases(workspace, "r")) == 1


def test_editing_the_draft_makes_a_new_version_and_leaves_the_old(workspace: Workspace) -> None:
    """A changed draft publishes as v2 and never rewrites v1's files."""
    v1, _ = freeze_release(workspace.save_draft("r", "x = 1\n"), workspace)
    v2, _ = freeze_release(workspace.save_draft("r", "x = 2\n"), workspace)
    assert (v1.version, v2.version) == (1, 2) and v1.hash != v2.hash
    assert (v1.folder / "relay.py").read_text() == "x = 1\n"
    assert verify_release(v1).ok and verify_release(v2).ok


def test_frozen_files_are_read_only(workspace: Workspace) -> None:
    """Every frozen file and folder has its write bits cleared."""
    release, _ = freeze_release(workspace.save_draft("r", "x = 1\n"), workspace)
    for root, dirs, files in os.walk(release.folder):
        for name in [*dirs, *files]:
            mode = os.stat(os.path.join(root, name)).st_mode
            assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), name


def test_verify_reports_changed_missing_and_extra_files(workspace: Workspace) -> None:
    """Tampering with a release is reported file by file."""
    draft = workspace.save_draft("r", "x = 1\n")
    (draft.folder / "helper.py").write_text("y = 2\n")
    release, _ = freeze_release(workspace.load_draft("r"), workspace)
    assert verify_release(release).ok
    os.chmod(release.folder, 0o755)
    for name in ("relay.py", "helper.py"):
        os.chmod(release.folder / name, 0o644)
    (release.folder / "relay.py").write_text("x = 666\n")
    (release.folder / "helper.py").unlink()
    (release.folder / "extra.py").write_text("")
    problems = verify_release(release).problems
    assert any(p.startswith("relay.py: checksum changed") for p in problems)
    assert "helper.py: missing" in problems
    assert "extra.py: not part of the release" in problems


def test_resolve_release_by_version_hash_prefix_and_latest(workspace: Workspace) -> None:
    """Releases are found by vN, N, a hash prefix, or latest."""
    v1, _ = freeze_release(workspace.save_draft("r", "x = 1\n"), workspace)
    v2, _ = freeze_release(workspace.save_draft("r", "x = 2\n"), workspace)
    assert resolve_release(workspace, "r", "v1") == v1
    assert resolve_release(workspace, "r", "2") == v2
    assert resolve_release(workspace, "r", v1.hash[:8]) == v1
    assert resolve_release(workspace, "r") == v2
    with pytest.raises(ReleaseNotFoundError, match="Releases: v1"):
        resolve_release(workspace, "r", "v9")


def test_no_releases_says_how_to_publish(workspace: Workspace) -> None:
    """Asking for a release of a never-published relay says to publish it."""
    workspace.save_draft("r", "x = 1\n")
    with pytest.raises(ReleaseNotFoundError, match="relay publish r"):
        resolve_release(workspace, "r")
