"""Waiting runs for every surface: ``send`` a message to a run, ``wake`` the runs that are due.

The mechanism lives in ``runner.messages`` (delivery with DBOS's client, then the resume) and
``runner.wake`` (finding due runs); this module turns what a user types into their arguments
and renders the results; the parsers are ``cli.parser``'s, the CLI's handlers
``cli.run_handlers``'.
"""

from __future__ import annotations

import time

from relay_notebook.commands.due import wake_in_background
from relay_notebook.record.folders import find_run
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner import RunHandle, RunOutcome
from relay_notebook.runner.backend import Backend
from relay_notebook.runner.messages import Delivery, send_message
from relay_notebook.runner.runs import resume_waiting
from relay_notebook.runner.supervisor import EventCallback
from relay_notebook.runner.wake import Waker, wake_due
from relay_notebook.views.wording import Surface
from relay_notebook.workspace import Workspace

__all__ = [
    "Delivery",
    "Waker",
    "delivery_line",
    "send",
    "wait_for_run",
    "wake",
    "wake_in_background",
]


#: ``relay send RUN TOPIC JSON``: deliver the message durably, resume the run if it waits
send = send_message


def wake(
    workspace: Workspace, *, backend: Backend | None = None, on_event: EventCallback | None = None
) -> list[RunHandle]:
    """Resume every waiting run of the workspace whose timer is due or whose message came."""
    return wake_due(workspace, backend=backend, on_event=on_event)


#: statuses a run stays in only for a while: ``wait`` goes on through them
_GOING = frozenset({"pending", "queued", "running", "waiting"})


def wait_for_run(
    workspace: Workspace,
    run_id: str,
    *,
    timeout: float | None = None,
    backend: Backend | None = None,
    on_event: EventCallback | None = None,
) -> RunOutcome:
    """Block until ``run_id`` finishes or stops, through its waits; resume it when due.

    Whoever resumes the run (this call when its timer is due, a message's sender, the kernel's
    waker, a worker), the run lock lets one attempt run; ``TimeoutError`` after ``timeout``.
    """
    folder = find_run(workspace, run_id)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        record = RunRecord.load(folder)
        if record.status not in _GOING:
            result = folder.read_result() if record.status == "succeeded" else None
            return RunOutcome(
                run_id, record.relay, record.status, len(record.attempts), result, record.error
            )
        if record.waiting is not None:
            handle = resume_waiting(workspace, run_id, backend=backend, on_event=on_event)
            if handle is not None:
                handle.wait()
                continue
        if deadline is not None and time.monotonic() > deadline:
            what = record.waiting.describe() if record.waiting is not None else "its attempt"
            raise TimeoutError(f"run {run_id} is still {record.status} (for {what})")
        time.sleep(0.1)


def delivery_line(delivery: Delivery, surface: Surface = "terminal") -> str:
    """One line saying what the message did."""
    what = f"message on topic {delivery.topic!r} to run {delivery.run_id}"
    if delivery.duplicate:
        head = f"{what} was delivered before (same idempotency key): not delivered again"
    else:
        head = f"{what} delivered"
    if delivery.handle is not None:
        return f"{head}; the run resumes (attempt {delivery.handle.attempt})"
    if delivery.status in ("succeeded", "failed"):
        return f"{head}; the run has {delivery.status}"
    if delivery.duplicate:
        return f"{head}; the run is {delivery.status}"
    if delivery.status == "running":
        return f"{head}; the run's live attempt receives it"
    if delivery.status == "waiting":
        return f"{head}; the run still waits (for another topic, or it is resuming elsewhere)"
    recover = "%relay recover" if surface == "notebook" else "relay recover"
    return (
        f"{head}; the run is {delivery.status}: it reads it once recovered "
        f"({recover} {delivery.run_id})"
    )
