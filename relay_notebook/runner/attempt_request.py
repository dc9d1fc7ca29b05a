"""The attempt request: one attempt as its command asks for it, built once from the run record.

Design note: a command that starts an attempt (``run``, ``recover``, a resume, a worker's
advance, a fork's first attempt) reads ``run.json`` once and builds this frozen request from it,
the workspace and the caller's choices; the request then travels unchanged through
``runner.runs``, ``supervisor.launch_attempt``, the sandbox plan and the handle that settles
the attempt, where the same dozen keyword arguments used to be spelled out in each signature.
It holds only what stays true for the run's life (its code, version, input and context) and the
command's own choices: what the record says of the attempts may change before the run lock is
taken (a recovery that raced, lost attempts settled), so the record read under the lock travels
beside it (see ``launch_attempt``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from relay_notebook.record.bindings import current_code
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import Backend
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.leak_check import attempt_secrets
from relay_notebook.runner.spec import AttemptContext
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import VAULT_DIR, Vault

if TYPE_CHECKING:
    from relay_notebook.runner.handle import EventCallback

__all__ = ["AttemptCaller", "AttemptChoices", "AttemptRequest"]


class AttemptCaller(TypedDict, total=False):
    """Who asks for an attempt: where its events go, the executor it runs as, and whether it
    dies with its supervisor (each has ``AttemptRequest``'s default)."""

    on_event: EventCallback | None
    executor_id: str
    lifeline: bool


class AttemptChoices(AttemptCaller, total=False):
    """What the caller of a command chooses about its attempt (each has a default)."""

    crash: CrashSpec | None
    accept_lost: bool
    resume: bool


@dataclass(frozen=True)
class AttemptRequest:
    """One attempt of one run, as its command asks for it (see the module's design note)."""

    folder: RunFolder
    code_dir: Path
    app_version: str
    run_input: Any
    #: what the run's record gives the child's runtime
    context: AttemptContext
    #: the run's database (a PostgreSQL one with its password)
    backend: Backend
    #: folders the child must not see: the workspace's secrets
    hidden: tuple[Path, ...] = ()
    #: every value the attempt could read through ``vault()`` (see ``runner.leak_check``)
    secrets: Mapping[str, str] = field(default_factory=dict)
    confine: bool = True
    warm_start: bool = True
    crash: CrashSpec | None = None
    on_event: EventCallback | None = None
    executor_id: str = "relay-local"
    #: the child exits when the supervisor is gone (a worker's attempts)
    lifeline: bool = False
    #: lost checkpoints do not refuse the attempt: their steps run again
    accept_lost: bool = False
    #: only a waiting run whose wait is answered goes
    resume: bool = False

    @classmethod
    def of_run(
        cls,
        workspace: Workspace,
        folder: RunFolder,
        record: RunRecord,
        backend: Backend,
        **choices: Unpack[AttemptChoices],
    ) -> AttemptRequest:
        """The request for the next attempt of the run ``record`` describes, in ``backend``."""
        code_dir = Path(record.code_dir)
        return cls(
            folder=folder,
            code_dir=code_dir,
            app_version=record.app_version,
            run_input=record.input,
            context=_context(workspace, record),
            backend=backend,
            hidden=(workspace.home / VAULT_DIR,),
            # the environment's too: vault() falls back to it (see runner.leak_check)
            secrets=attempt_secrets(code_dir, Vault(workspace.home).values(), os.environ),
            confine=workspace.confine,
            warm_start=workspace.warm_start,
            **choices,
        )

    @property
    def run_id(self) -> str:
        return self.folder.run_id


def _context(workspace: Workspace, record: RunRecord) -> AttemptContext:
    """What the child needs besides the spec basics: for agentworks' Runtime."""
    if record.has_default_model:
        model = record.default_model
    else:  # a run recorded before the model was kept in run.json
        model = current_code(workspace, record).default_model
    return AttemptContext(
        workspace=workspace.home,
        variables=record.variables,
        default_model=model,
        release=record.release,
        durable=record.durable,
        wait_grace_s=workspace.wait_grace_s,
    )
