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

A call that ran in a child workflow (a Pydantic AI ``DBOSAgent`` runs its agent in one:
``clerk.run``) is forked from by forking that child too, DBOS's way. DBOS records a child
started by a direct call as the parent's step at the child's function id ``F`` (named after the
child workflow, ``child_workflow_id`` set), and the implicit ``DBOS.getResult`` at ``F + 1``
(the child's output). Replaying the parent, ``workflow_wrapper`` (``_core.py``) finds the row
at ``F`` with a ``child_workflow_id`` and awaits *that* workflow's result instead of starting
one; it never reads the ``getResult`` row back (its write is ``on_conflict_do_nothing``), so a
copied one would keep the parent's child's output in the fork's history. So the child is
forked from the chosen call (its own function id) under the id DBOS would give it
(``FORK-F``), its copied outputs edited as the run's are, and the run's workflow is forked from
``F + 1`` with ``replacement_children={parent's child: fork's child}``: row ``F`` is copied
pointing at the fork's child, the ``getResult`` and everything after run fresh. DBOS's fork
makes a root workflow, so the fork's child is given its parent (``parent_workflow_id``), which
makes it the fork's child for DBOS (deleting the fork deletes it) and for the kit (not a
workflow made outside it). Only one level: a call of a child's child is refused, naming the
call that runs the child again.

This module plans and checks a fork (nothing is written before it is known to be possible);
``runner.fork_make`` makes it atomically, and completes one whose maker was killed.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agentworks.redact import Redactor
from relay_notebook.errors import InvalidInputError, RelayError, RunLockedError, codes
from relay_notebook.record.folders import RunFolder
from relay_notebook.record.store import open_database
from relay_notebook.runner.backend import Backend, connect
from relay_notebook.runner.dbos_private import child_calls, child_starts, root_calls
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.runner.run_input import check_run_input
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

if TYPE_CHECKING:
    pass

__all__ = [
    "CREATING",
    "HOLD_QUEUE",
    "ChildCall",
    "ChildFork",
    "ForkError",
    "ForkIncompleteError",
    "ForkPlan",
    "ForkRequest",
    "check_compatible",
    "copy_database",
    "find_child_call",
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
class ChildFork:
    """The child workflow a fork forks too, when the call it is forked from ran in a child
    (a Pydantic AI ``DBOSAgent``'s model request): its calls before that one are copied."""

    starter: int  # the parent's function id of the call that started the child
    starter_call: str  # that call as STEP#N, e.g. clerk.run#1
    workflow_id: str  # the parent's child workflow
    function_id: int  # the child's first function id that runs fresh
    copied: list[tuple[int, str]]  # (function id, step name) of the child's copied calls
    outputs: dict[int, Any] = field(default_factory=dict)  # edited outputs by function id

    def forked_id(self, fork_id: str) -> str:
        """The fork's child workflow: the id DBOS gives a child started at ``starter``."""
        return f"{fork_id}-{self.starter}"

    def record(self, fork_id: str | None) -> dict[str, Any]:
        """The child's part of the fork's origin as run.json keeps it."""
        return {
            "starter": self.starter,
            "starter_call": self.starter_call,
            "parent_workflow_id": self.workflow_id,
            "workflow_id": None if fork_id is None else self.forked_id(fork_id),
            "function_id": self.function_id,
            "copied": [fid for fid, _ in self.copied],
            "edited_ids": sorted(self.outputs),
        }


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
    child: ChildFork | None = None  # the child forked too (``call`` ran in it)

    def record(self, fork_id: str | None = None) -> dict[str, Any]:
        """The fork's origin as run.json keeps it (``fork_id`` names its forked child)."""
        origin = {
            "parent": self.parent,
            "from": self.call,
            "function_id": self.function_id,
            "copied": [fid for fid, _ in self.copied],
            "edits": {"input": self.input_edited, "outputs": list(self.edited)},
            "edited_ids": sorted(self.outputs),
        }
        if self.child is not None:
            origin["child"] = self.child.record(fork_id)
        return origin


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


@contextlib.contextmanager
def _reading(db: Path | Backend) -> Iterator[tuple[Any, bool]]:
    """A read-only connection to the parent's database (``None``: no SQLite file) and whether
    it is PostgreSQL."""
    if isinstance(db, Backend):
        with connect(db) as conn:
            yield conn, True
    else:
        with open_database(db, live=False) as conn:
            yield conn, False


@dataclass(frozen=True)
class ChildCall:
    """Where a call that is not one of the run's own ran: in the child workflow
    ``workflow_id``, started by the run's call ``starter`` (``starter_call``, as STEP#N), at
    ``function_id`` of the child (``None``: deeper, in a workflow the child started)."""

    starter: int
    starter_call: str
    workflow_id: str
    own: list[tuple[int, str]]  # the child's own calls (function id, step name)
    prior: dict[str, int]  # the calls of each name the earlier children's subtrees made
    function_id: int | None

    def label(self, fid: int) -> str:
        """The child's call at ``fid`` as STEP#N (N counted across the run's children)."""
        name = dict(self.own)[fid]
        k = self.prior.get(name, 0) + sum(1 for f, c in self.own if c == name and f <= fid)
        return f"{name}#{k}"


def find_child_call(db: Path | Backend, run_id: str, name: str, n: int) -> ChildCall | None:
    """The ``n``-th call of ``name`` among the calls of the run's children, counted across
    them in order (each child's own calls, then its children's); ``None``: no child ran it."""
    with _reading(db) as (conn, pg):
        if conn is None:
            return None
        prior: dict[str, int] = {}
        started: dict[str, int] = {}
        seen = 0
        for starter, starter_name, child in child_starts(conn, run_id, pg=pg):
            started[starter_name] = started.get(starter_name, 0) + 1
            own = root_calls(conn, child, pg=pg)
            deeper = [c for _, calls in child_calls(conn, child, pg=pg, depth=2) for c in calls]
            subtree = [c for _, c in own] + deeper
            if seen + subtree.count(name) >= n:
                return ChildCall(
                    starter, f"{starter_name}#{started[starter_name]}", child, own, prior,
                    _nth(own, name, n - seen),
                )  # fmt: skip
            seen += subtree.count(name)
            for called in subtree:
                prior[called] = prior.get(called, 0) + 1
    return None


def _in_grandchild(run_id: str, what: str, name: str, found: ChildCall) -> ForkError:
    """Why a call of a workflow a child started cannot be forked from or edited."""
    return ForkError(
        f"Cannot {what}: {name} ran in a workflow started inside child workflow "
        f"{found.workflow_id} (by {found.starter_call}), and a fork forks the run's workflow "
        f"and at most one of its children, not theirs. Fork from the call that started the "
        f"child to run it all again: relay fork {run_id} --from {found.starter_call}"
    )


def _not_copied_child(run_id: str, target: str, found: ChildCall, plan: ForkPlan) -> ForkError:
    """Why an output of a child's call that the fork copies whole (or not at all) cannot be
    set, and the fork from inside that child that can set it."""
    assert found.function_id is not None
    if plan.child is None and found.starter < plan.function_id:
        why = f"a fork from {plan.call} replays that child as it ran, unedited"
    elif plan.child is None:
        why = f"a fork from {plan.call} runs that child again from its start"
    else:
        why = f"a fork from {plan.call} forks only the child that call ran in"
    later = [fid for fid, _ in found.own if fid > found.function_id]
    if later:
        how = (
            f"To edit it, fork from a later call of that child: relay fork {run_id} --from "
            f"{found.label(later[0])} --set '{target}=VALUE'"
        )
    else:
        how = f"It is that child's last call; to run it again: relay fork {run_id} --from {target}"
    return ForkError(
        f"Cannot set the output of {target}: it is a call of child workflow "
        f"{found.workflow_id} (started by {found.starter_call}), and {why}. {how}"
    )


def _resolve_set(
    run_id: str, plan: ForkPlan, calls: list[tuple[int, str]], db: Path | Backend, target: str
) -> tuple[ChildFork | None, int]:
    """Where ``--set target=...`` edits: (``None``, the run's function id) or (the forked
    child, its function id); refused when that call is not copied into the fork."""
    step, k = parse_call(target, "--set")
    fid = _nth(plan.copied, step, k)
    child = plan.child
    if fid is not None and child is not None and fid == child.starter:
        raise ForkError(
            f"Cannot set the output of {target}: it started the child workflow the fork is "
            f"forked from inside, so its output is that child's result; set the output of one "
            f"of the child's calls before {plan.call} instead."
        )
    if fid is not None:
        return None, fid
    if _nth(calls, step, k) is None and (found := find_child_call(db, run_id, step, k)):
        if found.function_id is None:
            raise _in_grandchild(run_id, f"set the output of {target}", step, found)
        if child is None or found.workflow_id != child.workflow_id:
            raise _not_copied_child(run_id, target, found, plan)
        if found.function_id < child.function_id:
            return child, found.function_id
        copied = [(f, found.label(f)) for f, _ in child.copied]
        raise ForkError(
            f"Cannot set the output of {target}: only calls before {plan.call} are copied into "
            f"the fork (copied in child workflow {child.workflow_id}: "
            f"{', '.join(label for _, label in copied) or 'none'}); the others run fresh."
        )
    raise ForkError(
        f"Cannot set the output of {target}: only calls before {plan.call} are copied into "
        f"the fork (copied: {_describe(plan.copied)}); the others run fresh."
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
    child: ChildFork | None = None
    if start is None:
        if calls and name == calls[-1][1] and n == 1 + sum(1 for _, c in calls if c == name):
            start = calls[-1][0] + 1  # the next call of the last step: fork after everything
        elif (found := find_child_call(db, parent.run_id, name, n)) is not None:
            if found.function_id is None:
                what = f"fork run {parent.run_id} from {call}"
                raise _in_grandchild(parent.run_id, what, name, found)
            child = ChildFork(
                found.starter, found.starter_call, found.workflow_id, found.function_id,
                [(fid, c) for fid, c in found.own if fid < found.function_id],
            )  # fmt: skip
            # the run's calls up to the one that started the child are copied, that one
            # pointing at the forked child; DBOS's getResult after it is not (module docstring)
            start = found.starter + 1
        else:
            raise ForkError(
                f"Cannot fork run {parent.run_id} from {call}: the run recorded no such call "
                f"(its calls: {_describe(calls)}). Name one of them, e.g. --from "
                f"{calls[0][1] if calls else 'STEP'}#1."
            )
    copied = [(fid, c) for fid, c in calls if fid < start]
    plan = ForkPlan(parent.run_id, call, start, copied, input_edited=input_edited, child=child)
    secrets = Redactor(Vault(workspace.home).values())
    for target, value in sets.items():
        step, k = parse_call(target, "--set")
        where, fid = _resolve_set(parent.run_id, plan, calls, db, target)
        leaked = secrets.find(value)
        if leaked:
            raise InvalidInputError(
                f"The output given for {target} carries the value of vault secret {leaked}, "
                f"which DBOS would save; read the secret inside the step instead."
            )
        (plan.outputs if where is None else where.outputs)[fid] = value
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

    nodes = build_flow_graph(source).nodes
    known = {key for node in nodes if (key := call_key(node))}
    # an agent's model requests and tool calls, which run in its child workflow
    known |= {
        str(s) for node in nodes if node.type == "agent" for s in node.details.get("steps") or ()
    }
    child = plan.child.copied if plan.child is not None else []
    for fid, name in [*plan.copied, *child]:
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
