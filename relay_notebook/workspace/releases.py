"""Releases: a draft's files frozen under ``releases/<hash>/`` with ``RELEASE.json``.

Design note: the release hash is SHA-256 over every frozen file's relative path and bytes, in
sorted path order, so identical content always yields the same release and any change (one
byte, a renamed helper) yields a new one. Publishing writes into a temporary folder and renames
it into place under a lock, so a crash mid-publish never leaves a half-written release, and two
publishers never share a version number. Frozen files are made read-only; ``verify_release``
recomputes every checksum because permissions alone do not stop a determined editor (or root).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from relay_notebook.errors import InvalidTargetError, ReleaseNotFoundError, ReleaseTamperedError
from relay_notebook.workspace.drafts import Draft, Workspace

__all__ = [
    "RELEASE_FILE",
    "Release",
    "VerifyReport",
    "content_hash",
    "freeze_release",
    "list_releases",
    "resolve_release",
    "verify_release",
]

RELEASE_FILE = "RELEASE.json"
RELEASES_DIR = "releases"
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
_READ_ONLY_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
_READ_ONLY_DIR = _READ_ONLY_FILE | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


@dataclass(frozen=True)
class Release:
    """One frozen, content-hashed version of a relay."""

    relay: str
    version: int
    hash: str
    created_at: str
    files: dict[str, str]
    folder: Path

    @property
    def short_hash(self) -> str:
        return self.hash[:12]

    @property
    def ref(self) -> str:
        return f"v{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "relay": self.relay,
            "version": self.version,
            "hash": self.hash,
            "created_at": self.created_at,
            "files": dict(self.files),
        }


@dataclass
class VerifyReport:
    """The result of re-checking one release: empty ``problems`` means intact."""

    release: Release
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """SHA-256 over ``(relative path, bytes)`` pairs in sorted path order."""
    h = hashlib.sha256()
    for rel, data in sorted(files):
        encoded = rel.encode("utf-8")
        h.update(len(encoded).to_bytes(4, "big") + encoded)
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_release(folder: Path) -> Release:
    """The release frozen in ``folder``; ``ReleaseTamperedError`` names a RELEASE.json that is
    no longer what publishing wrote (garbled, emptied, a field gone)."""
    path = folder / RELEASE_FILE
    try:
        meta = json.loads(path.read_bytes())
        release = Release(
            relay=meta["relay"],
            version=meta["version"],
            hash=meta["hash"],
            created_at=meta["created_at"],
            files=dict(meta["files"]),
            folder=folder,
        )
        fields = (release.relay, release.hash, release.created_at, *release.files.values())
        if type(release.version) is not int or not all(isinstance(f, str) for f in fields):
            raise TypeError("a field of the wrong type")
    except OSError as exc:
        if exc.errno in _STORAGE_ERRNOS:
            raise  # a full disk or a read-only workspace is said as such (errors.storage)
        raise _tampered(path, f"cannot be read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError):
        raise _tampered(path, "is not valid JSON") from None
    except (KeyError, TypeError, AttributeError) as exc:
        why = f"is not a release's metadata ({type(exc).__name__}: {exc})"
        raise _tampered(path, why) from None
    return release


def _tampered(path: Path, why: str) -> ReleaseTamperedError:
    return ReleaseTamperedError(
        f"Release file {path} {why}: it changed after publishing, so the release cannot be "
        f"trusted. Restore the file from a copy, or delete the folder {path.parent} and publish "
        f"again with: relay publish {path.parents[2].name}"
    )


def list_releases(workspace: Workspace, name: str) -> list[Release]:
    """Every release of ``name``, oldest first (by version)."""
    root = workspace.relay_dir(name) / RELEASES_DIR
    if not root.is_dir():
        return []
    found = [_read_release(p) for p in root.iterdir() if (p / RELEASE_FILE).is_file()]
    return sorted(found, key=lambda r: r.version)


def freeze_release(draft: Draft, workspace: Workspace) -> tuple[Release, bool]:
    """Freeze ``draft`` as a release; return it and whether it is new.

    Identical content returns the existing release unchanged (idempotent publish).
    """
    rels = draft.files()
    if RELEASE_FILE in rels:
        raise InvalidTargetError(
            f"Relay {draft.name!r} has a file named {RELEASE_FILE} in its draft folder; that name "
            f"is reserved for release metadata. Rename or remove {draft.folder / RELEASE_FILE}."
        )
    payload = [(rel, (draft.folder / rel).read_bytes()) for rel in rels]
    digest = content_hash(payload)
    root = draft.folder / RELEASES_DIR
    with _locked(root):
        target = root / digest
        if (target / RELEASE_FILE).is_file():
            return _read_release(target), False
        version = max((r.version for r in list_releases(workspace, draft.name)), default=0) + 1
        meta = {
            "relay": draft.name,
            "version": version,
            "hash": digest,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "files": {rel: _file_digest(data) for rel, data in payload},
        }
        staging = Path(tempfile.mkdtemp(prefix=".publish-", dir=root))
        try:
            for rel, data in payload:
                dest = staging / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            (staging / RELEASE_FILE).write_text(
                json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
            _make_read_only(staging)
            os.replace(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return _read_release(target), True


def _make_read_only(folder: Path) -> None:
    for root, dirs, names in os.walk(folder, topdown=False):
        for n in names:
            os.chmod(os.path.join(root, n), _READ_ONLY_FILE)
        for d in dirs:
            os.chmod(os.path.join(root, d), _READ_ONLY_DIR)
    os.chmod(folder, _READ_ONLY_DIR)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def resolve_release(workspace: Workspace, name: str, ref: str | None = None) -> Release:
    """Find a release by ``vN``/``N``, ``latest`` (default) or a hash prefix of 4+ hex digits."""
    releases = list_releases(workspace, name)
    if not releases:
        raise ReleaseNotFoundError(
            f"Relay {name!r} has no releases yet. Publish one with: relay publish {name}"
        )
    if ref is None or ref == "latest":
        return releases[-1]
    # ASCII digits only: "v١" is not v1 (str.isdigit accepts every script's digits)
    wanted = ref[1:] if ref[:1] in {"v", "V"} and _number(ref[1:]) else ref
    if _number(wanted) and len(wanted) < 4:
        for r in releases:
            if r.version == int(wanted):
                return r
    elif len(wanted) >= 4:
        matches = [r for r in releases if r.hash.startswith(wanted.lower())]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise ReleaseNotFoundError(
                f"Release {ref!r} of {name!r} is ambiguous: {len(matches)} hashes start with it. "
                f"Give more digits."
            )
    known = ", ".join(f"{r.ref} ({r.short_hash})" for r in releases)
    raise ReleaseNotFoundError(
        f"Relay {name!r} has no release {ref!r}. Releases: {known}. List them with: "
        f"relay releases {name}"
    )


def verify_release(release: Release) -> VerifyReport:
    """Recompute every frozen file's checksum and the release hash; report each difference."""
    report = VerifyReport(release)
    on_disk: dict[str, bytes] = {}
    for root, _dirs, names in os.walk(release.folder):
        for n in names:
            full = Path(root) / n
            rel = full.relative_to(release.folder).as_posix()
            if rel != RELEASE_FILE:
                on_disk[rel] = full.read_bytes()
    for rel, expected in sorted(release.files.items()):
        if rel not in on_disk:
            report.problems.append(f"{rel}: missing")
        elif (got := _file_digest(on_disk[rel])) != expected:
            report.problems.append(
                f"{rel}: checksum changed (expected {expected[:12]}, got {got[:12]})"
            )
    for rel in sorted(set(on_disk) - set(release.files)):
        report.problems.append(f"{rel}: not part of the release")
    if not report.problems and content_hash(on_disk.items()) != release.hash:
        report.problems.append(f"release hash does not match its folder ({release.hash[:12]})")
    return report
