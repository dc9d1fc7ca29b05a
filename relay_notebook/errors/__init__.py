"""The RelayError tree: every failure a user can meet, each with a stable kebab-case code.

Codes are part of the public contract: each class names its entry in ``relay_notebook.errors.codes``
(the code, its meaning, the CLI's exit status), from which ``docs/errors.md`` is generated.
Messages say what failed, why (expected vs got) and what to type next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from relay_notebook.errors import codes

if TYPE_CHECKING:
    from relay_notebook.errors.diagnostics import Diagnostic

__all__ = [
    "AccessRevokedError",
    "AdmissionError",
    "AttemptBudgetError",
    "BindingChangedError",
    "CheckpointsLostError",
    "CleanRunFailedError",
    "DatabaseOutOfReachError",
    "DatabaseOwnedError",
    "DatabaseUnavailableError",
    "DeadlinePassedError",
    "DiskFullError",
    "IdempotencyKeyReusedError",
    "InvalidCrashSpecError",
    "InvalidDatabaseUrlError",
    "InvalidInputError",
    "InvalidManifestError",
    "InvalidNameError",
    "InvalidRequestError",
    "InvalidRunIdError",
    "InvalidSecretError",
    "InvalidSourceError",
    "InvalidTargetError",
    "LedgerCorruptError",
    "NotDurableError",
    "NothingToReconcileError",
    "OutsideWorkflowError",
    "QueueUnavailableError",
    "RelayError",
    "RelayHasRunsError",
    "RelayNotFoundError",
    "ReleaseNotFoundError",
    "ReleaseTamperedError",
    "RequestTooLargeError",
    "RunDatabaseError",
    "RunFileNotFoundError",
    "RunFileRefusedError",
    "RunLockedError",
    "RunNotFoundError",
    "RunNotWaitingError",
    "RunRecordDamagedError",
    "RunRejectedError",
    "WorkspaceError",
    "WorkspaceNotFoundError",
    "WorkspaceReadOnlyError",
    "WorkspaceRefusedError",
]


class RelayError(Exception):
    """Base of every error the kit raises on purpose; ``code`` is stable."""

    entry: ClassVar[codes.Code] = codes.RELAY_ERROR
    code: ClassVar[str] = entry.code
    #: the `relay` CLI's exit status for this error: 1 for failures, 2 for bad input
    exit_code: ClassVar[int] = entry.exit

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.code, cls.exit_code = cls.entry.code, cls.entry.exit

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"


class WorkspaceError(RelayError):
    """The workspace folder cannot be used (not a directory, not writable)."""

    entry = codes.WORKSPACE_ERROR


class DiskFullError(RelayError):
    """The disk holding the workspace is full (ENOSPC, EDQUOT, SQLite's "disk is full")."""

    entry = codes.DISK_FULL


class WorkspaceReadOnlyError(WorkspaceError):
    """The workspace's file system is mounted read-only (EROFS)."""

    entry = codes.WORKSPACE_READ_ONLY


class InvalidNameError(RelayError):
    """A relay name that cannot name a folder safely."""

    entry = codes.INVALID_RELAY_NAME


class InvalidTargetError(RelayError):
    """A TARGET that is neither a relay name nor a readable ``.py`` file."""

    entry = codes.INVALID_TARGET


class InvalidSourceError(RelayError):
    """A relay file that cannot be read as Python source (not UTF-8 or its declared encoding)."""

    entry = codes.INVALID_SOURCE


class RelayNotFoundError(RelayError):
    """No draft of that name in the workspace."""

    entry = codes.RELAY_NOT_FOUND


class InvalidManifestError(RelayError):
    """``relay.yaml`` is not valid YAML or does not match the manifest schema."""

    entry = codes.INVALID_MANIFEST


class AdmissionError(RelayError):
    """The relay's source failed admission; ``diagnostics`` holds every problem found."""

    entry = codes.ADMISSION_FAILED

    def __init__(self, relay: str, diagnostics: Sequence[Diagnostic]) -> None:
        errors = [d for d in diagnostics if d.severity == "error"]
        lines = "\n".join(d.format() for d in errors)
        super().__init__(
            f"Relay {relay!r} failed admission with {len(errors)} "
            f"error{'s' if len(errors) != 1 else ''}:\n{lines}\n"
            f"Fix the lines above, then check again with: relay check {relay}"
        )
        self.relay = relay
        self.diagnostics = list(diagnostics)


class ReleaseNotFoundError(RelayError):
    """No release of the relay matches the given reference."""

    entry = codes.RELEASE_NOT_FOUND


class InvalidRunIdError(RelayError):
    """A RUN argument that is not of the form RELAY-N."""

    entry = codes.INVALID_RUN_ID


class RunNotFoundError(RelayError):
    """No run folder for that run id."""

    entry = codes.RUN_NOT_FOUND


class InvalidInputError(RelayError):
    """The run input is not strict JSON (at most 1 MiB, nested 100 deep) or cannot be read."""

    entry = codes.INVALID_INPUT


class InvalidCrashSpecError(RelayError):
    """A --crash value that is not ``after:STEP[#N]`` or ``during:STEP[#N]``."""

    entry = codes.INVALID_CRASH_SPEC


class RunLockedError(RelayError):
    """Another process is executing this run right now (single executor per run)."""

    entry = codes.RUN_LOCKED


class RunRecordDamagedError(RelayError):
    """A run's own file (run.json, its result, its DBOS folder) is missing or unreadable."""

    entry = codes.RUN_RECORD_DAMAGED


class RunRejectedError(RelayError):
    """A run attempt refused before starting: changed binding, spent budget, passed deadline."""

    entry = codes.RUN_REJECTED


class DatabaseOutOfReachError(RunRejectedError):
    """A ``network: none`` relay's runs kept on a PostgreSQL server off this machine."""

    entry = codes.DATABASE_OUT_OF_REACH


class BindingChangedError(RunRejectedError):
    """Recovery refused: something the run was bound to at its first attempt has changed."""

    entry = codes.BINDING_CHANGED


class AttemptBudgetError(RunRejectedError):
    """Recovery refused: the run has used all of its process attempts."""

    entry = codes.ATTEMPT_BUDGET_EXHAUSTED


class DeadlinePassedError(RunRejectedError):
    """Recovery refused: the run's first deadline has passed."""

    entry = codes.DEADLINE_PASSED


class InvalidSecretError(RelayError):
    """A vault secret name or value that cannot be stored (the value is never shown)."""

    entry = codes.INVALID_SECRET


class AccessRevokedError(RelayError):
    """The relay's access is revoked: no attempt starts until ``relay grant NAME``."""

    entry = codes.ACCESS_REVOKED


class NothingToReconcileError(RelayError):
    """``reconcile`` found no matching uncertain call (or needs ``--key`` to choose one)."""

    entry = codes.NOTHING_TO_RECONCILE


class NotDurableError(RunRejectedError):
    """Recovery refused: the run's relay has ``relay_durability: none`` (nothing to resume)."""

    entry = codes.NOT_DURABLE


class LedgerCorruptError(RelayError):
    """A run's event ledger has a gap in its sequence numbers or another run's events."""

    entry = codes.LEDGER_CORRUPT


class ReleaseTamperedError(RelayError):
    """A frozen release file no longer matches its recorded checksum."""

    entry = codes.RELEASE_TAMPERED


class InvalidRequestError(RelayError):
    """A REST API request whose body, query or headers are not what the route expects."""

    entry = codes.INVALID_REQUEST


class RequestTooLargeError(InvalidRequestError):
    """A REST API request body over the 4 MiB limit (HTTP 413)."""

    entry = codes.REQUEST_TOO_LARGE


class IdempotencyKeyReusedError(RelayError):
    """An ``Idempotency-Key`` already used to start a run of this relay with a different body."""

    entry = codes.IDEMPOTENCY_KEY_REUSED


class InvalidDatabaseUrlError(RelayError):
    """``RELAY_DATABASE_URL`` / ``--database-url`` is not a ``postgresql://`` URL."""

    entry = codes.INVALID_DATABASE_URL


class DatabaseUnavailableError(RelayError):
    """The PostgreSQL system database cannot be reached (the password is never shown)."""

    entry = codes.DATABASE_UNAVAILABLE


class DatabaseOwnedError(RelayError):
    """The PostgreSQL database already holds the runs of another workspace."""

    entry = codes.DATABASE_OWNED


class QueueUnavailableError(RelayError):
    """``--queue`` and workers need a PostgreSQL database (``RELAY_DATABASE_URL``)."""

    entry = codes.QUEUE_NEEDS_POSTGRESQL


class CheckpointsLostError(RunRejectedError):
    """Recovery refused: checkpoints the run's ledger records are missing from its database."""

    entry = codes.CHECKPOINTS_LOST


class OutsideWorkflowError(RunRejectedError):
    """Attempt refused: the run's DBOS database holds a workflow the kit did not make."""

    entry = codes.OUTSIDE_WORKFLOW


class RelayHasRunsError(RelayError):
    """``relay delete NAME`` refused: the relay has runs (delete them, or pass ``--force``)."""

    entry = codes.RELAY_HAS_RUNS


class RunFileNotFoundError(RelayError):
    """No such file in the run's ``execution/`` folder (``relay files RUN`` lists them)."""

    entry = codes.RUN_FILE_NOT_FOUND


class RunFileRefusedError(RelayError):
    """A file path outside the run's ``execution/`` folder (``..``, absolute, a symlink out)."""

    entry = codes.RUN_FILE_REFUSED


class CleanRunFailedError(RelayError):
    """``relay test --crash-each``: the uncrashed run did not succeed."""

    entry = codes.CLEAN_RUN_FAILED


class WorkspaceRefusedError(RelayError):
    """A REST request named a workspace the server does not serve (outside its root folder)."""

    entry = codes.WORKSPACE_REFUSED


class WorkspaceNotFoundError(RelayError):
    """A REST request named a workspace folder that does not exist (no relay saved there yet)."""

    entry = codes.WORKSPACE_NOT_FOUND


class RunNotWaitingError(RelayError):
    """A message to a run that cannot receive it (finished, never started, not durable)."""

    entry = codes.RUN_NOT_WAITING


class RunDatabaseError(RelayError):
    """The run's DBOS database refused a statement (damaged, full or unwritable); the SQL is
    never shown."""

    entry = codes.DATABASE_ERROR
