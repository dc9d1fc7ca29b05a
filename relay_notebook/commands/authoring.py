"""Authoring commands: check, graph, publish, releases and verify (static: nothing runs).

``commands`` re-exports them; the CLI, the magics and the server call them from there. Only
the replay check (``replay``, and publishing's check of in-flight runs) starts processes, in
``runner.replay``'s sandbox.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworks.errors import MCPServersError
from agentworks.mcp_servers import MCP_SERVERS_FILE, load_mcp_servers
from relay_notebook.commands.mcp_secrets import unset_secret_diagnostics
from relay_notebook.errors import AdmissionError, codes
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.runner.replay import replay_lines, replay_summary
from relay_notebook.source.admission import check_durability, check_source, entrypoint_kind
from relay_notebook.source.annotations import parse_annotations
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import FlowGraph
from relay_notebook.source.layout import layout_graph
from relay_notebook.source.lint import gc_paused, parse
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

__all__ = [
    "CheckReport",
    "FlowGraph",
    "PublishResult",
    "RunFlow",
    "check",
    "check_draft",
    "graph",
    "graph_of_draft",
    "graph_of_source",
    "publish",
    "releases",
    "replay",
    "replay_lines",
    "replay_summary",
    "run_flow",
    "verify",
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


def _mcp_servers_diagnostics(draft: Draft) -> list[Diagnostic]:
    """The workspace's ``mcp_servers.yaml``, when invalid, as one line: an error for a relay
    whose code mentions MCP (it would fail at run time), a warning for the others."""
    try:
        load_mcp_servers(draft.folder.parent)
    except MCPServersError as exc:
        sources = [draft.source] + [
            (draft.folder / rel).read_text(encoding="utf-8", errors="replace")
            for rel in draft.files()
            if rel.endswith(".py") and rel != ENTRY_FILE
        ]
        uses_mcp = any("mcp" in text.lower() for text in sources)
        return [
            Diagnostic(
                line=max(exc.line, 1),
                col=0,
                code=codes.MCP_SERVERS_INVALID.code,
                message=f"The workspace's {MCP_SERVERS_FILE} is invalid: {exc.problem} Then "
                f"run 'relay check {draft.name}'.",
                severity="error" if uses_mcp else "warning",
                file=f"../{MCP_SERVERS_FILE}",
            )
        ]
    return []


def check_draft(draft: Draft) -> CheckReport:
    """Admission + lint + annotation diagnostics for a loaded draft, and the workspace's MCP
    server declarations it would run with."""
    try:  # parsed once for every check below
        module: str | ast.Module = parse(draft.source)
    except SyntaxError:
        module = draft.source  # check_source reports it
    with gc_paused():  # the tree has no cycles: collections would only walk it again and again
        diagnostics = check_source(module, file=ENTRY_FILE)
    diagnostics += check_durability(module, draft.manifest.relay_durability, file=ENTRY_FILE)
    diagnostics += parse_annotations(draft.source, relay=draft.name).diagnostics
    diagnostics += _helper_diagnostics(draft)
    diagnostics += _mcp_servers_diagnostics(draft)
    diagnostics += unset_secret_diagnostics(draft)
    diagnostics.sort(key=lambda d: (d.file != ENTRY_FILE, d.file, d.line, d.col, d.code))
    return CheckReport(draft.name, entrypoint_kind(module), diagnostics)


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
    return graph_of_source(draft.source, draft.name)


def graph_of_source(source: str, relay: str) -> FlowGraph:
    """The flow graph of ``relay``'s entry file ``source``, laid out (annotations first)."""
    annotated = parse_annotations(source, relay=relay)
    if annotated.graph is not None:
        result = annotated.graph
    else:
        result = build_flow_graph(source, relay=relay)
        if annotated.found:
            result.notes.append(
                "The # @relay annotations are invalid, so the graph is drawn from the code; run "
                f"'relay check {relay}' for how to fix them."
            )
    return layout_graph(result)


@dataclass(frozen=True)
class RunFlow:
    """The flow graph of the code a run ran, and where that code came from (``code``, the run
    header's ``code``: ``kind`` release or draft, its ``version``; for a draft's run whether the
    draft ``changed`` since the run started, and whether the run ``kept`` its code)."""

    relay: str
    graph: FlowGraph
    code: dict[str, Any]


def crash_steps(flow: FlowGraph) -> list[str]:
    """The step names a view's crash test can stop at, in the graph's order: its step nodes'
    (a call inside another step is not one), as the view's picker lists them."""
    names: list[str] = []
    for node in flow.nodes:
        if node.type != "step" or node.details.get("in_step"):
            continue
        name = str(node.details.get("name", node.label))
        if name not in names:
            names.append(name)
    return names


def _read_entry(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def run_flow(workspace: Workspace, run_id: str) -> RunFlow:
    """The flow graph ``run_id`` is drawn on: its release's, or its draft's as the run started
    (kept in the run folder), never the draft as it is now unless it is the same code."""
    from relay_notebook.errors import RelayError, RelayNotFoundError
    from relay_notebook.record.bindings import draft_code
    from relay_notebook.record.folders import find_run
    from relay_notebook.record.run_record import RunRecord

    folder = find_run(workspace, run_id)
    record = RunRecord.load(folder)
    relay = record.relay
    if record.release is not None:
        code: dict[str, Any] = {"kind": "release", "version": record.release.get("version")}
        source = _read_entry(Path(record.code_dir) / ENTRY_FILE)
        if source is not None:
            return RunFlow(relay, graph_of_source(source, relay), code)
    bound = record.bindings.get("source")
    try:
        draft: Draft | None = workspace.load_draft(relay)
    except RelayError:
        draft = None  # the relay's draft is gone or unreadable: the kept code still draws
    changed = draft is None or draft_code(draft).source_hash != bound
    code = {"kind": "draft", "changed": changed, "kept": True}
    if changed and draft is not None:  # "run again" runs the draft now: crash at its steps
        code["draft_steps"] = crash_steps(graph_of_draft(draft))
    source = _read_entry(folder.code)
    if source is None and not changed and draft is not None:
        source = draft.source  # a run from before runs kept their code; the draft is the same
    if source is None:  # a release frozen from the same files holds them
        same = [r for r in list_releases(workspace, relay) if r.hash == bound]
        source = _read_entry(same[0].folder / ENTRY_FILE) if same else None
    if source is None:
        if draft is None:
            raise RelayNotFoundError(
                f"Run {run_id} cannot be drawn: its code was not kept and relay {relay} has no "
                f"draft now. See its record with: relay logs {run_id}"
            )
        code["kept"] = False
        source = draft.source
    return RunFlow(relay, graph_of_source(source, relay), code)


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
_IN_FLIGHT = frozenset({"interrupted", "needs_reconciliation", "waiting"})


def _replay_in_flight(workspace: Workspace, release: Release, created: bool) -> list[Any]:
    """The previous release's in-flight runs, replayed on ``release`` (publishing warns)."""
    from relay_notebook.errors import RelayError
    from relay_notebook.record.folders import list_run_folders
    from relay_notebook.record.run_record import RunRecord
    from relay_notebook.runner.replay import replay_check

    previous = [r for r in list_releases(workspace, release.relay) if r.version < release.version]
    if not created or not previous:
        return []
    version = previous[-1].version
    ids = []
    for folder in list_run_folders(workspace, release.relay):
        try:
            record = RunRecord.load(folder)
        except RelayError:
            continue
        if record.status in _IN_FLIGHT and (record.release or {}).get("version") == version:
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
