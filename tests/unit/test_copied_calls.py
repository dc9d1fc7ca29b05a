"""A fork's replays of the calls it copied, told apart from reused ones as its attempts run."""

from __future__ import annotations

from typing import Any, cast

from relay_notebook.record.ledger_events import Event
from relay_notebook.runner.copied_calls import mark_copied


def _replays(fork: dict[str, Any] | None, events: list[tuple[str, str, str, int]]) -> list[str]:
    """What a follower of the run is told: each event as KIND STEP#N[ <- PARENT]."""
    seen: list[Event] = []
    marked = mark_copied("order-2", fork, seen.append)
    assert marked is not None
    for kind, workflow, step, n in events:
        marked(cast(Event, {"kind": kind, "workflow_id": workflow, "step": step,
                            "occurrence": n}))  # fmt: skip
    return [
        f"{e['kind']} {e['step']}#{e['occurrence']}"
        + (f" <- {c}" if (c := cast(dict[str, Any], e).get("copied_from")) else "")
        for e in seen
    ]


def test_replays_before_the_forked_call_are_copied_and_after_it_reused() -> None:
    """A recovery of a fork from price#2: fetch#1 and price#1 come from the parent; price#2
    ran in the fork's first attempt, so its replay (and any later one) is reused."""
    fork = {"parent": "order-1", "from": "price#2", "copied": [1, 2]}
    assert _replays(fork, [
        ("step_reused", "order-2", "fetch", 1),
        ("step_reused", "order-2", "price", 1),
        ("step_reused", "order-2", "price", 2),
        ("step_reused", "order-2", "ship", 1),
        ("step_start", "order-2", "notify", 1),
    ]) == [
        "step_reused fetch#1 <- order-1",
        "step_reused price#1 <- order-1",
        "step_reused price#2",
        "step_reused ship#1",
        "step_start notify#1",
    ]  # fmt: skip
    # forked from a step named without #N: its first call
    assert _replays({"parent": "order-1", "from": "price"}, [
        ("step_reused", "order-2", "fetch", 1),
        ("step_start", "order-2", "price", 1),
    ]) == ["step_reused fetch#1 <- order-1", "step_start price#1"]  # fmt: skip


def test_a_fork_whose_call_ran_in_a_child_copies_the_roots_calls_until_the_child_starts() -> None:
    """Forked from a call its child workflow made: the root's calls before the child are
    copied, the child's before that call too; the root's calls after the child are not."""
    fork = {
        "parent": "order-1", "from": "lookup#2",
        "child": {"workflow_id": "order-2-3", "starter_call": "clerk.run#1"},
    }  # fmt: skip
    assert _replays(fork, [
        ("step_reused", "order-2", "fetch", 1),
        ("step_reused", "order-2-3", "lookup", 1),
        ("step_start", "order-2-3", "lookup", 2),
        ("step_reused", "order-2", "ship", 1),
    ]) == [
        "step_reused fetch#1 <- order-1",
        "step_reused lookup#1 <- order-1",
        "step_start lookup#2",
        "step_reused ship#1",
    ]  # fmt: skip


def test_a_run_that_is_no_fork_is_followed_as_it_is() -> None:
    def follow(event: Event) -> None:
        pass

    assert mark_copied("order-1", None, follow) is follow
    # a record not as a fork writes it (edited by hand): followed as it is, never a traceback
    for call in ("price#²", "", "#2", "price#0"):
        assert mark_copied("order-2", {"parent": "order-1", "from": call}, follow) is follow
    assert mark_copied("order-1", {"parent": "order-0"}, None) is None
