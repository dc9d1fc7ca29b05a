"""A run's step calls: DBOS's checkpoint rows joined with the attempts that ran or reused them.

Design note: DBOS keeps one row per step call and no trace of the attempts. A checkpoint is
written by the process that ran the body, and attempts never overlap, so the attempt that
completed a call is the last one started before its ``completed_at``. A body can also have run
in an earlier attempt that died before its checkpoint: only attempts that did not succeed can
hold such bodies, so only their ``step_start`` events are read. Reuse of the root workflow's
checkpoints is what the runner recorded in run.json (the live attempt's so far comes from its
``step_reused`` events); a child workflow's completed steps are reused by every later attempt
in which that child was still going (DBOS recovers it and replays them). A run can have tens
of thousands of calls, so the table is kept as columns, with the rare per-call lists (earlier
bodies, reuse, retries, receipts) stored sparsely; records and previews are made on request.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentworks.frameworks import step_role
from agentworks.redact import Redactor
from relay_notebook.history.ledger_scan import LedgerScan
from relay_notebook.history.log_records import StepCall, StepRetry
from relay_notebook.history.outputs import output_preview
from relay_notebook.record.run_record import AttemptRecord

__all__ = [
    "SavedOutputs",
    "StepRow",
    "StepTable",
    "WorkflowRow",
    "assemble_steps",
    "step_kind",
]

#: a row of ``operation_outputs`` as ``record.dbos_tables.STEP_ROWS`` reads it
StepRow = tuple[str, int, str, int | None, int | None, int, str | None]
#: saved (output, error, serialization) by (workflow id, function id), read when asked for
SavedOutputs = dict[tuple[str, int], tuple[str | None, str | None, str | None]]
#: the columns a ``StepCall`` is made of as they are (the sparse lists come from the table)
_ROW_COLUMNS: Final = (
    *("function_id", "name", "status", "started_at_ms", "completed_at_ms", "duration_ms"),
    *("child_workflow_id", "workflow_id", "kind", "occurrence", "output_preview"),
    *("error_preview", "copied_from", "edited"),
)


@dataclass(frozen=True)
class WorkflowRow:
    """One row of DBOS's ``workflow_status``: the run's root workflow or a child."""

    workflow_id: str
    status: str
    name: str
    parent_workflow_id: str | None
    recovery_attempts: int | None = None


def step_kind(name: str, child_workflow_id: str | None) -> str:
    """``step``, ``workflow`` (a child started), ``agent``, ``mcp`` or ``dbos`` (DBOS's own)."""
    if name.startswith("DBOS."):
        return "dbos"
    if child_workflow_id is not None:
        return "workflow"
    if name.startswith("agent:"):
        return "agent"
    if name.startswith("mcp:"):
        return "mcp"
    role = step_role(name)  # a framework's model request or MCP call (agentworks.frameworks)
    return role.kind if role is not None else "step"


class StepTable:
    """Every step call of a run (all workflows), as columns, in call order per workflow.

    ``columns`` hold one value per call; ``earlier``, ``reused``, ``retries`` and
    ``receipts`` map a row number to its list, for the calls that have one.
    """

    def __init__(
        self,
        columns: dict[str, list[Any]],
        redactor: Redactor | None = None,
        outputs: Callable[[], SavedOutputs] | None = None,
    ) -> None:
        self.columns = columns
        self._outputs = outputs
        #: attempts that started the body before the one that saved it (or any, if unsaved)
        self.earlier: dict[int, list[int]] = {}
        self.reused: dict[int, list[int]] = {}
        self.retries: dict[int, list[StepRetry]] = {}
        self.receipts: dict[int, list[str]] = {}
        self._redactor = redactor
        self._rows: list[StepCall] | None = None
        self._index: dict[tuple[str, int], int] | None = None

    def __len__(self) -> int:
        return len(self.columns["function_id"])

    @property
    def index(self) -> dict[tuple[str, int], int]:
        """Row number by (workflow id, function id)."""
        if self._index is None:
            keys = zip(self.columns["workflow_id"], self.columns["function_id"], strict=True)
            self._index = {key: i for i, key in enumerate(keys)}
        return self._index

    def executed_in(self, i: int) -> list[int]:
        """The attempts in which row ``i``'s body ran."""
        done = self.columns["attempt"][i]
        earlier = self.earlier.get(i, [])
        return [*earlier, done] if done is not None else list(earlier)

    def append(self, values: dict[str, Any]) -> int:
        """Add a call DBOS has no row for (a body that never saved its checkpoint)."""
        for column, items in self.columns.items():
            items.append(values.get(column))
        i = len(self) - 1
        self.index[(values["workflow_id"], values["function_id"])] = i
        return i

    def mark_copied(self, run_id: str, parent: str, copied: set[int], edited: set[int]) -> None:
        """A fork's calls copied from ``parent``: no attempt of this run ran their bodies, and
        none reused them (an attempt replays a copy as it replays a checkpoint, but the call was
        copied, as ``relay runs`` counts it)."""
        cols = self.columns
        for i, (wf, fid) in enumerate(zip(cols["workflow_id"], cols["function_id"], strict=True)):
            if wf == run_id and fid in copied:
                cols["attempt"][i] = None
                cols["copied_from"][i] = parent
                cols["edited"][i] = fid in edited
                self.earlier.pop(i, None)
                self.reused.pop(i, None)
        self._rows = None

    def reorder(self) -> None:
        """Back to call order per workflow after ``append``."""
        cols = self.columns
        order = sorted(
            range(len(self)), key=lambda j: (cols["workflow_id"][j], cols["function_id"][j])
        )
        new_of = {old: new for new, old in enumerate(order)}
        for column, items in cols.items():
            cols[column] = [items[j] for j in order]
        self.earlier = {new_of[i]: v for i, v in self.earlier.items()}
        self.reused = {new_of[i]: v for i, v in self.reused.items()}
        self.retries = {new_of[i]: v for i, v in self.retries.items()}
        self.receipts = {new_of[i]: v for i, v in self.receipts.items()}
        self._index = None

    def previews(self) -> None:
        """Fill ``output_preview`` and ``error_preview`` (decoding is the costly part: on ask)."""
        cols = self.columns
        if "output_preview" in cols:
            return
        r = self._redactor
        saved = self._outputs() if self._outputs is not None else {}
        found = [
            saved.get(key) for key in zip(cols["workflow_id"], cols["function_id"], strict=True)
        ]
        cols["output_preview"] = [
            _timer_preview(
                name, None if f is None or f[0] is None else output_preview(f[0], f[2], r)
            )
            for name, f in zip(cols["name"], found, strict=True)
        ]
        cols["error_preview"] = [
            None if f is None or f[1] is None else output_preview(f[1], f[2], r) for f in found
        ]

    def rows(self) -> list[StepCall]:
        """One record per call, made once."""
        if self._rows is None:
            self.previews()
            columns = zip(*(self.columns[n] for n in _ROW_COLUMNS), strict=True)
            self._rows = [self._record(i, values) for i, values in enumerate(columns)]
        return self._rows

    def _record(self, i: int, values: tuple[Any, ...]) -> StepCall:
        """Row ``i`` as a record: its ``_ROW_COLUMNS`` values and its sparse lists."""
        fid, name, status, started, completed, duration, child, *tail = values
        wf, kind, occurrence, output, error, copied, edited = tail
        return StepCall(
            fid, name, status, started, completed, duration, child,
            tuple(self.executed_in(i)), tuple(self.reused.get(i, ())),
            tuple(self.retries.get(i, ())), wf, kind, occurrence, output, error,
            tuple(self.receipts.get(i, ())), copied, edited,
        )  # fmt: skip

    def of(self, workflow_id: str) -> tuple[StepCall, ...]:
        """The records of one workflow."""
        return tuple(r for r in self.rows() if r.workflow_id == workflow_id)


class _Attempts:
    """When each attempt started, which ones did not succeed, and which one is live."""

    def __init__(self, attempts: Sequence[AttemptRecord], live: int | None) -> None:
        self.numbers = [a.attempt for a in attempts]
        self.starts = [float(a.started_at or 0) for a in attempts]
        self.live = live
        self.reused = [(a.attempt, a.reused) for a in attempts]
        self.unsettled = [
            a.attempt for a in attempts if a.status != "succeeded" or a.attempt == live
        ]

    def at(self, epoch_ms: float | None) -> int | None:
        """The attempt that was going at ``epoch_ms``."""
        if epoch_ms is None or not self.starts:
            return None
        i = bisect.bisect_right(self.starts, epoch_ms) - 1
        return self.numbers[i] if i >= 0 else None


def assemble_steps(
    run_id: str,
    rows: Sequence[StepRow],
    workflows: Sequence[WorkflowRow],
    attempts: Sequence[AttemptRecord],
    live: int | None,
    scan: LedgerScan,
    redactor: Redactor | None,
    outputs: Callable[[], SavedOutputs] | None = None,
) -> StepTable:
    """The step table of run ``run_id`` from DBOS's rows, run.json's attempts and the ledger;
    ``outputs`` reads the saved outputs when previews are first asked for."""
    times = _Attempts(attempts, live)
    n = len(rows)
    wfs, fids, names, starts, ends, failed, childs = (
        [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(7)]
    )
    # the common case (one workflow, no child, no error, every call saved) without per-row work
    counters: defaultdict[Any, Iterator[int]] = defaultdict(lambda: itertools.count(1))
    keys: Sequence[Any] = names if len(set(wfs)) <= 1 else list(zip(wfs, names, strict=True))
    occurrence = [next(counters[k]) for k in keys]
    kinds = {name: step_kind(name, None) for name in set(names)}
    if childs.count(None) == n:
        kind = list(map(kinds.__getitem__, names))
    else:
        kind = [
            kinds[m] if c is None else step_kind(m, c) for m, c in zip(names, childs, strict=True)
        ]
    saved = None not in ends
    if len(times.starts) == 1 and saved:
        attempt_of: list[int | None] = [times.numbers[0]] * n
    else:
        attempt_of = [times.at(e) for e in ends]
    if saved and None not in starts:
        duration: list[int | None] = list(map(operator.sub, ends, starts))
    else:
        duration = [
            e - s if e is not None and s is not None else None
            for s, e in zip(starts, ends, strict=True)
        ]
    table = StepTable(
        {
            "function_id": fids,
            "name": names,
            "status": ["checkpointed"] * n
            if not any(failed)
            else ["error" if f else "checkpointed" for f in failed],
            "started_at_ms": starts,
            "completed_at_ms": ends,
            "duration_ms": duration,
            "child_workflow_id": childs,
            "workflow_id": wfs,
            "kind": kind,
            "occurrence": occurrence,
            "attempt": attempt_of,
            "copied_from": [None] * n,
            "edited": [False] * n,
        },
        redactor,
        outputs,
    )
    _in_flight(table, times, scan)
    for e in scan.select("step_error"):
        i = table.index.get((e.get("workflow_id"), e.get("step_id")))  # type: ignore[arg-type]
        if i is not None:
            table.retries.setdefault(i, []).append(
                StepRetry(
                    e.get("attempt"),
                    e.get("step_attempt"),
                    e.get("error_type"),
                    e.get("error"),
                    e.get("duration_ms"),
                    e.get("ts"),
                )
            )
    _mark_reuse(run_id, table, workflows, times, scan)
    return table


def _in_flight(table: StepTable, times: _Attempts, scan: LedgerScan) -> None:
    """Attempts that ran a body without saving its checkpoint; rows for bodies never saved."""
    added = False
    for attempt in times.unsettled:
        for e in scan.select("step_start", attempt):
            wf, fid = e.get("workflow_id"), e.get("step_id")
            if not isinstance(wf, str) or not isinstance(fid, int):
                continue
            i = table.index.get((wf, fid))
            if i is None:
                # a body that started but never reached its checkpoint: in flight, or crashed
                name = str(e.get("step"))
                status = "running" if attempt == times.live else "interrupted"
                i = table.append(
                    {
                        "function_id": fid,
                        "name": name,
                        "status": status,
                        "started_at_ms": e.get("ts"),
                        "workflow_id": wf,
                        "kind": step_kind(name, None),
                    }
                )
                added = True
            if attempt != table.columns["attempt"][i] and attempt not in table.earlier.get(i, []):
                table.earlier[i] = sorted([*table.earlier.get(i, []), attempt])
    if added:
        table.reorder()
        cols = table.columns
        counters: defaultdict[Any, Iterator[int]] = defaultdict(lambda: itertools.count(1))
        cols["occurrence"] = [
            next(counters[key]) for key in zip(cols["workflow_id"], cols["name"], strict=True)
        ]


def _mark_reuse(
    run_id: str,
    table: StepTable,
    workflows: Sequence[WorkflowRow],
    times: _Attempts,
    scan: LedgerScan,
) -> None:
    cols = table.columns
    for attempt, ids in times.reused:
        for fid in ids:
            i = table.index.get((run_id, fid))
            if i is not None:
                table.reused.setdefault(i, []).append(attempt)
    if times.live is not None:
        for i in _live_reuse(run_id, cols, times, scan):
            if times.live not in table.reused.get(i, []):
                table.reused.setdefault(i, []).append(times.live)
    children = {w.workflow_id for w in workflows} - {run_id}
    if not children:
        return
    rows = [i for i, wf in enumerate(cols["workflow_id"]) if wf in children]
    active: dict[str, set[int]] = {}
    for i in rows:
        active.setdefault(cols["workflow_id"][i], set()).update(table.executed_in(i))
    for i in rows:
        done = cols["attempt"][i]
        if done is not None and cols["status"][i] not in ("running", "interrupted"):
            later = sorted(a for a in active[cols["workflow_id"][i]] if a > done)
            if later:
                table.reused[i] = later
    # an attempt that replayed a child's checkpoint says so in its ledger (``step_reused`` with
    # the child's workflow id): a grandchild whose calls were all replayed ran none in that
    # attempt, so the rule above cannot see it was going
    replayed: dict[tuple[str, str, int], set[int]] = {}
    for e in scan.select("step_reused"):
        wf, attempt = e.get("workflow_id"), e.get("attempt")
        if wf in children and isinstance(attempt, int):
            key = (str(wf), str(e.get("step")), int(e.get("occurrence") or 0))
            replayed.setdefault(key, set()).add(attempt)
    if replayed:
        seen: dict[tuple[str, str], int] = {}
        for i in sorted(rows, key=lambda r: (cols["workflow_id"][r], cols["function_id"][r])):
            wf, name = cols["workflow_id"][i], cols["name"][i]
            k = seen[(wf, name)] = seen.get((wf, name), 0) + 1
            attempts = replayed.get((wf, name, k))
            if attempts:
                table.reused[i] = sorted(set(table.reused.get(i, ())) | attempts)


def _live_reuse(
    run_id: str, cols: dict[str, list[Any]], times: _Attempts, scan: LedgerScan
) -> list[int]:
    """Rows of the root workflow reused so far by the attempt going now (run.json has none yet)."""
    live = times.live
    if live is None:
        return []
    start = times.starts[times.numbers.index(live)]
    replayed = {(e.get("step"), e.get("occurrence")) for e in scan.select("step_reused", live)}
    seen: dict[str, int] = {}
    before: list[tuple[int, int]] = []
    reach = 0
    for i, (wf, fid, name, done) in enumerate(
        zip(
            cols["workflow_id"],
            cols["function_id"],
            cols["name"],
            cols["completed_at_ms"],
            strict=True,
        )
    ):
        if wf != run_id or done is None or done >= start:
            continue
        seen[name] = seen.get(name, 0) + 1
        before.append((i, fid))
        if (name, seen[name]) in replayed:
            reach = max(reach, fid)
    return [i for i, fid in before if fid <= reach]


def _timer_preview(name: str, preview: str | None) -> str | None:
    """A durable timer's saved output is its wake time (epoch seconds): shown as a time."""
    if name != "DBOS.sleep" or preview is None:
        return preview
    try:
        wake = float(preview)
    except ValueError:
        return preview
    return "wakes " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(wake))
