"""The relays family: the workspace's relays as listed, and deleting a run or a relay.

Listing: the workspace's relays as ``relay relays``, ``%relay relays`` and
``GET relay/api/relays`` list them: releases, runs, access, and whether the draft is broken
(fails admission). Deleting: ``relay delete``, ``%relay delete`` and the REST ``DELETE`` routes.

Design note: a run is deleted under its run lock, the lock ``recover`` takes, so a run with a
live attempt (here, in a worker, or in another notebook) is refused with ``run-locked``, and
no attempt can start while it goes. A deleted run leaves its empty ``iteration-N-hook``
folder behind (and no lock file): run numbers are never handed out again, so a run id (the
DBOS workflow id, unique in a shared PostgreSQL database and in receipts) names one run
forever. Deleting a run never touches a release: releases belong to the relay, and other runs
may use them. A relay with runs is refused unless ``force``, which first takes the relay's
lock (no new run's folder is made meanwhile) and every run's lock (all or none), so a relay is
never left half deleted by a live run; its folder then goes whole, the numbers its runs had
kept in the workspace (``workspace.relay_lock``).
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

from relay_notebook.commands.analysis_cache import cached_check
from relay_notebook.errors import (
    DatabaseUnavailableError,
    InvalidTargetError,
    RelayError,
    RelayHasRunsError,
    RunLockedError,
    RunRecordDamagedError,
)
from relay_notebook.record.backend import error_text
from relay_notebook.record.folders import (
    RUNS_DIR,
    RunFolder,
    find_run,
    list_run_folders,
    list_unrecorded_folders,
    parse_run_id,
)
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import (
    Backend,
    backend_for_run,
    delete_run_workflows,
    resolve_backend,
    workspace_backend,
)
from relay_notebook.runner.locks import RunLock, take_run_lock
from relay_notebook.workspace import Workspace, list_releases
from relay_notebook.workspace.access import AccessPolicy
from relay_notebook.workspace.relay_lock import hold_relay, keep_run_numbers
from relay_notebook.workspace.vault import Vault

__all__ = [
    "Deleted",
    "RelaySummary",
    "broken_drafts",
    "delete",
    "delete_relay",
    "delete_run",
    "grant",
    "list_relays",
    "relay_summary",
    "relays",
    "revoke",
    "summarize_relay",
    "vault_names",
    "vault_set",
]


@dataclass(frozen=True)
class RelaySummary:
    """One relay of a listing; ``problem`` is the first admission error of a broken draft."""

    name: str
    releases: int
    latest: dict[str, Any] | None
    runs: int
    access: str
    broken: bool
    problem: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "releases": self.releases,
            "latest": self.latest,
            "runs": self.runs,
            "access": self.access,
            "broken": self.broken,
            "problem": self.problem,
        }

    def line(self) -> str:
        """One line of ``relay relays``."""
        latest = f"v{self.latest['version']}" if self.latest else "unpublished"
        head = (
            f"{self.name:<20} {latest:<12} releases {self.releases}  runs {self.runs:<4} "
            f"{self.access}"
        )
        return f"{head}  BROKEN: {self.problem}" if self.broken else head


def summarize_relay(workspace: Workspace, name: str) -> RelaySummary:
    """The listing entry of relay ``name`` (its draft is checked, never imported)."""
    problem: str | None = None
    try:
        report = cached_check(workspace, workspace.load_draft(name))  # unchanged: not again
    except RelayError as exc:  # an unreadable source or manifest is broken too
        problem = " ".join(exc.message.split())
    else:
        if report.errors:
            problem = report.errors[0].format()
    found = list_releases(workspace, name)
    latest = found[-1] if found else None
    return RelaySummary(
        name=name,
        releases=len(found),
        latest={"version": latest.version, "hash": latest.hash} if latest else None,
        runs=len(list_run_folders(workspace, name)),
        access="granted" if AccessPolicy(workspace.home).is_granted(name) else "revoked",
        broken=problem is not None,
        problem=problem,
    )


def list_relays(workspace: Workspace) -> list[RelaySummary]:
    """Every relay with a draft, by name."""
    return [summarize_relay(workspace, name) for name in workspace.list_relays()]


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
    """The run's lock, or ``run-locked`` worded for a delete (a damaged run is deleted too)."""
    record: RunRecord | None
    try:
        record = RunRecord.load(folder)
    except RunRecordDamagedError:
        record = None
    if record is not None and record.status == "queued":
        raise RunLockedError(
            f"Cannot delete run {folder.run_id}: it is queued for the worker pool. Wait until "
            f"it has finished (relay runs {folder.relay}), then delete it."
        )
    try:
        if record is None:  # the workspace's database is the best guess left
            return take_run_lock(folder, backend or resolve_backend(None), recorded=False)
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


def _empty_run(folder: RunFolder, backend: Backend) -> None:
    """Everything of the run but its folder (the number stays taken); the lock file goes last
    (its lock, held, lasts until released; one taken after finds no run.json and goes). A run
    kept in PostgreSQL loses its rows there first: if that fails, its files stay, and
    ``relay delete`` can be typed again."""
    try:
        record: RunRecord | None = RunRecord.load(folder)
    except (RelayError, OSError):  # a damaged record: its files go, as they would anyway
        record = None
    if record is not None and record.database:
        kept_in = backend_for_run(record, backend)
        child = (record.fork or {}).get("child")
        forked = (
            [str(child["workflow_id"])]
            if isinstance(child, dict) and child.get("workflow_id")
            else []
        )
        try:
            delete_run_workflows(kept_in, folder.run_id, forked)
        except Exception as exc:
            raise DatabaseUnavailableError(
                f"Cannot delete run {folder.run_id}'s workflows from {kept_in.display}: "
                f"{error_text(exc)}. Its files are kept; once the server answers, type: "
                f"relay delete {folder.run_id}"
            ) from None
    for entry in folder.path.iterdir():
        if entry != folder.lock:
            _remove(entry)
    folder.lock.unlink(missing_ok=True)


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
    try:
        folder = find_run(workspace, run_id)
    except RunRecordDamagedError:  # its run.json is gone, its files remain: they go too
        folder = _unrecorded(workspace, run_id)
    current = workspace_backend(workspace, backend)
    with _holding([folder], current):
        _empty_run(folder, current)
    return Deleted("run", folder.run_id, folder.relay, [folder.run_id])


def _unrecorded(workspace: Workspace, run_id: str) -> RunFolder:
    """The folder of ``run_id``, whose run.json is gone but whose files remain."""
    relay, number = parse_run_id(run_id)
    return next(f for f in list_unrecorded_folders(workspace, relay) if f.number == number)


def delete_relay(
    workspace: Workspace, name: str, *, force: bool = False, backend: Backend | None = None
) -> Deleted:
    """Delete a relay's draft and releases; its runs too with ``force`` (else refused)."""
    draft = workspace.load_draft(name)
    # under the relay's lock, which a new run's folder is made under: none appears meanwhile
    with hold_relay(workspace, name, exclusive=True):
        runs = sorted(
            [*list_run_folders(workspace, name), *list_unrecorded_folders(workspace, name)],
            key=lambda f: f.number,
        )
        if runs and not force:
            ids = ", ".join(f.run_id for f in runs[:3]) + (", …" if len(runs) > 3 else "")
            raise RelayHasRunsError(
                f"Cannot delete relay {name}: it has {len(runs)} "
                f"run{'s' if len(runs) > 1 else ''} ({ids}). Delete them with relay delete "
                f"RUN, or the relay and all its runs with relay delete {name} --force."
            )
        releases = len(list_releases(workspace, name))
        current = workspace_backend(workspace, backend)
        with _holding(runs, current):
            # its run ids stay taken: a relay made again under the name starts after them
            keep_run_numbers(workspace, name, _highest_number(draft.folder / RUNS_DIR))
            for folder in runs:
                _empty_run(folder, current)
            _remove(draft.folder)  # the relay's folder goes whole: nothing is left behind
    AccessPolicy(workspace.home).grant(name)  # a relay made again under this name starts fresh
    return Deleted("relay", name, name, [f.run_id for f in runs], releases)


def _highest_number(runs_dir: Path) -> int:
    """The highest run number a relay handed out (deleted runs' empty folders count)."""
    found = [0]
    with contextlib.suppress(OSError):
        for p in runs_dir.iterdir():
            head, _, rest = p.name.partition("-")
            number = rest.removesuffix("-hook")
            if head == "iteration" and number.isascii() and number.isdigit():
                found.append(int(number))
    return max(found)


def delete(
    workspace: Workspace, target: str, *, force: bool = False, backend: Backend | None = None
) -> Deleted:
    """``relay delete NAME|RUN``: a run id of an existing run deletes the run, else the relay."""
    folder: RunFolder | None
    try:
        parse_run_id(target)
        folder = find_run(workspace, target)
    except RunRecordDamagedError:  # its run.json is gone: the run is deleted all the same
        folder = _unrecorded(workspace, target)
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


def relays(workspace: Workspace) -> list[RelaySummary]:
    """``relay relays``: every relay, a draft that fails admission marked broken."""
    return list_relays(workspace)


def relay_summary(workspace: Workspace, name: str) -> RelaySummary:
    """One relay of ``relay relays`` (raises if it does not exist)."""
    workspace.load_draft(name)
    return summarize_relay(workspace, name)


def broken_drafts(workspace: Workspace, relay: str | None = None) -> list[RelaySummary]:
    """The relays (or ``relay``) whose drafts fail admission, for the ``runs`` listings."""
    found = [relay_summary(workspace, relay)] if relay else relays(workspace)
    return [r for r in found if r.broken]


def grant(workspace: Workspace, name: str) -> None:
    """``relay grant NAME``: restore a relay's access."""
    workspace.load_draft(name)
    AccessPolicy(workspace.home).grant(name)


def revoke(workspace: Workspace, name: str) -> None:
    """``relay revoke NAME``: deny new attempts and platform calls of a relay, live."""
    workspace.load_draft(name)
    AccessPolicy(workspace.home).revoke(name)


def vault_set(workspace: Workspace, name: str, value: str) -> None:
    """``relay vault set NAME``: store a secret (the value never reaches a run folder)."""
    Vault(workspace.home).set(name, value)


def vault_names(workspace: Workspace) -> list[str]:
    """The names (never the values) of the workspace's secrets."""
    return Vault(workspace.home).names()
