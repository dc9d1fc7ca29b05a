"""The RelayError tree: every failure a user can meet, each with a stable kebab-case code.

Codes are part of the public contract: they are listed in ``docs/errors.md`` and a test keeps
the two in step. Messages say what failed, why (expected vs got) and what to type next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from relay_notebook.source.diagnostics import Diagnostic

__all__ = [
    "AccessRevokedError",
    "AdmissionError",
    "AttemptBudgetError",
    "BindingChangedError",
    "CheckpointsLostError",
    "DatabaseOwnedError",
    "DatabaseUnavailableError",
    "DeadlinePassedError",
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
    "QueueUnavailableError",
    "RelayError",
    "RelayHasRunsError",
    "RelayNotFoundError",
    "ReleaseNotFoundError",
    "ReleaseTamperedError",
    "RequestTooLargeError",
    "RunFileNotFoundError",
    "RunFileRefusedError",
    "RunLockedError",
    "RunNotFoundError",
    "RunRecordDamagedError",
    "RunRejectedError",
    "WorkspaceError",
    "WorkspaceNotFoundError",
    "WorkspaceRefusedError",
]


class RelayError(Exception):
    """Base of every error the kit raises on purpose; ``code`` is stable."""

    code: ClassVar[str] = "relay-error"
    #: the `relay` CLI's exit status for this error: 1 for failures, 2 for bad input
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"


class WorkspaceError(RelayError):
    """The workspace folder cannot be used (not a directory, not writable)."""

    code = "workspace-error"
    exit_code = 2


class InvalidNameError(RelayError):
    """A relay name that cannot name a folder safely."""

    code = "invalid-relay-name"
    exit_code = 2


class InvalidTargetError(RelayError):
    """A TARGET that is neither a relay name nor a readable ``.py`` file."""

    code = "invalid-target"
    exit_code = 2


class InvalidSourceError(RelayError):
    """A relay file that cannot be read as Python source (not UTF-8 or its declared encoding)."""

    code = "invalid-source"
    exit_code = 2


class RelayNotFoundError(RelayError):
    """No draft of that name in the workspace."""

    code = "relay-not-found"
    exit_code = 2


class InvalidManifestError(RelayError):
    """``relay.yaml`` is not valid YAML or does not match the manifest schema."""

    code = "invalid-manifest"
    exit_code = 2


class AdmissionError(RelayError):
    """The relay's source failed admission; ``diagnostics`` holds every problem found."""

    code = "admission-failed"

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

    code = "release-not-found"
    exit_code = 2


class InvalidRunIdError(RelayError):
    """A RUN argument that is not of the form RELAY-N."""

    code = "invalid-run-id"
    exit_code = 2


class RunNotFoundError(RelayError):
    """No run folder for that run id."""

    code = "run-not-found"
    exit_code = 2


class InvalidInputError(RelayError):
    """The run input is not strict JSON (at most 1 MiB, nested 100 deep) or cannot be read."""

    code = "invalid-input"
    exit_code = 2


class InvalidCrashSpecError(RelayError):
    """A --crash value that is not ``after:STEP[#N]`` or ``during:STEP[#N]``."""

    code = "invalid-crash-spec"
    exit_code = 2


class RunLockedError(RelayError):
    """Another process is executing this run right now (single executor per run)."""

    code = "run-locked"


class RunRecordDamagedError(RelayError):
    """A run's own file (run.json, its result, its DBOS folder) is missing or unreadable."""

    code = "run-record-damaged"


class RunRejectedError(RelayError):
    """A run attempt refused before starting: changed binding, spent budget, passed deadline."""

    code = "run-rejected"


class BindingChangedError(RunRejectedError):
    """Recovery refused: something the run was bound to at its first attempt has changed."""

    code = "binding-changed"


class AttemptBudgetError(RunRejectedError):
    """Recovery refused: the run has used all of its process attempts."""

    code = "attempt-budget-exhausted"


class DeadlinePassedError(RunRejectedError):
    """Recovery refused: the run's first deadline has passed."""

    code = "deadline-passed"


class InvalidSecretError(RelayError):
    """A vault secret name or value that cannot be stored (the value is never shown)."""

    code = "invalid-secret"
    exit_code = 2


class AccessRevokedError(RelayError):
    """The relay's access is revoked: no attempt starts until ``relay grant NAME``."""

    code = "access-revoked"


class NothingToReconcileError(RelayError):
    """``reconcile`` found no matching uncertain call (or needs ``--key`` to choose one)."""

    code = "nothing-to-reconcile"
    exit_code = 2


class NotDurableError(RunRejectedError):
    """Recovery refused: the run's relay has ``relay_durability: none`` (nothing to resume)."""

    code = "not-durable"


class LedgerCorruptError(RelayError):
    """A run's event ledger has a gap in its sequence numbers or another run's events."""

    code = "ledger-corrupt"


class ReleaseTamperedError(RelayError):
    """A frozen release file no longer matches its recorded checksum."""

    code = "release-tampered"


class InvalidRequestError(RelayError):
    """A REST API request whose body, query or headers are not what the route expects."""

    code = "invalid-request"
    exit_code = 2


class RequestTooLargeError(InvalidRequestError):
    """A REST API request body over the 4 MiB limit (HTTP 413)."""

    code = "request-too-large"


class IdempotencyKeyReusedError(RelayError):
    """An ``Idempotency-Key`` already used to start a run of this relay with a different body."""

    code = "idempotency-key-reused"


class InvalidDatabaseUrlError(RelayError):
    """``RELAY_DATABASE_URL`` / ``--database-url`` is not a ``postgresql://`` URL."""

    code = "invalid-database-url"
    exit_code = 2


class DatabaseUnavailableError(RelayError):
    """The PostgreSQL system database cannot be reached (the password is never shown)."""

    code = "database-unavailable"


class DatabaseOwnedError(RelayError):
    """The PostgreSQL database already holds the runs of another workspace."""

    code = "database-owned-by-other-workspace"


class QueueUnavailableError(RelayError):
    """``--queue`` and workers need a PostgreSQL database (``RELAY_DATABASE_URL``)."""

    code = "queue-needs-postgresql"
    exit_code = 2


class CheckpointsLostError(RunRejectedError):
    """Recovery refused: checkpoints the run's ledger records are missing from its database."""

    code = "checkpoints-lost"


class RelayHasRunsError(RelayError):
    """``relay delete NAME`` refused: the relay has runs (delete them, or pass ``--force``)."""

    code = "relay-has-runs"


class RunFileNotFoundError(RelayError):
    """No such file in the run's ``execution/`` folder (``relay files RUN`` lists them)."""

    code = "run-file-not-found"
    exit_code = 2


class RunFileRefusedError(RelayError):
    """A file path outside the run's ``execution/`` folder (``..``, absolute, a symlink out)."""

    code = "run-file-refused"
    exit_code = 2


class WorkspaceRefusedError(RelayError):
    """A REST request named a workspace the server does not serve (outside its root folder)."""

    code = "workspace-refused"
    exit_code = 2


class WorkspaceNotFoundError(RelayError):
    """A REST request named a workspace folder that does not exist (no relay saved there yet)."""

    code = "workspace-not-found"
    exit_code = 2
