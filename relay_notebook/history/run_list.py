"""Run summaries across a workspace: one line per run, filtered, oldest first.

Reads only ``run.json`` (and a run's ledger for its live state; for an unfinished run, DBOS's
status row, in its SQLite file or in PostgreSQL, which ``dbos workflow cancel`` may have set): a
damaged record is listed as ``damaged``, naming the file, and never breaks the listing of the
others.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, cast

from relay_notebook.errors import InvalidInputError, RelayError, RunRecordDamagedError
from relay_notebook.history.log_records import ReleaseRef
from relay_notebook.record.dbos_tools import RunDatabases, shown_status
from relay_notebook.record.folders import (
    RunFolder,
    find_run,
    list_run_folders,
    list_unrecorded_folders,
    unrecorded_problem,
)
from relay_notebook.record.run_record import RunRecord
from relay_notebook.workspace import Workspace

__all__ = ["RUN_STATUSES", "RunSummary", "list_runs"]

#: every status a run can have (``pending`` until its first attempt starts; ``queued`` while
#: it waits for a worker; ``creating``: a fork not yet made, see ``runner.fork``)
RUN_STATUSES: Final = (
    "creating",
    "pending",
    "queued",
    "running",
    "succeeded",
    "failed",
    "interrupted",
    "needs_reconciliation",
    "waiting",
    "denied",
    "rejected",
    "cancelled",
    "damaged",
)

#: the statuses DBOS's own tools can change under the kit (``record.dbos_tools``)
_UNFINISHED: Final = frozenset({"interrupted", "waiting", "needs_reconciliation", "denied"})

Moment = datetime | float


@dataclass(frozen=True)
class RunSummary:
    """One line of ``relay runs``."""

    run_id: str
    relay: str
    status: str
    attempts: int
    release: str
    created_at: float
    #: wall time: from the run's creation to the end of its latest attempt
    duration_ms: float | None
    reused: int
    ended_at: float | None = None
    #: why the run's record cannot be read (status ``damaged``), naming the file
    problem: str | None = None
    #: active time: the sum of its attempts' durations (no waiting between or before them)
    active_ms: float | None = None
    #: its model calls' tokens and cost, paid and not paid (``history.model_calls``; None: none)
    usage: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "relay": self.relay,
            "status": self.status,
            "attempts": self.attempts,
            "release": self.release,
            "created_at": self.created_at,
            "ended_at": self.ended_at,
            "duration_ms": self.duration_ms,
            "active_ms": self.active_ms,
            "reused": self.reused,
            "problem": self.problem,
            **({"usage": self.usage} if self.usage is not None else {}),
        }


def _damaged(folder: RunFolder, exc: RunRecordDamagedError) -> RunSummary:
    """The line of a run whose record cannot be read: listed, marked, and the file named."""
    created = 0.0
    for path in (folder.meta, folder.events, folder.path):  # run.json may be the file gone
        try:
            created = path.stat().st_mtime * 1000
        except OSError:
            continue
        break
    return RunSummary(
        run_id=folder.run_id,
        relay=folder.relay,
        status="damaged",
        attempts=0,
        release="-",
        created_at=round(created, 1),
        duration_ms=None,
        reused=0,
        problem=exc.message,
    )


def _summary(folder: RunFolder, record: RunRecord, databases: RunDatabases) -> RunSummary:
    attempts = record.attempts
    ended = [a.ended_at for a in attempts if a.ended_at]
    spans = [
        a.ended_at - a.started_at
        for a in attempts
        if a.ended_at is not None and isinstance(a.started_at, int | float)
    ]
    release = record.release
    return RunSummary(
        run_id=folder.run_id,
        relay=folder.relay,
        status=_status(folder, record, databases),
        attempts=len(attempts),
        release=f"v{release['version']}" if release else "draft",
        created_at=record.created_at,
        duration_ms=round(max(ended) - record.created_at, 1) if ended else None,
        reused=_reused(record),
        ended_at=max(ended) if ended else None,
        active_ms=round(sum(spans), 1) if spans else None,
        usage=_usage(folder, record),
    )


def _reused(record: RunRecord) -> int:
    """Checkpoints its attempts replayed, a fork's copied calls not among them (copied from its
    parent, not reused: ``relay logs`` and the run graph say so too)."""
    fork = record.fork
    copied = set(fork.get("copied") or ()) if isinstance(fork, dict) else set()
    if not copied:
        return sum(a.reused_count for a in record.attempts)
    return sum(len(set(a.reused) - copied) for a in record.attempts)


def _status(folder: RunFolder, record: RunRecord, databases: RunDatabases) -> str:
    """run.json's status, or ``cancelled`` when DBOS's tool cancelled the unfinished run."""
    if record.status not in _UNFINISHED:
        return record.status  # finished or going: DBOS's tools cannot change what is shown
    return shown_status(record.status, databases.inspect(folder, record))


def _usage(folder: RunFolder, record: RunRecord) -> dict[str, Any] | None:
    """Tokens and cost of the run's model calls, when its ledger records any."""
    from relay_notebook.history.ledger_scan import LedgerScan
    from relay_notebook.history.model_calls import listed_usage
    from relay_notebook.record.ledger import kind_tag
    from relay_notebook.record.ledger_events import Event
    from relay_notebook.workspace.prices import load_prices

    def model_calls(ledger_path: Path, run_id: str) -> list[Event]:
        try:
            with ledger_path.open("rb") as ledger:  # one find before any parsing
                if kind_tag("model_call") not in ledger.read():
                    return []
        except OSError:
            return []
        return LedgerScan(ledger_path, run_id).select("model_call")

    home = folder.path.parent.parent.parent
    events = model_calls(folder.events, folder.run_id)
    fork = record.fork or {}
    copied: tuple[str, list[int], list[Event]] | None = None
    child = fork.get("child")
    copied_child = (
        (str(child["parent_workflow_id"]), list(child.get("copied") or ()))
        if isinstance(child, dict) and child.get("parent_workflow_id")
        else None
    )
    if (fork.get("copied") or copied_child) and isinstance(fork.get("parent"), str):
        try:  # the parent may have been deleted since: its copies are then not counted
            parent = find_run(Workspace(home), fork["parent"])
        except RelayError:
            parent = None
        parent_events = model_calls(parent.events, parent.run_id) if parent else []
        if parent_events:
            copied = (fork["parent"], list(fork["copied"]), parent_events)
    if not events and copied is None:
        return None
    prices = load_prices(home)
    reused = [(a.attempt, a.reused) for a in record.attempts]
    paid, saved = listed_usage(folder.run_id, events, reused, prices, copied, copied_child)
    return {"currency": prices.currency, "paid": paid.to_dict(), "saved": saved.to_dict()}


def _epoch_ms(moment: Moment, what: str) -> float:
    if isinstance(moment, datetime):
        return moment.timestamp() * 1000
    if isinstance(moment, int | float) and not isinstance(moment, bool):
        return float(moment)
    raise InvalidInputError(
        f"{what}= takes a datetime or epoch milliseconds (as run.json's created_at), got "
        f"{type(moment).__name__}; e.g. {what}=datetime(2025, 1, 31)"
    )


def _statuses(status: str | Iterable[str] | None) -> set[str] | None:
    if status is None:
        return None
    wanted = {status} if isinstance(status, str) else set(status)
    unknown = sorted(wanted - set(RUN_STATUSES))
    if unknown:
        raise InvalidInputError(
            f"Unknown run status {', '.join(map(repr, unknown))}: expected one of "
            f"{', '.join(RUN_STATUSES)}."
        )
    return wanted


def _release_matches(release: ReleaseRef | None, wanted: str) -> bool:
    ref = wanted.strip().lower()
    if ref == "draft":
        return release is None
    if release is None:
        return False
    if ref.removeprefix("v").isascii() and ref.removeprefix("v").isdigit():
        return int(ref.removeprefix("v")) == int(release["version"])
    return len(ref) >= 4 and str(release.get("hash", "")).startswith(ref)


def list_runs(
    workspace: Workspace,
    relay: str | None = None,
    *,
    status: str | Iterable[str] | None = None,
    release: str | None = None,
    since: Moment | None = None,
    until: Moment | None = None,
) -> list[RunSummary]:
    """Runs of one relay, or of every relay in the workspace, oldest first.

    ``status`` keeps runs with that status (or any of several); ``release`` keeps runs of
    ``"draft"``, of a release (``"v3"``) or of a release hash prefix; ``since``/``until``
    keep runs created in that span (a ``datetime`` or epoch milliseconds).
    """
    relays = [relay] if relay else workspace.list_relays()
    if relay:
        workspace.load_draft(relay)
    statuses = _statuses(status)
    lo = _epoch_ms(since, "since") if since is not None else None
    hi = _epoch_ms(until, "until") if until is not None else None
    found = []
    databases = RunDatabases(workspace)
    for name in relays:
        # a run whose run.json is gone but whose files remain is listed damaged, not lost
        unrecorded = list_unrecorded_folders(workspace, name)
        for folder in sorted(
            [*list_run_folders(workspace, name), *unrecorded], key=lambda f: f.number
        ):
            record: RunRecord | None
            try:
                if folder in unrecorded:
                    raise unrecorded_problem(folder)
                record = RunRecord.load(folder)
            except RunRecordDamagedError as exc:  # one run's problem, not the workspace's
                record, summary = None, _damaged(folder, exc)
            else:
                summary = _summary(folder, record, databases)
            if statuses is not None and summary.status not in statuses:
                continue
            if release is not None and (
                record is None
                or not _release_matches(cast(ReleaseRef | None, record.release), release)
            ):
                continue
            created = summary.created_at
            if (lo is not None and created < lo) or (hi is not None and created > hi):
                continue
            found.append(summary)
    return sorted(found, key=lambda s: (s.created_at, s.run_id))
