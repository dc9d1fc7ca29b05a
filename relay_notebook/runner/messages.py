"""Answering a waiting run: a message delivered durably with DBOS, then the run resumed.

Design note: messages go through DBOS's own client (``DBOSClient.send``) on the run's store
— its SQLite file or the workspace's PostgreSQL database, as the run's DBOS application — so
the kit never writes DBOS's tables itself. DBOS stores a message with an idempotency key
under one id per recipient (``KEY::WORKFLOW``) and ignores a second insert, so a duplicate
delivery (a retried request, two clicks) is delivered once; the kit reads that id first to
tell the sender it was a duplicate. After delivering, the run resumes if it waits (see
``runs.resume_waiting``: under the run lock, so two senders never start two attempts). A run
that is running receives the message in its live attempt; one that left while the message
came is resumed by its supervisor (``RunHandle.continue_with``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentworks.redact import Redactor
from relay_notebook.errors import (
    DiskFullError,
    InvalidInputError,
    RunDatabaseError,
    RunNotWaitingError,
    RunRecordDamagedError,
)
from relay_notebook.errors.storage import is_disk_full
from relay_notebook.record.backend import database_error, error_text
from relay_notebook.record.checkpoints import read_workflow_status
from relay_notebook.record.folders import RunFolder, find_run
from relay_notebook.record.messages import delivered_message
from relay_notebook.record.run_record import RunRecord
from relay_notebook.record.store import give_side_files, replaced_database
from relay_notebook.runner.backend import (
    Backend,
    app_name_for_run,
    backend_for_run,
    workspace_backend,
)
from relay_notebook.runner.run_input import check_json_value
from relay_notebook.runner.runs import resume_waiting
from relay_notebook.runner.supervisor import EventCallback, RunHandle
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

__all__ = ["MAX_MESSAGE_BYTES", "Delivery", "send_message"]

#: the largest message, as compact UTF-8 JSON (DBOS keeps every message in its store)
MAX_MESSAGE_BYTES = 256 * 1024
#: statuses of runs whose workflow cannot read a message any more, or never existed
_CLOSED = {"succeeded", "failed", "rejected", "creating", "pending", "queued"}


@dataclass
class Delivery:
    """One message sent to a run: whether it was new, and the attempt it resumed, if any."""

    run_id: str
    topic: str
    key: str
    duplicate: bool
    #: the run's status once the message was delivered (``waiting``, ``running``...)
    status: str
    handle: RunHandle | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "topic": self.topic,
            "idempotency_key": self.key,
            "duplicate": self.duplicate,
            "status": self.status,
            "resumed": self.handle is not None,
            "attempt": self.handle.attempt if self.handle is not None else None,
        }


def _check_message(workspace: Workspace, run_id: str, message: Any) -> None:
    check_json_value(
        message, what=f"The message to run {run_id}", name="the message",
        limit=MAX_MESSAGE_BYTES, large="Send a reference to a file instead.",
    )  # fmt: skip
    leaked = Redactor(Vault(workspace.home).values()).find(message)
    if leaked:
        raise InvalidInputError(
            f"The message to run {run_id} carries the value of vault secret {leaked}, which "
            f"DBOS would save; send the secret's name and read it with vault({leaked!r})."
        )


def _refuse_closed(record: RunRecord) -> None:
    if not record.durable:
        raise RunNotWaitingError(
            f"Run {record.run_id} cannot receive messages: relay {record.relay} runs with "
            f"relay_durability: none, so it has no DBOS workflow."
        )
    if record.status in _CLOSED:
        if record.status in ("creating", "pending", "queued"):
            why = "has not started yet, so its workflow does not exist"
        else:
            why = f"{record.status}; nothing will read a message any more"
        raise RunNotWaitingError(
            f"Run {record.run_id} {why}. Nothing was delivered. Start a new run with: "
            f"relay run {record.relay}"
        )


def _deliver(folder: RunFolder, backend: Backend, topic: str, message: Any, key: str) -> None:
    from dbos import DBOSClient

    if backend.is_postgres:
        client = DBOSClient(
            system_database_url=backend.url, application_name=app_name_for_run(folder.run_id)
        )
    else:
        refused = replaced_database(folder.database)  # a link: root would write its target
        if refused is not None:
            raise RunRecordDamagedError(refused)
        give_side_files(folder.database)  # an attempt may be starting on it (record.store)
        client = DBOSClient(system_database_url=f"sqlite:///{folder.database.resolve()}")
    try:
        client.send(folder.run_id, message, topic, idempotency_key=key)
    except Exception as exc:
        if database_error(exc) is None:
            raise
        if is_disk_full(exc):
            raise DiskFullError(
                f"The disk holding {folder.path} is full: the message to run {folder.run_id} "
                f"could not be stored. Nothing was delivered; the run still waits. Free space "
                f"there (df -h {folder.path}), then send again."
            ) from exc
        raise RunDatabaseError(
            f"Cannot deliver the message to run {folder.run_id}: its database refused it "
            f"({type(database_error(exc)).__name__}: {' '.join(error_text(exc).split())}). "
            f"Nothing was delivered; the run still waits. Free space or restore its database "
            f"from a copy, then send again."
        ) from exc
    finally:
        client.destroy()


@contextlib.contextmanager
def _delivering(folder: RunFolder) -> Iterator[None]:
    """Hold the run's delivery lock: ``flock`` on its folder, so no lock file is left."""
    fd = os.open(folder.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def send_message(
    workspace: Workspace,
    run_id: str,
    topic: str,
    message: Any,
    *,
    idempotency_key: str | None = None,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
    resume: bool = True,
) -> Delivery:
    """Deliver ``message`` on ``topic`` to ``run_id`` and resume the run if it waits.

    A message to a finished run is refused (``run-not-waiting``), nothing delivered. The same
    ``idempotency_key`` twice delivers once (the second comes back ``duplicate``).
    ``resume=False`` only delivers (a worker or ``relay wake`` resumes it later).
    """
    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    run_backend = backend_for_run(record, workspace_backend(workspace, backend))
    key = idempotency_key or uuid.uuid4().hex
    # one sender at a time checks and delivers: of two sends with one key, the second is
    # told it was a duplicate (DBOS stores the message once either way)
    with _delivering(folder):
        if idempotency_key is not None and delivered_message(folder, record, run_backend, key):
            # a retried delivery: the answer it got the first time, even if the run finished
            return Delivery(run_id, topic, key, True, RunRecord.load(folder).status, None)
        _refuse_closed(record)
        _check_message(workspace, run_id, message)
        if read_workflow_status(folder, run_backend) is None:
            raise RunNotWaitingError(
                f"Run {run_id} has no DBOS workflow to receive the message: its attempt "
                f"stopped before DBOS started it. Nothing was delivered. Recover it first with: "
                f"relay recover {run_id}"
            )
        _deliver(folder, run_backend, topic, message, key)
    handle = None
    if resume:
        handle = resume_waiting(workspace, run_id, on_event=on_event, backend=run_backend)
    status = "running" if handle is not None else RunRecord.load(folder).status
    return Delivery(run_id, topic, key, False, status, handle)
