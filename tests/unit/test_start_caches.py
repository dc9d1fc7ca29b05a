"""What a run's start reads, read no more than it must: the runtime a run is bound to is
computed again once the kit's code or an installed package changed (and only then), and the
relay's ``vault("NAME")`` names come from its code, never from the files of its runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from relay_notebook.record import bindings
from relay_notebook.runner.leak_check import environment_secrets


@pytest.fixture
def sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the kit's code the runner binding digests."""
    folder = tmp_path / "sdk"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.py").write_text("A = 1\n", encoding="utf-8")
    (folder / "sub" / "b.py").write_text("B = 2\n", encoding="utf-8")
    monkeypatch.setattr(bindings, "_SDK_DIRS", (folder,))
    monkeypatch.setattr(bindings, "_by_stamps", {})
    return folder


def _bump(path: Path, text: str) -> None:
    """Rewrite ``path`` with a new mtime, as an editor saving it does."""
    stat = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def test_the_runner_binding_follows_every_edit_of_the_kits_code(sdk: Path) -> None:
    """Same size, new bytes; a new file in a subfolder; a removed file: each changes it, and
    an unchanged tree gives the digest a fresh computation gives."""
    first = bindings.runtime_fingerprint()["runner"]
    assert first == bindings._sdk_digest()
    assert bindings.runtime_fingerprint()["runner"] == first
    _bump(sdk / "a.py", "A = 9\n")
    edited = bindings.runtime_fingerprint()["runner"]
    assert edited != first and edited == bindings._sdk_digest()
    (sdk / "sub" / "c.py").write_text("C = 3\n", encoding="utf-8")
    added = bindings.runtime_fingerprint()["runner"]
    assert added not in (first, edited)
    (sdk / "sub" / "c.py").unlink()
    assert bindings.runtime_fingerprint()["runner"] == edited


def test_a_package_upgraded_underneath_changes_its_version_binding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package's version is read again once a folder on the path changed, as installing a
    new version (its metadata folder renamed) changes it."""
    site = tmp_path / "site"
    info = site / "dbos-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dbos\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    monkeypatch.setattr(bindings, "_by_stamps", {})
    assert bindings.runtime_fingerprint()["dbos"] == "1.0"
    upgraded = site / "dbos-2.0.dist-info"
    info.rename(upgraded)
    (upgraded / "METADATA").write_text("Metadata-Version: 2.1\nName: dbos\nVersion: 2.0\n")
    stat = site.stat()
    os.utime(site, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # coarse clocks
    assert bindings.runtime_fingerprint()["dbos"] == "2.0"


def test_vault_names_come_from_the_relays_code_not_its_runs(tmp_path: Path) -> None:
    """A name in ``vault("NAME")`` in the relay's code guards that environment value; a
    Python file inside its runs is not the relay's code and is not read."""
    relay = tmp_path / "shop"
    (relay / "runs" / "shop-1" / "execution").mkdir(parents=True)
    (relay / "relay.py").write_text('from agentworks import vault\nK = vault("NAMED")\n')
    (relay / "runs" / "shop-1" / "execution" / "x.py").write_text('vault("IN_A_RUN")\n')
    environ = {"NAMED": "value-of-named", "IN_A_RUN": "value-in-a-run"}
    assert environment_secrets(relay, environ, []) == {"NAMED": "value-of-named"}
