"""Forking a run: a new run whose calls before a chosen one are copied checkpoints of its parent.

Design note: DBOS's own ``fork_workflow`` does the copying (the workflow's inputs, every step
output before ``start_step``, events and streams) with the fork's run id as its workflow id
and an explicit ``application_version`` (a NULL version would only be dequeued by the latest
version). On the per-run SQLite default the fork's database starts as a consistent copy of
the parent's (SQLite's backup API, WAL included) and the parent's own row is removed from the
copy, so the fork's child can never recover the parent. On PostgreSQL the fork lives in the
same database, moved to its own DBOS application (each run is one; DBOS copies the parent's
name), and the parent's rows stay where they are. The fork is made onto a queue nobody
serves (``relay-hold``), edited (the input, copied step outputs: DBOS has no API for that, so
its ``workflow_input`` and ``operation_outputs`` rows are rewritten with its own serializer),
and only then resumed onto the internal queue, where the fork's first attempt picks it up
exactly as a recovery would: copied calls replay from their checkpoints, the chosen call and
everything after it run fresh. The parent is held under its run lock while it is copied.
This module plans and checks a fork (nothing is written before it is known to be possible);
``runner.fork_make`` makes it atomically, and completes one whose maker was killed.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentworks.redact import Redactor
from relay_notebook.errors import InvalidInputError, RelayError, RunLockedError, codes
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.store import open_database
from relay_notebook.runner.backend import Backend, connect
from relay_notebook.runner.dbos_private import child_calls, root_calls
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.runner.run_input import check_run_input
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

if TYPE_CHECKING:
    pass

__all__ = [
    "CREATING",
    "HOLD_QUEUE",
    "ForkError",
    "ForkIncompleteError",
    "ForkPlan",
    "ForkRequest",
    "check_compatible",
    "copy_database",
    "hold_parent",
    "plan_fork",
    "root_calls_of",
]

#: the queue a fork waits on while it is edited; no process of the kit listens to it
HOLD_QUEUE: Final = "relay-hold"
#: run.json's status of a fork still being made: never run as it stands (``runner.fork_make``)
CREATING: Final = "creating"


class ForkError(RelayError):
    """A fork cannot be made as asked (the call is not in the parent, a database it needs)."""

    entry = codes.FORK_REFUSED


class ForkIncompleteError(RelayError):
    """A fork whose making was cut short and that cannot be completed from its parent."""

    entry = codes.FORK_INCOMPLETE


@dataclass
class ForkPlan:
    """What a fork copies and changes: resolved from the parent before anything is written."""

    parent: str
    call: str  # STEP#N as the user named it
    function_id: int  # the first function id that runs fresh
    copied: list[tuple[int, str]]  # (function id, step name) of the copied calls
    outputs: dict[int, Any] = field(default_factory=dict)  # edited outputs by function id
    edited: list[str] = field(default_factory=list)  # STEP#N of the edited outputs
    input_edited: bool = False

    def record(self) -> dict[str, Any]:
        """The fork's origin as run.json keeps it."""
        return {
            "parent": self.parent,
            "from": self.call,
            "function_id": self.function_id,
            "copied": [fid for fid, _ in self.copied],
            "edits": {"input": self.input_edited, "outputs": list(self.edited)},
            "edited_ids": sorted(self.outputs),
        }


def parse_call(text: str, what: str) -> tuple[str, int]:
    """``STEP`` or ``STEP#N`` (N from 1, ASCII digits) as ``(name, N)``."""
    name, _, nth = text.strip().partition("#")
    if not name or (nth and not (nth.isascii() and nth.isdigit() and 0 < int(nth) < 10**9)):
        raise InvalidInputError(
            f"{what} {text!r} is not a step call; write STEP or STEP#N (the N-th call of STEP, "
            f"from 1), e.g. price#2."
        )
    return name, int(nth) if nth else 1


def root_calls_of(db: Path | Backend, run_id: str) -> list[tuple[int, str]]:
    """The parent's root-workflow calls in order: its SQLite file, read through the record's
    one opener (which writes nothing, not even the parent's ``-shm``), or its PostgreSQL."""
    if isinstance(db, Backend):
        with connect(db) as conn:
            return root_calls(conn, run_id, pg=True)
    with open_database(db, live=False) as conn:
        return [] if conn is None else root_calls(conn, run_id, pg=False)


def _child_starter(
    db: Path | Backend, run_id: str, name: str, n: int
) -> tuple[str, list[str]] | None:
    """The call that started the child workflow in which ``name`` ran its ``n``-th time,
    counted across the run's children in order, and that child's calls (``None``: no child
    ran it)."""
    if isinstance(db, Backend):
        with connect(db) as conn:
            children = child_calls(conn, run_id, pg=True)
    else:
        with open_database(db, live=False) as conn:
            children = [] if conn is None else child_calls(conn, run_id, pg=False)
    seen = 0
    for starter, calls in children:
        seen += calls.count(name)
        if seen >= n:
            return starter, calls
    return None


def _in_child(run_id: str, what: str, name: str, child: tuple[str, list[str]]) -> ForkError:
    """Why a call of a child workflow cannot be forked from or edited, and what to do: a fork
    copies and edits calls of the run's own workflow (DBOS forks one workflow from its own
    calls). Pydantic AI's ``DBOSAgent`` runs its agent in such a child (``AGENT.run``), so its
    model requests and tool calls are the child's: its ``DBOSDurability`` capability runs them
    in the relay's workflow instead."""
    starter, calls = child
    agent, _, method = starter.partition("#")[0].rpartition(".")
    if method in ("run", "run_sync") and any(c.startswith(f"{agent}__model.") for c in calls):
        return ForkError(
            f"Cannot {what}: {name} is a call of Pydantic AI's DBOSAgent {agent!r}, which runs "
            f"its agent in a child workflow ({starter}), and a fork copies and edits calls of "
            f"the run's own workflow only. To fork from the agent's calls and edit its "
            f"answers, run it in the relay's workflow: Agent(..., capabilities=[DBOSDurability()]) "
            f"and agent.run(...) in place of DBOSAgent(agent); to run the whole agent again: "
            f"relay fork {run_id} --from {starter}"
        )
    return ForkError(
        f"Cannot {what}: {name} ran inside a child workflow (started by {starter}), and DBOS "
        f"forks a workflow from its own calls only. Fork from the call that started the "
        f"child to run it again: relay fork {run_id} --from {starter}"
    )


def _nth(calls: list[tuple[int, str]], name: str, n: int) -> int | None:
    seen = 0
    for fid, called in calls:
        if called == name:
            seen += 1
            if seen == n:
                return fid
    return None


def _describe(calls: list[tuple[int, str]]) -> str:
    counts: dict[str, int] = {}
    names = []
    for _, name in calls:
        if name.startswith("DBOS."):
            continue
        counts[name] = counts.get(name, 0) + 1
        names.append(f"{name}#{counts[name]}")
    return ", ".join(names[:20]) + (" …" if len(names) > 20 else "") if names else "none"


def plan_fork(
    workspace: Workspace,
    parent: RunFolder,
    db: Path | Backend,
    call: str,
    *,
    sets: Mapping[str, Any],
    input_edited: bool,
) -> ForkPlan:
    """Resolve ``call`` and the ``sets`` (``STEP#N`` → new output) against ``db`` (the
    parent's database, read only); refuse what cannot be forked, naming the calls there are."""
    calls = root_calls_of(db, parent.run_id)
    name, n = parse_call(call, "--from")
    start = _nth(calls, name, n)
    if start is None:
        if calls and name == calls[-1][1] and n == 1 + sum(1 for _, c in calls if c == name):
            start = calls[-1][0] + 1  # the next call of the last step: fork after everything
        elif (child := _child_starter(db, parent.run_id, name, n)) is not None:
            raise _in_child(parent.run_id, f"fork run {parent.run_id} from {call}", name, child)
        else:
            raise ForkError(
                f"Cannot fork run {parent.run_id} from {call}: the run recorded no such call "
                f"(its calls: {_describe(calls)}). Name one of them, e.g. --from "
                f"{calls[0][1] if calls else 'STEP'}#1."
            )
    copied = [(fid, c) for fid, c in calls if fid < start]
    plan = ForkPlan(parent.run_id, call, start, copied, input_edited=input_edited)
    secrets = Redactor(Vault(workspace.home).values())
    for target, value in sets.items():
        step, k = parse_call(target, "--set")
        fid = _nth(copied, step, k)
        if fid is None and _nth(calls, step, k) is None:
            child = _child_starter(db, parent.run_id, step, k)
            if child is not None:
                raise _in_child(parent.run_id, f"set the output of {target}", step, child)
        if fid is None:
            raise ForkError(
                f"Cannot set the output of {target}: only calls before {call} are copied into "
                f"the fork (copied: {_describe(copied)}); the others run fresh."
            )
        leaked = secrets.find(value)
        if leaked:
            raise InvalidInputError(
                f"The output given for {target} carries the value of vault secret {leaked}, "
                f"which DBOS would save; read the secret inside the step instead."
            )
        plan.outputs[fid] = value
        plan.edited.append(f"{step}#{k}")
    return plan


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a run's SQLite database (its WAL included), as SQLite's backup,
    read through the record's one opener (which leaves the run's own files untouched)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open_database(source, live=False) as src:
        if src is None:
            raise FileNotFoundError(source)
        with contextlib.closing(sqlite3.connect(target)) as dst:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=WAL")
            dst.commit()


def hold_parent(parent: RunFolder, backend: Backend) -> Any:
    """The parent's run lock, held while it is copied (a live parent is refused)."""
    try:
        return take_run_lock(parent, backend)
    except RunLockedError as exc:
        raise ForkError(
            f"Cannot fork run {parent.run_id} while an attempt of it runs; wait for it to end "
            f"(relay runs {parent.relay}), then fork."
        ) from exc


def check_compatible(plan: ForkPlan, source: str, relay: str) -> None:
    """Refuse a fork onto code that no longer calls a copied step: its checkpoint would meet
    another call on replay (a first version of the replay check: names, from the AST)."""
    from relay_notebook.source.flow import build_flow_graph
    from relay_notebook.source.graph import call_key

    known = {key for node in build_flow_graph(source).nodes if (key := call_key(node))}
    for fid, name in plan.copied:
        if not name.startswith("DBOS.") and name not in known:
            raise ForkError(
                f"Cannot fork run {plan.parent} onto this code of {relay}: the copied call "
                f"{name} (function {fid}) is not called by it any more, so its checkpoint "
                f"would not replay. Fork from {name} or earlier, or keep the step."
            )


@dataclass(frozen=True)
class ForkRequest:
    """``relay fork RUN --from STEP#N`` as asked from any surface (the CLI, a magic, REST): a
    new run whose calls before ``from_call`` are copied checkpoints of RUN's, with ``sets``
    (``STEP#N`` → new output) edited, ``run_input`` as its input if ``input_given``, on RUN's
    code, a ``release`` or the current ``draft``. Its values are checked once, here (the input
    by ``create_run``, as any run's)."""

    from_call: str
    run_input: Any = None
    input_given: bool = False
    sets: Mapping[str, Any] = field(default_factory=dict)
    release: str | None = None
    draft: bool = False

    def __post_init__(self) -> None:
        if self.release is not None and not self.release.strip():
            raise InvalidInputError(
                "--release '' names no release; give vN, a hash prefix or latest"
            )
        for target, value in self.sets.items():
            try:
                check_run_input(value)
            except InvalidInputError as exc:
                raise InvalidInputError(f"The output given for {target}: {exc.message}") from None
