"""Lineage and diffs of runs: a run's forks as a tree, and two runs compared call by call.

Design note: a fork's origin is in its own record (``run.json``'s ``fork``: parent, the call
it was forked from, the edits, the code), so the tree is found from the relay's run records
alone, oldest first, without opening a database. A diff aligns the two runs' root-workflow
calls by step name and occurrence (``price#2`` with ``price#2``), which is how a fork's calls
correspond to its parent's, and says for each which of input, output, status and attempt
count differ (previews, already redacted, are what is compared and shown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relay_notebook.errors import RelayError
from relay_notebook.history.records import read_run_log
from relay_notebook.record.folders import find_run, list_run_folders
from relay_notebook.record.run_record import RunRecord
from relay_notebook.workspace import Workspace

__all__ = ["LineageNode", "diff_runs", "lineage", "lineage_text"]


@dataclass
class LineageNode:
    """One run in a lineage tree, with the forks made from it."""

    run_id: str
    status: str
    fork: dict[str, Any] | None = None
    children: list[LineageNode] = field(default_factory=list)

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
        return out


def _records(workspace: Workspace, relay: str) -> dict[str, RunRecord]:
    found = {}
    for folder in list_run_folders(workspace, relay):
        try:
            found[folder.run_id] = RunRecord.load(folder)
        except RelayError:
            continue  # a damaged record is listed by `relay runs`, not drawn here
    return found


def lineage(workspace: Workspace, run_id: str) -> LineageNode:
    """The tree ``run_id`` belongs to, from the run it was first forked from."""
    folder = find_run(workspace, run_id)
    metas = _records(workspace, folder.relay)
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

    def build(rid: str, depth: int) -> LineageNode:
        record = metas[rid]
        node = LineageNode(rid, record.status, record.fork)
        if depth < 100:
            node.children = [build(c, depth + 1) for c in children.get(rid, [])]
        return node

    return build(root, 0)


def lineage_text(tree: LineageNode) -> str:
    """The tree as lines: the origin, then each fork under its parent."""
    lines: list[str] = []

    def walk(node: LineageNode, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        about = ""
        if node.fork:
            edits = node.fork.get("edits") or {}
            edited = [*(["input"] if edits.get("input") else []), *(edits.get("outputs") or [])]
            about = f"  from {node.fork.get('from')} · {node.fork.get('code')} code"
            if edited:
                about += f" · edited {', '.join(edited)}"
        lines.append(f"{prefix}{branch}{node.run_id}  {node.status}{about}")
        deeper = prefix + ("" if top else ("   " if last else "│  "))
        for i, child in enumerate(node.children):
            walk(child, deeper, i == len(node.children) - 1, False)

    walk(tree, "", True, True)
    return "\n".join(lines)


_COMPARED = ("input_preview", "output_preview", "error_preview", "status", "attempts")


def _calls(workspace: Workspace, run_id: str) -> dict[str, dict[str, Any]]:
    log = read_run_log(workspace, run_id)
    facts = log.call_facts()
    out: dict[str, dict[str, Any]] = {}
    for step in log.steps:
        if step["kind"] == "dbos":
            continue
        key = f"{step['name']}#{step['occurrence']}"
        extra = facts.get((step["workflow_id"], step["function_id"]), {})
        status = "copied" if step.get("copied_from") else step["status"]
        out[key] = {
            "status": status,
            "attempts": len(step["executed_in"]),
            "input_preview": extra.get("input_preview"),
            "output_preview": step.get("output_preview"),
            "error_preview": step.get("error_preview"),
        }
    return out


def diff_runs(workspace: Workspace, a: str, b: str) -> list[dict[str, Any]]:
    """Call by call (``STEP#N``, in ``a``'s order then ``b``'s new ones): each run's status,
    attempt count, input and output, and which of them differ (``differs``)."""
    left, right = _calls(workspace, a), _calls(workspace, b)
    rows = []
    for key in [*left, *(k for k in right if k not in left)]:
        one, two = left.get(key), right.get(key)
        row: dict[str, Any] = {"call": key}
        for field_name in _COMPARED:
            row[f"{field_name}_a"] = one.get(field_name) if one else None
            row[f"{field_name}_b"] = two.get(field_name) if two else None
        if one is None or two is None:
            row["differs"] = ["only in " + (b if one is None else a)]
        else:
            # a copied checkpoint is its parent's call: only what it holds can differ (an edit)
            copied = "copied" in {one["status"], two["status"]}
            row["differs"] = [
                f.removesuffix("_preview")
                for f in _COMPARED
                if one.get(f) != two.get(f)
                and not (copied and f in ("status", "attempts"))
                and not (copied and f == "input_preview" and None in (one[f], two[f]))
            ]
        rows.append(row)
    return rows
