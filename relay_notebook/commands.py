"""The command layer shared by the ``relay`` CLI and the ``%relay`` magics.

Each command takes a workspace and plain arguments and returns a model object; rendering and
exit codes belong to the callers. Static commands never import or execute the relay's source.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentworks.journal import CallState, Journal
from relay_notebook import codes
from relay_notebook.errors import (
    AdmissionError,
    InvalidCrashSpecError,
    NothingToReconcileError,
    QueueUnavailableError,
)
from relay_notebook.history import RunLog, RunSummary, list_runs, read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.runner import (
    CrashSpec,
    RunHandle,
    parse_crash_spec,
    start_recovery,
    start_run,
)
from relay_notebook.runner.backend import Backend, workspace_backend
from relay_notebook.runner.outcome import RunOutcome
from relay_notebook.runner.runs import DEFAULT_DEADLINE_S, create_run
from relay_notebook.runner.supervisor import EventCallback
from relay_notebook.source.admission import check_durability, check_source, entrypoint_kind
from relay_notebook.source.annotations import parse_annotations
from relay_notebook.source.diagnostics import Diagnostic
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.layout import layout_graph
from relay_notebook.workspace import (
    ENTRY_FILE,
    Draft,
    Release,
    VerifyReport,
    Workspace,
    freeze_release,
    list_releases,
    resolve_release,
    verify_release,
)
from relay_notebook.workspace.access import AccessPolicy
from relay_notebook.workspace.files import read_source
from relay_notebook.workspace.vault import Vault

if TYPE_CHECKING:
    from relay_notebook.catalog import RelaySummary
    from relay_notebook.deletion import Deleted

__all__ = [
    "CheckReport",
    "PublishResult",
    "QueuedRun",
    "broken_drafts",
    "check",
    "check_draft",
    "delete",
    "enqueue",
    "grant",
    "graph",
    "graph_of_draft",
    "logs",
    "pending_calls",
    "publish",
    "reconcile",
    "recover",
    "relay_summary",
    "relays",
    "releases",
    "require_pool_backend",
    "revoke",
    "run",
    "runs",
    "vault_names",
    "vault_set",
    "verify",
    "workers",
]


@dataclass(frozen=True)
class CheckReport:
    """Admission errors and lint warnings of one draft, every file included."""

    relay: str
    entrypoint: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "relay": self.relay,
            "ok": self.ok,
            "entrypoint": self.entrypoint,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


@dataclass(frozen=True)
class PublishResult:
    """A publish: the release, and whether this call created it."""

    release: Release
    created: bool
    report: CheckReport
    #: in-flight runs of the previous release replayed on this one (``runner.replay``)
    replay: list[Any] = field(default_factory=list)

    @property
    def stranded(self) -> list[Any]:
        """The in-flight runs of the previous release that would not replay on this one."""
        return [r for r in self.replay if not r.compatible]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.release.to_dict(),
            "created": self.created,
            "warnings": [d.to_dict() for d in self.report.warnings],
            "replay": [r.to_dict() for r in self.replay],
        }


def _helper_diagnostics(draft: Draft) -> list[Diagnostic]:
    """Syntax errors in the draft's helper modules (they are imported by the relay)."""
    found: list[Diagnostic] = []
    for rel in draft.files():
        if not rel.endswith(".py") or rel == ENTRY_FILE:
            continue
        data = (draft.folder / rel).read_bytes()  # bytes: decoded as import decodes them
        try:
            ast.parse(data, filename=rel)
        except SyntaxError as exc:
            found.append(
                Diagnostic(
                    line=exc.lineno or 1,
                    col=max((exc.offset or 1) - 1, 0),
                    code=codes.SYNTAX_ERROR.code,
                    message=f"Helper module {rel} does not parse: {exc.msg}; fix the syntax.",
                    file=rel,
                )
            )
    return found


def check_draft(draft: Draft) -> CheckReport:
    """Admission + lint + annotation diagnostics for a loaded draft."""
    diagnostics = check_source(draft.source, file=ENTRY_FILE)
    diagnostics += check_durability(draft.source, draft.manifest.relay_durability, file=ENTRY_FILE)
    diagnostics += parse_annotations(draft.source, relay=draft.name).diagnostics
    diagnostics += _helper_diagnostics(draft)
    diagnostics.sort(key=lambda d: (d.file != ENTRY_FILE, d.file, d.line, d.col, d.code))
    return CheckReport(draft.name, entrypoint_kind(draft.source), diagnostics)


def check(workspace: Workspace, target: str) -> CheckReport:
    """``relay check TARGET``."""
    return check_draft(workspace.resolve_target(target))


def replay(
    workspace: Workspace, relay: str, runs: list[str] | None = None, *, release: str | None = None
) -> list[Any]:
    """``relay check NAME --replay [RUN ...]``: each run's history replayed on the draft (or
    ``release``) in a sandbox; a list of ``runner.replay.ReplayReport``."""
    from relay_notebook.runner.replay import replay_check

    return replay_check(workspace, relay, runs, release=release)


def graph_of_draft(draft: Draft) -> FlowGraph:
    """The flow graph of a draft, laid out. Legacy annotations win when they form a valid graph."""
    annotated = parse_annotations(draft.source, relay=draft.name)
    if annotated.graph is not None:
        result = annotated.graph
    else:
        result = build_flow_graph(draft.source, relay=draft.name)
        if annotated.found:
            result.notes.append(
                "The # @relay annotations are invalid, so the graph is drawn from the code; run "
                f"'relay check {draft.name}' for how to fix them."
            )
    return layout_graph(result)


def graph(workspace: Workspace, target: str) -> FlowGraph:
    """``relay graph TARGET``."""
    return graph_of_draft(workspace.resolve_target(target))


def publish(workspace: Workspace, target: str) -> PublishResult:
    """``relay publish TARGET``: admission first, then freeze; identical content is idempotent."""
    draft = workspace.resolve_target(target)
    report = check_draft(draft)
    if not report.ok:
        raise AdmissionError(draft.name, report.diagnostics)
    release, created = freeze_release(draft, workspace)
    return PublishResult(release, created, report, _replay_in_flight(workspace, release, created))


#: run statuses a recovery can still continue: the runs a new release must replay
_IN_FLIGHT = frozenset({"interrupted", "needs_reconciliation"})


def _replay_in_flight(workspace: Workspace, release: Release, created: bool) -> list[Any]:
    """The previous release's in-flight runs, replayed on ``release`` (publishing warns)."""
    from relay_notebook.errors import RelayError
    from relay_notebook.record.folders import list_run_folders
    from relay_notebook.runner.replay import replay_check

    previous = [r for r in list_releases(workspace, release.relay) if r.version < release.version]
    if not created or not previous:
        return []
    version = previous[-1].version
    ids = []
    for folder in list_run_folders(workspace, release.relay):
        try:
            meta = folder.read_meta()
        except RelayError:
            continue
        if (
            meta.get("status") in _IN_FLIGHT
            and (meta.get("release") or {}).get("version") == version
        ):
            ids.append(folder.run_id)
    return replay_check(workspace, release.relay, ids, release=release.ref) if ids else []


def releases(workspace: Workspace, name: str) -> list[Release]:
    """``relay releases NAME``: oldest first. Raises if the relay does not exist."""
    workspace.load_draft(name)
    return list_releases(workspace, name)


def verify(workspace: Workspace, name: str, ref: str | None = None) -> list[VerifyReport]:
    """``relay verify NAME [RELEASE]``: one report per release checked (all when no ref)."""
    workspace.load_draft(name)
    if ref is None:
        found = list_releases(workspace, name)
        if not found:
            resolve_release(workspace, name)  # raises the helpful "no releases yet" error
        return [verify_release(r) for r in found]
    return [verify_release(resolve_release(workspace, name, ref))]


def run(
    workspace: Workspace,
    target: str,
    *,
    run_input: Any = None,
    release: str | None = None,
    crash: str | None = None,
    on_event: EventCallback | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
) -> RunHandle:
    """``relay run TARGET``: admission, then attempt 1 in a child process; returns at once."""
    draft, crash_spec = _admit(workspace, target, crash, release)
    return start_run(
        workspace,
        draft,
        run_input=run_input,
        release=release,
        crash=crash_spec,
        on_event=on_event,
        deadline_s=deadline_s,
        backend=backend,
    )


def _admit(
    workspace: Workspace, target: str, crash: str | None, release: str | None
) -> tuple[Draft, CrashSpec | None]:
    draft = workspace.resolve_target(target)
    crash_spec = parse_crash_spec(crash) if crash is not None else None
    report = check_draft(draft)
    if not report.ok:
        raise AdmissionError(draft.name, report.diagnostics)
    if crash_spec is not None:
        source = draft.source
        if release is not None:  # the crash point must exist in the code that will run
            frozen = resolve_release(workspace, draft.name, release)
            source = read_source(frozen.folder / ENTRY_FILE)
        _check_crash_step(source, draft.name, crash_spec)
    return draft, crash_spec


@dataclass(frozen=True)
class QueuedRun:
    """A run waiting for (or taken by) a worker; ``wait`` returns its outcome."""

    run_id: str
    relay: str
    invocation_id: str
    backend: Backend

    def wait(self, timeout: float | None = None) -> RunOutcome:
        """Block until a worker has finished with the run; ``TimeoutError`` after ``timeout``."""
        from relay_notebook.runner.pool import wait_for_invocation

        done = wait_for_invocation(self.backend, self.invocation_id, timeout)
        if done is None:
            raise TimeoutError(f"run {self.run_id} is still queued or running")
        return RunOutcome(
            self.run_id,
            self.relay,
            str(done.get("status")),
            int(done.get("attempt") or 0),
            done.get("result"),
            done.get("error"),
            list(done.get("executed") or []),
            list(done.get("reused") or []),
        )


def require_pool_backend(backend: Backend | None, what: str) -> Backend:
    """``backend`` (the caller's resolved setting), which must be PostgreSQL for the pool."""
    backend = backend if backend is not None else Backend(None)
    if not backend.is_postgres:
        raise QueueUnavailableError(
            f"{what} needs a PostgreSQL database shared with the workers: set "
            f"RELAY_DATABASE_URL=postgresql://USER@HOST:PORT/DBNAME (or pass --database-url)."
        )
    return backend


def enqueue(
    workspace: Workspace,
    target: str,
    *,
    run_input: Any = None,
    release: str | None = None,
    crash: str | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
    backend: Backend | None = None,
) -> QueuedRun:
    """``relay run TARGET --queue``: admission, then the run waits on the workers' queue."""
    from relay_notebook.runner.pool import enqueue_run

    backend = require_pool_backend(workspace_backend(workspace, backend), "relay run --queue")
    draft, crash_spec = _admit(workspace, target, crash, release)
    folder = create_run(
        workspace,
        draft,
        run_input=run_input,
        release=release,
        deadline_s=deadline_s,
        backend=backend,
        queued=True,
    )
    invocation = enqueue_run(backend, folder.run_id, crash=crash_spec)
    return QueuedRun(folder.run_id, folder.relay, invocation, backend)


def workers(backend: Backend | None) -> list[Any]:
    """``relay workers``: every worker's lease and how many runs it executes (``backend``:
    the pool's database, e.g. ``Settings.backend()``)."""
    from relay_notebook.runner.pool import list_workers

    return list_workers(require_pool_backend(backend, "relay workers"))


def _crash_points(flow: FlowGraph) -> dict[str, set[str]]:
    """What ``--crash`` can name in a relay, by prefix ("" for a step's name or function)."""
    points: dict[str, set[str]] = {"": set(), "step": set(), "agent": set(), "mcp": set()}
    for n in flow.nodes:
        if n.type == "step":
            points[""].add(n.label)
            if "function" in n.details:
                points[""].add(str(n.details["function"]))
            if n.details.get("legacy"):
                points["step"].add(str(n.details.get("name", n.label)))
        elif n.type == "agent":
            points["agent"].add(str(n.details.get("name", n.label)))
        elif n.type == "mcp":
            points["mcp"].add(str(n.details.get("server", n.label)))
    return points


def _check_crash_step(source: str, relay: str, spec: CrashSpec) -> None:
    """Refuse a crash point the relay cannot reach: a call the flow graph does not know.

    A platform call (``agent:``, ``mcp:``, ``step:``) is refused only when the graph followed
    every call, since a call it could not follow may be the one named.
    """
    flow = build_flow_graph(source, relay=relay)
    points = _crash_points(flow)
    prefix, _, rest = spec.step.partition(":") if ":" in spec.step else ("", "", spec.step)
    wanted = rest.split(".", 1)[0] if prefix == "mcp" else rest
    if wanted in points.get(prefix, set()):
        return
    if prefix and any(n.type == "unresolved" for n in flow.nodes):
        return
    known = sorted(points[""]) + [
        f"{kind}:{name}" + (".TOOL" if kind == "mcp" else "")
        for kind in ("agent", "mcp", "step")
        for name in sorted(points[kind])
    ]
    what = {"": "step", "agent": "agent call", "mcp": "MCP server", "step": "ctx.step call"}
    raise InvalidCrashSpecError(
        f"Cannot crash {spec}: relay {relay!r} has no {what.get(prefix, 'call')} named "
        f"{wanted!r} (it can crash at: {', '.join(known) if known else 'none found'})."
    )


def recover(
    workspace: Workspace,
    run_id: str,
    *,
    on_event: EventCallback | None = None,
    backend: Backend | None = None,
    accept_lost_checkpoints: bool = False,
) -> RunHandle:
    """``relay recover RUN [--accept-lost-checkpoints]``: the next attempt on the same folder
    and workflow id."""
    return start_recovery(
        workspace, run_id, on_event=on_event, backend=backend,
        accept_lost_checkpoints=accept_lost_checkpoints,
    )  # fmt: skip


def runs(workspace: Workspace, relay: str | None = None) -> list[RunSummary]:
    """``relay runs [NAME]``."""
    return list_runs(workspace, relay)


def relays(workspace: Workspace) -> list[RelaySummary]:
    """``relay relays``: every relay, a draft that fails admission marked broken."""
    from relay_notebook.catalog import list_relays

    return list_relays(workspace)


def relay_summary(workspace: Workspace, name: str) -> RelaySummary:
    """One relay of ``relay relays`` (raises if it does not exist)."""
    from relay_notebook.catalog import summarize_relay

    workspace.load_draft(name)
    return summarize_relay(workspace, name)


def broken_drafts(workspace: Workspace, relay: str | None = None) -> list[RelaySummary]:
    """The relays (or ``relay``) whose drafts fail admission, for the ``runs`` listings."""
    found = [relay_summary(workspace, relay)] if relay else relays(workspace)
    return [r for r in found if r.broken]


def delete(
    workspace: Workspace, target: str, *, force: bool = False, backend: Backend | None = None
) -> Deleted:
    """``relay delete NAME|RUN [--force]``: see ``relay_notebook.deletion``."""
    from relay_notebook.deletion import delete as delete_target

    return delete_target(workspace, target, force=force, backend=backend)


def logs(workspace: Workspace, run_id: str) -> RunLog:
    """``relay logs RUN``."""
    return read_run_log(workspace, run_id)


def grant(workspace: Workspace, name: str) -> None:
    """``relay grant NAME``: restore a relay's access."""
    workspace.load_draft(name)
    AccessPolicy(workspace.home).grant(name)


def revoke(workspace: Workspace, name: str) -> None:
    """``relay revoke NAME``: deny new attempts and platform calls of a relay, live."""
    workspace.load_draft(name)
    AccessPolicy(workspace.home).revoke(name)


def pending_calls(workspace: Workspace, run_id: str) -> list[CallState]:
    """The uncertain calls that stop ``run_id`` (``relay reconcile RUN`` without an action)."""
    folder = find_run(workspace, run_id)
    return Journal(folder.ipc / "journal.jsonl").blocking()


def reconcile(
    workspace: Workspace,
    run_id: str,
    *,
    result: Any = None,
    retry: bool = False,
    key: str | None = None,
) -> CallState:
    """``relay reconcile RUN --result JSON | --retry [--key KEY]``: resolve one uncertain call."""
    folder = find_run(workspace, run_id)
    journal = Journal(folder.ipc / "journal.jsonl")
    pending = journal.blocking()
    if not pending:
        raise NothingToReconcileError(
            f"Run {run_id} has no uncertain call to reconcile. Recover it with: relay recover "
            f"{run_id}"
        )
    if key is None:
        if len(pending) > 1:
            keys = ", ".join(p.key for p in pending)
            raise NothingToReconcileError(
                f"Run {run_id} has {len(pending)} uncertain calls ({keys}); pick one with --key."
            )
        chosen = pending[0]
    else:
        matches = [p for p in pending if p.key == key]
        if not matches:
            keys = ", ".join(p.key for p in pending)
            raise NothingToReconcileError(
                f"Run {run_id} has no uncertain call with key {key!r}; pending: {keys}."
            )
        chosen = matches[0]
    journal.resolve(chosen.key, result=result, retry=retry)
    return journal.state(chosen.key)


def vault_set(workspace: Workspace, name: str, value: str) -> None:
    """``relay vault set NAME``: store a secret (the value never reaches a run folder)."""
    Vault(workspace.home).set(name, value)


def vault_names(workspace: Workspace) -> list[str]:
    """The names (never the values) of the workspace's secrets."""
    return Vault(workspace.home).names()
