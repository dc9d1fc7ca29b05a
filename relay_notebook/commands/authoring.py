"""Authoring commands: check, graph, publish, releases and verify (static: nothing runs).

``commands`` re-exports them; the CLI, the magics and the server call them from there. Only
the replay check (``replay``, and publishing's check of in-flight runs) starts processes, in
``runner.replay``'s sandbox.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from relay_notebook.errors import AdmissionError, codes
from relay_notebook.errors.diagnostics import Diagnostic
from relay_notebook.runner.replay import replay_lines
from relay_notebook.source.admission import check_durability, check_source, entrypoint_kind
from relay_notebook.source.annotations import parse_annotations
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

__all__ = [
    "CheckReport",
    "FlowGraph",
    "PublishResult",
    "check",
    "check_draft",
    "graph",
    "graph_of_draft",
    "publish",
    "releases",
    "replay",
    "replay_lines",
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
