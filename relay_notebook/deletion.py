"""Deleting a run, or a relay: ``relay delete``, ``%relay delete`` and the REST ``DELETE`` routes.

Design note: a run is deleted under its run lock, the lock ``recover`` takes, so a run with a
live attempt (here, in a worker, or in another notebook) is refused with ``run-locked``, and
no attempt can start while it goes. A deleted run leaves its empty ``iteration-N-hook``
folder behind: run numbers are never handed out again, so a run id (the DBOS workflow id,
unique in a shared PostgreSQL database and in receipts) names one run forever. Deleting a
run never touches a release: releases belong to the relay, and other runs may use them. A
relay with runs is refused unless ``force``, which first takes every run's lock (all or
none), so a relay is never left half deleted by a live run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from relay_notebook.errors import (
    InvalidTargetError,
    RelayError,
    RelayHasRunsError,
    RunLockedError,
)
from relay_notebook.record.folders import (
    RUNS_DIR,
    RunFolder,
    find_run,
    list_run_folders,
    parse_run_id,
)
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import Backend, backend_for_run, workspace_backend
from relay_notebook.runner.locks import RunLock, take_run_lock
from relay_notebook.workspace import Workspace, list_releases
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["Deleted", "delete", "delete_relay", "delete_run"]


@dataclass(frozen=True)
class Deleted:
    """What a delete removed: one run, or a relay with its releases and runs."""

    kind: Literal["run", "relay"]
    target: str
    relay: str
    runs: list[str] = field(default_factory=list)
    releases: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "deleted": self.kind,
            "target": self.target,
            "relay": self.relay,
            "runs": self.runs,
            "releases": self.releases,
        }


def _lock(folder: RunFolder, backend: Backend | None) -> RunLock:
    """The run's lock, or ``run-locked`` worded for a delete."""
    record = RunRecord.load(folder)
    if record.status == "queued":
        raise RunLockedError(
            f"Cannot delete run {folder.run_id}: it is queued for the worker pool. Wait until "
            f"it has finished (relay runs {folder.relay}), then delete it."
        )
    try:
        return take_run_lock(folder, backend_for_run(record, backend))
    except RunLockedError:
        raise RunLockedError(
            f"Cannot delete run {folder.run_id}: an attempt is executing it right now. Wait "
            f"until it has finished (relay runs {folder.relay}), then delete it."
        ) from None


def _writable(path: Path) -> None:
    """Releases are frozen read-only; deleting the relay makes them removable first."""
    for root, dirs, _ in os.walk(path):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, d), stat.S_IRWXU)
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        _writable(path)
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _empty_run(folder: RunFolder) -> None:
    """Everything of the run but its folder (the number stays taken) and the held lock file."""
    for entry in folder.path.iterdir():
        if entry != folder.lock:
            _remove(entry)


@contextlib.contextmanager
def _holding(folders: list[RunFolder], backend: Backend | None) -> Iterator[None]:
    locks: list[RunLock] = []
    try:
        for folder in folders:
            locks.append(_lock(folder, backend))
        yield
    finally:
        for lock in locks:
            lock.release()


def delete_run(workspace: Workspace, run_id: str, *, backend: Backend | None = None) -> Deleted:
    """Delete one run (refused while an attempt executes it); its release is kept."""
    folder = find_run(workspace, run_id)
    with _holding([folder], workspace_backend(workspace, backend)):
        _empty_run(folder)
    return Deleted("run", folder.run_id, folder.relay, [folder.run_id])


def delete_relay(
    workspace: Workspace, name: str, *, force: bool = False, backend: Backend | None = None
) -> Deleted:
    """Delete a relay's draft and releases; its runs too with ``force`` (else refused)."""
    draft = workspace.load_draft(name)
    runs = list_run_folders(workspace, name)
    if runs and not force:
        ids = ", ".join(f.run_id for f in runs[:3]) + (", …" if len(runs) > 3 else "")
        raise RelayHasRunsError(
            f"Cannot delete relay {name}: it has {len(runs)} run{'s' if len(runs) > 1 else ''} "
            f"({ids}). Delete them with relay delete RUN, or the relay and all its runs with "
            f"relay delete {name} --force."
        )
    releases = len(list_releases(workspace, name))
    with _holding(runs, workspace_backend(workspace, backend)):
        for folder in runs:
            _empty_run(folder)
        for entry in draft.folder.iterdir():
            if entry.name != RUNS_DIR:
                _remove(entry)
    AccessPolicy(workspace.home).grant(name)  # a relay made again under this name starts fresh
    return Deleted("relay", name, name, [f.run_id for f in runs], releases)


def delete(
    workspace: Workspace, target: str, *, force: bool = False, backend: Backend | None = None
) -> Deleted:
    """``relay delete NAME|RUN``: a run id of an existing run deletes the run, else the relay."""
    folder: RunFolder | None
    try:
        parse_run_id(target)
        folder = find_run(workspace, target)
    except RelayError:  # not a run id, or no such run: a relay name
        folder = None
    if folder is None:
        return delete_relay(workspace, target, force=force, backend=backend)
    if workspace.exists(target):
        raise InvalidTargetError(
            f"{target!r} names both a relay and run {folder.number} of relay {folder.relay}; "
            f"rename the relay {target} before deleting either."
        )
    return delete_run(workspace, target, backend=backend)
