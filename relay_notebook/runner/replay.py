"""The replay check: would new code replay the histories of recorded runs? (``relay check
--replay``).

Design note: each run is checked by DBOS itself, in a sandbox — a consistent copy of the run's
SQLite database in a temporary folder, replayed by a child (``runner.replay_child``) that forks
the run's workflow there onto the new code. The run's own files are only read. The verdict:

- **diverged**: inside the recorded history the new code calls something else than the run
  recorded (DBOS's ``DBOSUnexpectedStepError``): a recovery of a run at that point would fail.
  Incompatible. The report names the recorded call, the new code's call, its line and node,
  and how ``DBOS.patch`` would keep old runs on the old path.
- **ends early**: the new code returns before making every recorded call. Incompatible for a
  run that can still be recovered; a note for a finished one (DBOS never replays those).
- **past the history**: the new code replays the whole history, then calls what the run never
  reached (that call's body is not run). Compatible: a recovery would run it fresh.
- **raised** / **failed**: the new code raised while replaying, or could not be imported.

A run on PostgreSQL is checked the same way: its application's rows (``workflow_status``,
``workflow_input``, ``operation_outputs``) are read from the shared database and written into
the sandbox's SQLite store before the replay, so the shared database is never written either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from relay_notebook.errors import RunNotFoundError
from relay_notebook.record import dbos_tables
from relay_notebook.record.folders import RunFolder, find_run, list_run_folders
from relay_notebook.record.run_record import RunRecord
from relay_notebook.runner.backend import ENV_VAR as ENV_DATABASE_URL
from relay_notebook.runner.confine import WriteRules, confine_command
from relay_notebook.runner.fork import copy_database
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import call_key
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import VAULT_DIR

__all__ = ["ReplayReport", "replay_check", "replay_lines", "replay_summary"]

CHILD_MODULE: Final = "relay_notebook.runner.replay_child"
#: runs checked when none are named: the relay's most recent ones
DEFAULT_RUNS: Final = 10
TIMEOUT_S: Final = 90.0
_UNFINISHED: Final = frozenset({"interrupted", "needs_reconciliation", "running", "pending"})


@dataclass
class ReplayReport:
    """One run's replay on the new code."""

    run_id: str
    run_status: str
    verdict: str  # compatible | incompatible | unchecked
    outcome: str  # diverged | ends-early | past-history | replayed | raised | failed | ...
    message: str
    recorded: list[str] = field(default_factory=list)
    replayed: int = 0
    call: str | None = None
    line: int | None = None
    node: str | None = None
    expected: str | None = None
    missing: list[str] = field(default_factory=list)
    hint: str | None = None

    @property
    def compatible(self) -> bool:
        return self.verdict != "incompatible"

    @property
    def blocks_recovery(self) -> bool:
        """Incompatible, and a run recovery would replay (unfinished): recovering it on this
        code would fail. A finished run that differs matters only to a fork from it."""
        return not self.compatible and self.run_status in _UNFINISHED

    @property
    def where(self) -> str | None:
        """The new code's call the replay stopped at, for people: ``wrap (line 33)``."""
        if self.call is None:
            return None
        name = self.call.split(":", 1)[-1]
        return f"{name} (line {self.line})" if self.line else name

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "blocks_recovery": self.blocks_recovery}


def _occurrences(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(f"{name}#{seen[name]}")
    return out


_EXPORTED: Final = ("workflow_status", "workflow_input", "operation_outputs")


def _export_postgres(workspace: Workspace, record: RunRecord, run_id: str) -> dict[str, Any]:
    """The run's DBOS rows in the shared PostgreSQL database, as lists per table."""
    from relay_notebook.runner.backend import (
        app_name_for_run,
        backend_for_run,
        connect,
        workspace_backend,
    )

    backend = backend_for_run(record, workspace_backend(workspace))
    app = app_name_for_run(run_id)
    out: dict[str, Any] = {}
    with connect(backend) as conn:
        for table in _EXPORTED:
            cursor = conn.execute(dbos_tables.PG_EXPORT.format(table=table), (app,))
            columns = [c.name for c in cursor.description]
            out[table] = {"columns": columns, "rows": [list(r) for r in cursor.fetchall()]}
    return out


def _import_rows(database: Path, exported: dict[str, Any]) -> None:
    """Write exported rows into the sandbox's SQLite store (DBOS's own schema, made by a
    launch of DBOS on it first), keeping the columns both schemas have."""
    conn = sqlite3.connect(database)
    try:
        for table in _EXPORTED:
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            data = exported.get(table) or {"columns": [], "rows": []}
            keep = [i for i, c in enumerate(data["columns"]) if c in have]
            if not keep:
                continue
            names = [data["columns"][i] for i in keep]
            marks = ", ".join("?" for _ in keep)
            rows = [[_sqlite_value(row[i]) for i in keep] for row in data["rows"]]
            if "application_name" in names:  # the sandbox's DBOS serves application "relay"
                at = names.index("application_name")
                for row in rows:
                    row[at] = "relay"
            conn.executemany(
                f"INSERT OR REPLACE INTO {table} ({', '.join(names)}) VALUES ({marks})", rows
            )
        conn.commit()
    finally:
        conn.close()


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value)
    if isinstance(value, bool | int | float | str | bytes) or value is None:
        return value
    return str(value)


def _new_store(database: Path) -> None:
    """An empty SQLite store with DBOS's tables (DBOS migrates it in a short child)."""
    program = (
        "import sys\nfrom dbos import DBOS\n"
        "DBOS(config={'name': 'relay', 'system_database_url': 'sqlite:///' + sys.argv[1], "
        "'log_level': 'ERROR'})\nDBOS.launch()\nDBOS.destroy()\n"
    )
    subprocess.run(
        [sys.executable, "-c", program, str(database)], check=True, capture_output=True, timeout=120
    )


def _recorded(database: Path, run_id: str) -> tuple[list[tuple[int, str]], bool]:
    """The run's root-workflow calls (function id, name) and whether the workflow exists."""
    conn = sqlite3.connect(database)
    try:
        exists = conn.execute(dbos_tables.WORKFLOW_EXISTS, (run_id,)).fetchone()
        rows = conn.execute(dbos_tables.CALLS, (run_id,)).fetchall()
    except sqlite3.OperationalError:
        return [], False
    finally:
        conn.close()
    return [(int(fid), str(name)) for fid, name in rows], exists is not None


def _node_for(source: str, name: str | None, line: int | None) -> str | None:
    if name is None:
        return None
    nodes = [n for n in build_flow_graph(source).nodes if call_key(n) == name]
    exact = [n for n in nodes if line is not None and n.line == line]
    chosen = (exact or nodes)[:1]
    return chosen[0].id if chosen else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "change"


def _patch_hint(called: str, recorded: str) -> str:
    new, old = called.split(":", 1)[-1], recorded.split(":", 1)[-1]
    flag = _slug("use " + new)
    return (
        f"Keep runs recorded before the change on the old path with DBOS's patching: "
        f'`if await DBOS.patch_async("{flag}"): {new}(...)` then `else: {old}(...)` '
        f"(DBOS.patch in a sync workflow); old histories replay {old}, new runs call {new}."
    )


def _spawn(
    workspace: Workspace, spec: dict[str, Any], sandbox: Path, timeout: float
) -> dict[str, Any] | None:
    """Run the replay child, confined like an attempt: it imports the relay's code, so it may
    write only in its sandbox and does not see the workspace's vault."""
    spec_path = sandbox / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != ENV_DATABASE_URL}
    rules = WriteRules(
        writable=(sandbox,),
        hidden=(workspace.home / VAULT_DIR,),
        protected=(),
        sealed=(),
        tmp_dir=sandbox / "tmp",
        cwd=sandbox,
    )
    argv, _ = confine_command(
        [sys.executable, "-m", CHILD_MODULE, str(spec_path)], rules, enabled=workspace.confine
    )
    try:
        proc = subprocess.run(
            argv,
            cwd=sandbox,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout"}
    report_path = Path(spec["report_path"])
    if not report_path.exists():
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return {"outcome": "crashed", "message": f"exit {proc.returncode}: {tail[0][:300]}"}
    report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    return report


def _judge(
    folder: RunFolder,
    status: str,
    recorded: list[tuple[int, str]],
    report: dict[str, Any],
    source: str,
) -> ReplayReport:
    names = [n for _, n in recorded]
    labels = _occurrences(names)
    steps = [n for n in names if not n.startswith("DBOS.")]
    calls = [c["name"] for c in report.get("calls", [])]
    unfinished = status in _UNFINISHED

    def report_of(verdict: str, outcome: str, message: str, **facts: Any) -> ReplayReport:
        return ReplayReport(folder.run_id, status, verdict, outcome, message, labels, **facts)

    outcome = report.get("outcome")
    if outcome == "diverged":
        call = report.get("call") or {}
        called, old = str(report.get("called")), str(report.get("recorded"))
        step_id = report.get("step_id")
        index = next((i for i, (fid, _) in enumerate(recorded) if fid == step_id), None)
        expected = labels[index] if index is not None else old
        line = call.get("line")
        at = f" at line {line}" if line else ""
        return report_of(
            verdict="incompatible",
            outcome="diverged",
            message=f"recorded {expected}, the new code calls {called.split(':', 1)[-1]}{at}",
            replayed=index or 0,
            call=called,
            line=line,
            node=_node_for(source, called, line),
            expected=expected,
            hint=_patch_hint(called, old),
        )
    if outcome == "past-history":
        call = report.get("call") or {}
        name, line = str(call.get("name")), call.get("line")
        at = f" (line {line})" if line else ""
        more = "it would run fresh on recovery" if unfinished else "the run had finished"
        return report_of(
            verdict="compatible",
            outcome="past-history",
            message=f"replays all {len(labels)} recorded calls, then calls {name}{at}, which "
            f"the run never reached: {more}",
            replayed=len(labels),
            call=name,
            line=line,
            node=_node_for(source, name, line),
        )
    if outcome == "returned":
        made = len(calls)
        if made < len(steps):
            missing = _occurrences(steps)[made:]
            return report_of(
                verdict="incompatible" if unfinished else "compatible",
                outcome="ends-early",
                message=f"the new code returns after {made} of the {len(steps)} recorded "
                f"step calls; it no longer makes {', '.join(missing)}"
                + ("" if unfinished else " (the run had finished: DBOS never replays it)"),
                replayed=made,
                missing=missing,
            )
        return report_of(
            verdict="compatible",
            outcome="replayed",
            message=f"replays all {len(labels)} recorded calls",
            replayed=len(labels),
        )
    if outcome in ("raised", "failed"):
        what = "raised while replaying" if outcome == "raised" else "could not be imported"
        return report_of(
            verdict="incompatible",
            outcome=outcome,
            message=f"the new code {what}: {report.get('message')}",
            replayed=len(calls),
        )
    return report_of(
        verdict="unchecked",
        outcome=str(outcome),
        message=f"the replay did not finish ({report.get('message') or outcome})",
    )


def _default_runs(workspace: Workspace, relay: str) -> list[RunFolder]:
    return list_run_folders(workspace, relay)[-DEFAULT_RUNS:]


def replay_check(
    workspace: Workspace,
    relay: str,
    run_ids: list[str] | None = None,
    *,
    release: str | None = None,
    timeout_s: float = TIMEOUT_S,
) -> list[ReplayReport]:
    """Replay the relay's draft (or ``release``) against each run's recorded history."""
    from relay_notebook.record.bindings import draft_code, release_code

    draft = workspace.load_draft(relay)
    code = release_code(workspace, relay, release) if release else draft_code(draft)
    source = (code.folder / "relay.py").read_text(encoding="utf-8")
    folders = (
        [find_run(workspace, r) for r in run_ids] if run_ids else _default_runs(workspace, relay)
    )
    for other in (f for f in folders if f.relay != relay):
        raise RunNotFoundError(
            f"Run {other.run_id} is a run of {other.relay}, not of {relay}; replay it with: "
            f"relay check {other.relay} --replay {other.run_id}"
        )
    reports = []
    for folder in folders:
        record = RunRecord.load(folder)
        status = record.status or "pending"

        nothing = ReplayReport(
            folder.run_id, status, "compatible", "no-history", "the run recorded nothing yet"
        )
        on_postgres = (record.database or {}).get("kind") == "postgresql"
        if not on_postgres and not folder.database.exists():
            reports.append(nothing)
            continue
        sandbox = Path(tempfile.mkdtemp(prefix="relay-replay-"))
        try:
            database = sandbox / "dbos.sqlite"
            if on_postgres:
                _new_store(database)
                _import_rows(database, _export_postgres(workspace, record, folder.run_id))
            else:
                copy_database(folder.database, database)
            recorded, exists = _recorded(database, folder.run_id)
            if not exists:
                reports.append(nothing)
                continue
            spec = {
                "run_id": folder.run_id,
                "relay": relay,
                "workspace": str(workspace.home),
                "sandbox": str(sandbox),
                "database": str(database),
                "code_dir": str(code.folder),
                "entry": "relay.py",
                "app_version": code.source_hash,
                "start_step": max((fid for fid, _ in recorded), default=0) + 1,
                "report_path": str(sandbox / "report.json"),
                "timeout_s": timeout_s,
            }
            report = _spawn(workspace, spec, sandbox, timeout_s + 30) or {}
            reports.append(_judge(folder, status, recorded, report, source))
        finally:
            shutil.rmtree(sandbox, ignore_errors=True)
    return reports


def replay_lines(relay: str, reports: list[ReplayReport], code: str = "the draft") -> list[str]:
    """The terminal's table: one line per run, then hints; the last line sums up."""
    lines = []
    for r in reports:
        where = f" [node {r.node}]" if r.node else ""
        lines.append(f"{r.run_id:<16} {r.run_status:<20} {r.verdict:<12} {r.message}{where}")
        if r.hint:
            lines.append(f"{'':16} hint: {r.hint}")
    lines.append(replay_summary(relay, reports, code))
    return lines


def replay_summary(relay: str, reports: list[ReplayReport], code: str = "the draft") -> str:
    """One line: how many recorded runs replay, then what matters of the rest: the unfinished
    ones recovery would fail on (named), and the finished ones that differ, which recovery
    never replays (a fork from before the difference would)."""
    ok = sum(1 for r in reports if r.compatible)
    text = f"{relay}: {code} replays {ok} of {len(reports)} recorded runs"
    stuck = [r.run_id for r in reports if r.blocks_recovery]
    if stuck:
        runs = "run" if len(stuck) == 1 else "runs"
        text += f"; {len(stuck)} unfinished {runs} would fail to recover on it ({', '.join(stuck)})"
    differ = sum(1 for r in reports if not r.compatible and not r.blocks_recovery)
    if differ:
        runs, verb = ("run", "differs") if differ == 1 else ("runs", "differ")
        text += (
            f"; {differ} finished {runs} {verb}: recovery never replays a finished run, "
            "a fork from before the difference would"
        )
    return text
