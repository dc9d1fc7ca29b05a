"""Lineage and diffs of runs: a run's forks as a tree, and two runs compared call by call.

Design note: a fork's origin is in its own record (``run.json``'s ``fork``: parent, the call
it was forked from, the edits, the code), so the tree is found from the relay's run records,
oldest first; each run's SQLite database is opened only to list the forks DBOS's own tool made
there (``dbos workflow fork``: ``record.dbos_tools``), shown under the run they copy. A diff
aligns the two runs' root-workflow calls by step name and occurrence (``price#2`` with
``price#2``), which is how a fork's calls correspond to its parent's, and says for each which
of input, output, status and attempt count differ (previews, already redacted, are what is
compared and shown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from relay_notebook.errors import RelayError
from relay_notebook.history.log_records import ForkEdits, ForkOrigin
from relay_notebook.history.records import read_run_log
from relay_notebook.record.dbos_tools import DbosTools, OutsideWorkflow, RunDatabases, shown_status
from relay_notebook.record.folders import RunFolder, find_run, list_run_folders
from relay_notebook.record.run_record import RunRecord
from relay_notebook.workspace import Workspace

__all__ = ["CallDiff", "LineageNode", "diff_runs", "edited_calls", "lineage", "lineage_text"]


@dataclass
class LineageNode:
    """One run in a lineage tree, with the forks made from it."""

    run_id: str
    status: str
    #: its origin, if it is a fork
    fork: ForkOrigin | None = None
    children: list[LineageNode] = field(default_factory=list)
    #: workflows in its database the kit did not make (forks made with ``dbos workflow fork``)
    outside: tuple[OutsideWorkflow, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "status": self.status}
        if self.fork is not None:
            out["fork"] = {
                "parent": self.fork.get("parent"),
                "from": self.fork.get("from"),
                "edits": self.fork.get("edits"),
                "code": self.fork.get("code"),
            }
        out["forks"] = [c.to_dict() for c in self.children]
        out["outside_workflows"] = [w.to_dict() for w in self.outside]
        return out


def _records(workspace: Workspace, relay: str) -> dict[str, tuple[RunFolder, RunRecord]]:
    found = {}
    for folder in list_run_folders(workspace, relay):
        try:
            found[folder.run_id] = (folder, RunRecord.load(folder))
        except RelayError:
            continue  # a damaged record is listed by `relay runs`, not drawn here
    return found


def _dbos_tools(folder: RunFolder, record: RunRecord, databases: RunDatabases) -> DbosTools:
    """What DBOS's tools left in a finished or stopped run's database, its SQLite file or its
    PostgreSQL rows (a running one's is not opened here: ``relay logs`` reads it)."""
    if record.status in ("running", "creating", "pending", "queued"):
        return DbosTools()
    return databases.inspect(folder, record)


def lineage(workspace: Workspace, run_id: str) -> LineageNode:
    """The tree ``run_id`` belongs to, from the run it was first forked from."""
    folder = find_run(workspace, run_id)
    runs = _records(workspace, folder.relay)
    metas = {rid: record for rid, (_, record) in runs.items()}
    root = run_id
    seen = {root}
    while True:
        record = metas.get(root)
        parent = (record.fork or {}).get("parent") if record else None
        if not isinstance(parent, str) or parent not in metas or parent in seen:
            break
        root = parent
        seen.add(root)
    children: dict[str, list[str]] = {}
    for rid, record in metas.items():
        parent = (record.fork or {}).get("parent")
        if isinstance(parent, str):
            children.setdefault(parent, []).append(rid)

    databases = RunDatabases(workspace)

    def build(rid: str, depth: int) -> LineageNode:
        here, record = runs[rid]
        found = _dbos_tools(here, record, databases)
        status = shown_status(record.status, found)
        node = LineageNode(rid, status, cast(ForkOrigin | None, record.fork), outside=found.outside)
        if depth < 100:
            node.children = [build(c, depth + 1) for c in children.get(rid, [])]
        return node

    return build(root, 0)


def edited_calls(edits: ForkEdits) -> list[str]:
    """``["input", "price#1"]``: what a fork's edits changed."""
    return [*(["input"] if edits.get("input") else []), *(edits.get("outputs") or [])]


def lineage_text(tree: LineageNode) -> str:
    """The tree as lines: the origin, then each fork under its parent."""
    lines: list[str] = []

    def walk(node: LineageNode, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        about = ""
        if node.fork:
            edits = node.fork.get("edits")
            edited = edited_calls(edits) if edits else []
            about = f"  from {node.fork.get('from')} · {node.fork.get('code')} code"
            if edited:
                about += f" · edited {', '.join(edited)}"
        lines.append(f"{prefix}{branch}{node.run_id}  {node.status}{about}")
        deeper = prefix + ("" if top else ("   " if last else "│  "))
        for i, child in enumerate(node.children):
            walk(child, deeper, i == len(node.children) - 1 and not node.outside, False)
        for i, w in enumerate(node.outside):
            mark = "└─ " if i == len(node.outside) - 1 else "├─ "
            lines.append(f"{deeper}{mark}{w.describe()}: not made by the kit, not a run")

    walk(tree, "", True, True)
    return "\n".join(lines)


_COMPARED = ("input_preview", "output_preview", "error_preview", "status", "attempts")


@dataclass(frozen=True, slots=True)
class _Call:
    """What a diff compares of one call."""

    status: str
    attempts: int
    input_preview: str | None
    output_preview: str | None
    error_preview: str | None


class CallDiff(TypedDict):
    """One call (``STEP#N``) of two runs ``a`` and ``b``, and what differs (``differs``)."""

    call: str
    input_preview_a: str | None
    input_preview_b: str | None
    output_preview_a: str | None
    output_preview_b: str | None
    error_preview_a: str | None
    error_preview_b: str | None
    status_a: str | None
    status_b: str | None
    attempts_a: int | None
    attempts_b: int | None
    differs: list[str]


def _calls(workspace: Workspace, run_id: str) -> dict[str, _Call]:
    log = read_run_log(workspace, run_id)
    facts = log.call_facts()
    out: dict[str, _Call] = {}
    for step in log.steps:
        if step.kind == "dbos":
            continue
        extra = facts.get((step.workflow_id, step.function_id))
        out[step.label] = _Call(
            status="copied" if step.copied_from else step.status,
            attempts=len(step.executed_in),
            input_preview=extra.input_preview if extra is not None else None,
            output_preview=step.output_preview,
            error_preview=step.error_preview,
        )
    return out


def _differs(one: _Call, two: _Call) -> list[str]:
    # a copied checkpoint is its parent's call: only what it holds can differ (an edit)
    copied = "copied" in {one.status, two.status}
    inputs = (one.input_preview, two.input_preview)
    return [
        f.removesuffix("_preview")
        for f in _COMPARED
        if getattr(one, f) != getattr(two, f)
        and not (copied and f in ("status", "attempts"))
        and not (copied and f == "input_preview" and None in inputs)
    ]


def diff_runs(workspace: Workspace, a: str, b: str) -> list[CallDiff]:
    """Call by call (``STEP#N``, in ``a``'s order then ``b``'s new ones): each run's status,
    attempt count, input and output, and which of them differ (``differs``)."""
    left, right = _calls(workspace, a), _calls(workspace, b)
    rows = []
    for key in [*left, *(k for k in right if k not in left)]:
        one, two = left.get(key), right.get(key)
        rows.append(
            CallDiff(
                call=key,
                input_preview_a=one.input_preview if one else None,
                input_preview_b=two.input_preview if two else None,
                output_preview_a=one.output_preview if one else None,
                output_preview_b=two.output_preview if two else None,
                error_preview_a=one.error_preview if one else None,
                error_preview_b=two.error_preview if two else None,
                status_a=one.status if one else None,
                status_b=two.status if two else None,
                attempts_a=one.attempts if one else None,
                attempts_b=two.attempts if two else None,
                differs=(
                    _differs(one, two)
                    if one is not None and two is not None
                    else ["only in " + (b if one is None else a)]
                ),
            )
        )
    return rows
