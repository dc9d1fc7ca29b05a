"""Starting and recovering runs: the supervisor's entry points used by the CLI and magics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentworks.journal import Journal
from agentworks.redact import Redactor
from relay_notebook.errors import (
    AccessRevokedError,
    AttemptBudgetError,
    BindingChangedError,
    DeadlinePassedError,
    InvalidInputError,
    NotDurableError,
    ReleaseTamperedError,
    RunRejectedError,
)
from relay_notebook.runner.backend import (
    Backend,
    backend_for_run,
    prepare_database,
    workspace_backend,
)
from relay_notebook.runner.bindings import changed_bindings, compute_bindings
from relay_notebook.runner.checkpoints import guard_checkpoints
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.folders import RunFolder, allocate_run, find_run
from relay_notebook.runner.ledger import now_ms
from relay_notebook.runner.outcome import RunOutcome, settle_lost_attempts
from relay_notebook.runner.pool import ensure_dbos_schema
from relay_notebook.runner.run_input import check_run_input
from relay_notebook.runner.supervisor import EventCallback, RunHandle, launch_attempt, record_event
from relay_notebook.workspace import (
    Draft,
    Workspace,
    content_hash,
    load_manifest,
    resolve_release,
    verify_release,
)
from relay_notebook.workspace.access import AccessPolicy
from relay_notebook.workspace.vault import VAULT_DIR, Vault

__all__ = [
    "DEFAULT_DEADLINE_S",
    "MAX_ATTEMPTS",
    "advance_run",
    "create_run",
    "record_refusal",
    "start_recovery",
    "start_run",
]

MAX_ATTEMPTS = 3

DEFAULT_DEADLINE_S = 3600.0
_TERMINAL = {"succeeded", "failed"}


@dataclass(frozen=True)
class _Code:
    folder: Path
    source_hash: str
    variables: dict[str, str]
    release: dict[str, Any] | None
    default_model: str | None = None
    durable: bool = True


def _draft_code(draft: Draft) -> _Code:
    payload = [(rel, (draft.folder / rel).read_bytes()) for rel in draft.files()]
    manifest = draft.manifest
    return _Code(
        draft.folder,
        content_hash(payload),
        dict(manifest.variables),
        None,
        manifest.model,
        manifest.relay_durability == "dbos",
    )


def _release_code(workspace: Workspace, relay: str, ref: str) -> _Code:
    release = resolve_release(workspace, relay, ref)
    report = verify_release(release)
    if not report.ok:
        raise ReleaseTamperedError(
            f"Release {release.ref} of {relay} no longer matches its checksum "
            f"({'; '.join(report.problems)}); it will not run. Publish again with: "
            f"relay publish {relay}"
        )
    manifest = load_manifest(release.folder / "relay.yaml")
    return _Code(
        release.folder,
        release.hash,
        dict(manifest.variables),
        {"version": release.version, "hash": release.hash},
        manifest.model,
        manifest.relay_durability == "dbos",
    )


def _hidden(workspace: Workspace) -> tuple[Path, ...]:
    """Folders the child must not see: the workspace's secrets."""
    return (workspace.home / VAULT_DIR,)


def _context_from_meta(workspace: Workspace, meta: dict[str, Any]) -> dict[str, Any]:
    """What the child needs besides the spec basics: for agentworks' Runtime."""
    if "default_model" in meta:
        model = meta["default_model"]
    else:  # a run recorded before the model was kept in run.json
        model = _current_code(workspace, meta).default_model
    return {
        "workspace": str(workspace.home),
        "variables": meta.get("variables") or {},
        "default_model": model,
        "release": meta.get("release"),
        "durable": meta.get("durable", True),
    }


def _refuse_vault_values(workspace: Workspace, relay: str, run_input: Any) -> None:
    """A run input must not carry a vault value: run.json, the spec and DBOS would keep it."""
    leaked = Redactor(Vault(workspace.home).values()).find(run_input)
    if leaked:
        raise InvalidInputError(
            f"The input of a run of {relay} carries the value of vault secret {leaked}, which "
            f"the run would save; pass the name instead and read the value in the relay with "
            f"vault({leaked!r})."
        )


def create_run(
    workspace: Workspace,
    draft: Draft,
    *,
    run_input: Any = None,
    release: str | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
    queued: bool = False,
) -> RunFolder:
    """Allocate a new run of ``draft`` (or of its ``release``) and record it; start nothing.

    ``run_input`` is the JSON value passed as ``INPUT``; ``None`` means an empty object. The run
    keeps its database (``backend``, default: the workspace's ``database_url``) for all its
    attempts.
    """
    run_input = {} if run_input is None else run_input
    check_run_input(run_input)
    _refuse_vault_values(workspace, draft.name, run_input)
    code = _draft_code(draft) if release is None else _release_code(workspace, draft.name, release)
    if not AccessPolicy(workspace.home).is_granted(draft.name):
        raise AccessRevokedError(
            f"Relay {draft.name} cannot run: its access is revoked. Restore it with: "
            f"relay grant {draft.name}"
        )
    backend = workspace_backend(workspace, backend)
    if backend.is_postgres:
        prepare_database(backend, workspace.home)
        ensure_dbos_schema(backend)
    folder = allocate_run(workspace, draft.name)
    created = now_ms()
    meta: dict[str, Any] = {
        "run_id": folder.run_id,
        "relay": draft.name,
        "workflow_id": folder.run_id,
        "release": code.release,
        "code_dir": str(code.folder),
        "app_version": code.source_hash,
        "input": run_input,
        "variables": code.variables,
        "default_model": code.default_model,
        "bindings": compute_bindings(
            input=run_input, variables=code.variables, source_hash=code.source_hash
        ),
        "created_at": created,
        "deadline_ms": created + deadline_s * 1000,
        "max_attempts": MAX_ATTEMPTS,
        "durable": code.durable,
        "status": "queued" if queued else "pending",
        "attempts": [],
    }
    if backend.is_postgres:
        meta["database"] = backend.record()
    folder.write_meta(meta)
    return folder


def start_run(
    workspace: Workspace,
    draft: Draft,
    *,
    run_input: Any = None,
    release: str | None = None,
    crash: CrashSpec | None = None,
    on_event: EventCallback | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
) -> RunHandle:
    """Start attempt 1 of a new run of ``draft`` (or of its ``release``); returns at once.

    ``run_input`` is the JSON value passed as ``INPUT``; ``None`` means an empty object.
    """
    backend = workspace_backend(workspace, backend)
    folder = create_run(
        workspace, draft, run_input=run_input, release=release, deadline_s=deadline_s,
        backend=backend,
    )  # fmt: skip
    meta = folder.read_meta()
    return _launch(workspace, folder, meta, 1, crash=crash, on_event=on_event, backend=backend)


def draft_hash(draft: Draft) -> str:
    """The content hash a run of ``draft`` is bound to (its DBOS application version)."""
    return _draft_code(draft).source_hash


def launch_first_attempt(
    workspace: Workspace,
    folder: RunFolder,
    *,
    crash: CrashSpec | None = None,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
) -> RunHandle:
    """Attempt 1 of a run already created (a fork, whose workflow waits in its database)."""
    meta = folder.read_meta()
    backend = backend_for_run(meta, workspace_backend(workspace, backend))
    return _launch(workspace, folder, meta, 1, crash=crash, on_event=on_event, backend=backend)


def _launch(
    workspace: Workspace,
    folder: RunFolder,
    meta: dict[str, Any],
    attempt: int,
    *,
    crash: CrashSpec | None,
    on_event: EventCallback | None,
    backend: Backend,
    preflight: bool = False,
    executor_id: str = "relay-local",
    lifeline: bool = False,
    accept_lost: bool = False,
) -> RunHandle:
    try:
        return _launch_attempt(
            workspace, folder, meta, attempt, crash=crash, on_event=on_event, backend=backend,
            preflight=preflight, executor_id=executor_id, lifeline=lifeline,
            accept_lost=accept_lost,
        )  # fmt: skip
    except _AlreadyFinished:
        finished = _finished(folder, folder.read_meta())
        return RunHandle(folder, finished.attempt, process=None, on_event=None, finished=finished)


def _launch_attempt(
    workspace: Workspace,
    folder: RunFolder,
    meta: dict[str, Any],
    attempt: int,
    *,
    crash: CrashSpec | None,
    on_event: EventCallback | None,
    backend: Backend,
    preflight: bool,
    executor_id: str,
    lifeline: bool,
    accept_lost: bool = False,
) -> RunHandle:
    def checks() -> None:
        _preflight(workspace, folder, backend, accept_lost=accept_lost)

    return launch_attempt(
        folder,
        attempt=None if preflight else attempt,
        code_dir=Path(meta["code_dir"]),
        app_version=meta["app_version"],
        run_input=meta["input"],
        crash=crash,
        deadline_ms=meta["deadline_ms"],
        on_event=on_event,
        preflight=checks if preflight else None,
        hidden=_hidden(workspace),
        secrets=Vault(workspace.home).values(),
        context=_context_from_meta(workspace, meta),
        backend=backend,
        executor_id=executor_id,
        lifeline=lifeline,
        confine=workspace.confine,
        warm_start=workspace.warm_start,
    )


def _finished(folder: RunFolder, meta: dict[str, Any]) -> RunOutcome:
    attempts = meta.get("attempts", [])
    result = None
    if meta["status"] == "succeeded":
        result = folder.read_result()
    return RunOutcome(
        folder.run_id, folder.relay, meta["status"], len(attempts), result, meta.get("error")
    )


def _current_code(workspace: Workspace, meta: dict[str, Any]) -> _Code:
    if meta.get("release"):
        return _release_code(workspace, meta["relay"], str(meta["release"]["version"]))
    return _draft_code(workspace.load_draft(meta["relay"]))


class _AlreadyFinished(Exception):
    """The attempt a vanished supervisor left behind had finished the run after all."""


def _preflight(
    workspace: Workspace, folder: RunFolder, backend: Backend, *, accept_lost: bool = False
) -> None:
    settle_lost_attempts(folder, backend)  # under the run lock: nobody else can be running them
    meta = folder.read_meta()
    if meta.get("status") in _TERMINAL:
        raise _AlreadyFinished
    attempts = len(meta.get("attempts", []))
    verb = "recover" if attempts else "start"
    if attempts >= meta.get("max_attempts", MAX_ATTEMPTS):
        raise AttemptBudgetError(
            f"Cannot recover run {folder.run_id}: it has used all {attempts} of its process "
            f"attempts. Start a new run with: relay run {folder.relay}"
        )
    if now_ms() > meta["deadline_ms"]:
        raise DeadlinePassedError(
            f"Cannot {verb} run {folder.run_id}: its deadline passed (a run keeps its first "
            f"attempt's deadline). Start a new run with: relay run {folder.relay}"
        )
    code = _current_code(workspace, meta)
    now = compute_bindings(
        input=meta["input"], variables=code.variables, source_hash=code.source_hash
    )
    changes = changed_bindings(meta["bindings"], now)
    if changes:
        record_event(folder, attempts, "recovery_rejected", changed=changes)
        origin = f"release v{meta['release']['version']}" if meta.get("release") else "the draft"
        raise BindingChangedError(
            f"Cannot {verb} run {folder.run_id}: {'; '.join(changes)} changed since the run "
            f"started from {origin}. Restore it, or start a new run with: relay run "
            f"{folder.relay}"
        )
    if attempts:
        guard_checkpoints(folder, meta, backend, accept=accept_lost)


def _held(folder: RunFolder, meta: dict[str, Any], status: str, error: dict[str, Any]) -> RunHandle:
    """A recovery that does not start: reported with ``status``; no attempt is used."""
    attempts = len(meta.get("attempts", []))
    record_event(folder, attempts, "recovery_held", status=status, error=error)
    outcome = RunOutcome(folder.run_id, folder.relay, status, attempts, None, error)
    return RunHandle(folder, attempts, process=None, on_event=None, finished=outcome)


def start_recovery(
    workspace: Workspace,
    run_id: str,
    *,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
    executor_id: str = "relay-local",
    lifeline: bool = False,
    accept_lost_checkpoints: bool = False,
) -> RunHandle:
    """Start the next attempt of ``run_id``; a finished run comes back as it was, unrun.

    A revoked relay comes back ``denied`` and a run with an unreconciled uncertain call comes
    back ``needs_reconciliation``, both without using an attempt. The run continues in the
    database it started with (``backend`` only supplies that database's password). Checkpoints
    the run's records name but its database lacks refuse the attempt (``checkpoints-lost``)
    unless ``accept_lost_checkpoints``: then their steps run again.
    """
    folder = find_run(workspace, run_id)
    return _next_attempt(
        workspace, folder, folder.read_meta(), crash=None, on_event=on_event, backend=backend,
        executor_id=executor_id, lifeline=lifeline, accept_lost=accept_lost_checkpoints,
    )  # fmt: skip


def _next_attempt(
    workspace: Workspace,
    folder: RunFolder,
    meta: dict[str, Any],
    *,
    crash: CrashSpec | None,
    on_event: EventCallback | None,
    backend: Backend | None,
    executor_id: str,
    lifeline: bool,
    accept_lost: bool = False,
) -> RunHandle:
    """The checks before any attempt after ``create_run``, then the attempt (see the callers)."""
    run_id = folder.run_id
    if meta.get("status") in _TERMINAL:
        finished = _finished(folder, meta)
        return RunHandle(folder, finished.attempt, process=None, on_event=None, finished=finished)
    first = not meta.get("attempts")
    if not AccessPolicy(workspace.home).is_granted(folder.relay):
        what = f"Run {run_id} was denied" if first else f"Recovery of run {run_id} was denied"
        then = f"then 'relay recover {run_id}'" if first else "then recover again"
        return _held(
            folder,
            meta,
            "denied",
            {
                "code": "access-revoked",
                "message": f"{what}: relay {folder.relay}'s access is revoked. Restore it with "
                f"'relay grant {folder.relay}', {then}.",
            },
        )
    if not first:
        pending = Journal(folder.ipc / "journal.jsonl").blocking()
        if pending:
            calls = "; ".join(f"{p.describe()} (key {p.key})" for p in pending)
            return _held(
                folder,
                meta,
                "needs_reconciliation",
                {
                    "code": "needs-reconciliation",
                    "message": f"Run {run_id} waits for reconciliation of an uncertain call: "
                    f"{calls}. Find out whether it took effect, then run 'relay reconcile "
                    f"{run_id} --result JSON' or 'relay reconcile {run_id} --retry', and "
                    f"recover again.",
                },
            )
        if not meta.get("durable", True):
            raise NotDurableError(
                f"Cannot recover run {run_id}: relay {folder.relay} runs with relay_durability: "
                f"none, so nothing was checkpointed. Start a new run with: relay run "
                f"{folder.relay}"
            )
    return _launch(
        workspace,
        folder,
        meta,
        len(meta.get("attempts", [])) + 1,
        crash=crash if first else None,
        on_event=on_event,
        backend=backend_for_run(meta, workspace_backend(workspace, backend)),
        preflight=True,
        executor_id=executor_id,
        lifeline=lifeline,
        accept_lost=accept_lost,
    )


def record_refusal(workspace: Workspace, run_id: str, exc: RunRejectedError) -> None:
    """A queued run the pool refused before its first attempt ends ``rejected`` in run.json
    (a refused recovery leaves the run as it was: it can be recovered once the cause is gone)."""
    folder = find_run(workspace, run_id)
    meta = folder.read_meta()
    if meta.get("status") == "queued" and not meta.get("attempts"):
        meta["status"], meta["error"] = "rejected", {"code": exc.code, "message": exc.message}
        folder.write_meta(meta)


def advance_run(
    workspace: Workspace,
    run_id: str,
    *,
    crash: CrashSpec | None = None,
    backend: Backend | None = None,
    executor_id: str = "relay-local",
    lifeline: bool = False,
    on_event: EventCallback | None = None,
) -> RunHandle:
    """The next attempt of a run created by ``create_run``: its first, or a recovery.

    Workers call this for queued runs. A first attempt waits in a queue, so it is checked
    like a recovery (bindings, budget, deadline, access); ``crash`` applies to it only.
    """
    folder = find_run(workspace, run_id)
    return _next_attempt(
        workspace, folder, folder.read_meta(), crash=crash, on_event=on_event, backend=backend,
        executor_id=executor_id, lifeline=lifeline,
    )  # fmt: skip
