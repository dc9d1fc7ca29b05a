"""A fork's copied calls as its attempts replay them: told apart from reused ones, live.

Design note: every attempt of a fork replays the calls it copied from its parent, and the
child says so as it says it of any checkpoint: a ``step_reused`` event. Afterwards the run's
history tells the two apart by DBOS's function ids (``runner.outcome``, ``history.steps``);
a live event carries no function id, but a fork copies exactly the calls made before the
call it was forked from, in the order the relay makes them. So, in each workflow the fork
copied from (its root, and the child it forked when the call ran in one), every replay
before the first event of that call is a copied call; after it, a replay is a checkpoint of
an earlier attempt of this run. In the root of a fork whose call ran in a child workflow,
the boundary is the child's first event. ``mark_copied`` hands such an event on with
``copied_from`` set to the parent run, on every attempt of the fork (its first, a recovery,
one after a message), to whatever follows the run live (the CLI's progress lines).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from relay_notebook.errors import InvalidInputError
from relay_notebook.record.ledger_events import Event

__all__ = ["mark_copied"]


def mark_copied(
    run_id: str, fork: dict[str, Any] | None, on_event: Callable[[Event], None] | None
) -> Callable[[Event], None] | None:
    """``on_event``, handed a fork's copied replays with ``copied_from``; ``on_event`` itself
    for a run that is not a fork (or nothing to call)."""
    if on_event is None or not isinstance(fork, dict) or not fork.get("parent"):
        return on_event
    # imported for a fork only: not on every run's start
    from relay_notebook.runner.fork import parse_call

    try:
        from_call = parse_call(str(fork.get("from", "")), "--from")
    except InvalidInputError:  # not what a fork records: its events are handed on as they are
        return on_event
    parent = str(fork["parent"])
    child = fork.get("child")
    child_workflow = child.get("workflow_id") if isinstance(child, dict) else None
    # the workflow the call was forked from runs fresh from that call; the root of a fork
    # whose call ran in a child, from the child's start
    copying = {run_id} if child_workflow is None else {run_id, str(child_workflow)}
    from_workflow = run_id if child_workflow is None else str(child_workflow)

    def marked(event: Event) -> None:
        workflow = event.get("workflow_id")
        if workflow in copying:
            if workflow == child_workflow:
                copying.discard(run_id)
            if workflow == from_workflow and (event.get("step"), event.get("occurrence")) == (
                from_call
            ):
                copying.discard(workflow)
            elif event.get("kind") == "step_reused":
                on_event(cast(Event, {**event, "copied_from": parent}))
                return
        on_event(event)

    return marked
