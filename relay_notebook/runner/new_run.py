"""A new run's folder and its first record: the one place a run (or a fork) comes into being.

Below ``runner.runs`` (which starts and recovers runs) and ``runner.fork_make`` (which makes a
fork): both record their new run here, so neither imports the other to do it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

from agentworks.redact import Redactor
from relay_notebook.errors import AccessRevokedError, InvalidInputError
from relay_notebook.record.bindings import RunCode, compute_bindings, draft_code, release_code
from relay_notebook.record.folders import RunFolder, allocate_run
from relay_notebook.record.ledger import now_ms
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import Backend, prepare_database
from relay_notebook.runner.disk_full import reserve_space
from relay_notebook.runner.pool import ensure_dbos_schema
from relay_notebook.runner.run_input import check_run_input
from relay_notebook.runner.sandbox_plan import refuse_unreachable_database
from relay_notebook.workspace import Draft, Workspace
from relay_notebook.workspace.access import AccessPolicy
from relay_notebook.workspace.file_io import require_free_space
from relay_notebook.workspace.relay_lock import hold_relay
from relay_notebook.workspace.vault import Vault

__all__ = ["DEFAULT_DEADLINE_S", "record_new_run"]

DEFAULT_DEADLINE_S = 3600.0


def _refuse_vault_values(workspace: Workspace, relay: str, run_input: Any) -> None:
    """A run input must not carry a vault value: run.json, the spec and DBOS would keep it."""
    leaked = Redactor(Vault(workspace.home).values()).find(run_input)
    if leaked:
        raise InvalidInputError(
            f"The input of a run of {relay} carries the value of vault secret {leaked}, which "
            f"the run would save; pass the name instead and read the value in the relay with "
            f"vault({leaked!r})."
        )


def record_new_run(
    workspace: Workspace,
    draft: Draft,
    *,
    run_input: Any,
    release: str | None,
    backend: Backend,
    deadline_s: float = DEFAULT_DEADLINE_S,
    queued: bool = False,
    shape: Callable[[RunRecord], None] | None = None,
) -> tuple[RunFolder, RunRecord]:
    """``create_run``'s folder and the record it wrote (so its first attempt, or a fork that
    edits it, need not read run.json back); ``shape`` changes the record before its first save
    (a fork is recorded ``creating`` from the start: see ``runner.fork``)."""
    run_input = {} if run_input is None else run_input
    check_run_input(run_input)
    _refuse_vault_values(workspace, draft.name, run_input)
    code = draft_code(draft) if release is None else release_code(workspace, draft.name, release)
    if not AccessPolicy(workspace.home).is_granted(draft.name):
        raise AccessRevokedError(
            f"Relay {draft.name} cannot run: its access is revoked. Restore it with: "
            f"relay grant {draft.name}"
        )
    if workspace.confine:
        refuse_unreachable_database(draft.name, code.folder, backend)
    if backend.is_postgres:
        prepare_database(backend, workspace.home)
        ensure_dbos_schema(backend)
    require_free_space(workspace.home, f"a new run of {draft.name}")
    # under the relay's lock: a relay deleted meanwhile gets no run folder (relay_lock)
    with hold_relay(workspace, draft.name, exclusive=False):
        folder = allocate_run(workspace, draft.name)
        try:
            if not queued:  # room to record it interrupted if the disk fills before it starts
                reserve_space(folder.ipc)
            record = _first_record(
                folder, draft, code, run_input, backend, deadline_s, queued, shape
            )
        except BaseException:  # a full disk: no run folder is left without its run.json
            shutil.rmtree(folder.path, ignore_errors=True)
            raise
    return folder, record


def _first_record(
    folder: RunFolder,
    draft: Draft,
    code: RunCode,
    run_input: Any,
    backend: Backend,
    deadline_s: float,
    queued: bool,
    shape: Callable[[RunRecord], None] | None = None,
) -> RunRecord:
    """The new run's record, saved to its run.json (the run's own code kept first)."""
    if code.release is None:  # a release keeps its files; a draft may change after the start
        folder.keep_code(code.entry)
    created = now_ms()
    record = RunRecord(
        run_id=folder.run_id,
        relay=draft.name,
        workflow_id=folder.run_id,
        release=code.release,
        code_dir=str(code.folder),
        app_version=code.source_hash,
        input=run_input,
        variables=code.variables,
        default_model=code.default_model,
        bindings=compute_bindings(
            input=run_input, variables=code.variables, source_hash=code.source_hash
        ),
        created_at=created,
        deadline_ms=created + deadline_s * 1000,
        durable=code.durable,
        status="queued" if queued else "pending",
        attempts=[],
        database=backend.record() if backend.is_postgres else None,
    )
    if shape is not None:
        shape(record)
    record.save(folder)
    return record
