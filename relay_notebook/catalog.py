"""The workspace's relays as ``relay relays``, ``%relay relays`` and ``GET relay/api/relays``
list them: releases, runs, access, and whether the draft is broken (fails admission)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay_notebook.errors import RelayError
from relay_notebook.record.folders import list_run_folders
from relay_notebook.workspace import Workspace, list_releases
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["RelaySummary", "list_relays", "summarize_relay"]


@dataclass(frozen=True)
class RelaySummary:
    """One relay of a listing; ``problem`` is the first admission error of a broken draft."""

    name: str
    releases: int
    latest: dict[str, Any] | None
    runs: int
    access: str
    broken: bool
    problem: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "releases": self.releases,
            "latest": self.latest,
            "runs": self.runs,
            "access": self.access,
            "broken": self.broken,
            "problem": self.problem,
        }

    def line(self) -> str:
        """One line of ``relay relays``."""
        latest = f"v{self.latest['version']}" if self.latest else "unpublished"
        head = (
            f"{self.name:<20} {latest:<12} releases {self.releases}  runs {self.runs:<4} "
            f"{self.access}"
        )
        return f"{head}  BROKEN: {self.problem}" if self.broken else head


def summarize_relay(workspace: Workspace, name: str) -> RelaySummary:
    """The listing entry of relay ``name`` (its draft is checked, never imported)."""
    from relay_notebook.commands import check_draft

    problem: str | None = None
    try:
        report = check_draft(workspace.load_draft(name))
    except RelayError as exc:  # an unreadable source or manifest is broken too
        problem = " ".join(exc.message.split())
    else:
        if report.errors:
            problem = report.errors[0].format()
    found = list_releases(workspace, name)
    latest = found[-1] if found else None
    return RelaySummary(
        name=name,
        releases=len(found),
        latest={"version": latest.version, "hash": latest.hash} if latest else None,
        runs=len(list_run_folders(workspace, name)),
        access="granted" if AccessPolicy(workspace.home).is_granted(name) else "revoked",
        broken=problem is not None,
        problem=problem,
    )


def list_relays(workspace: Workspace) -> list[RelaySummary]:
    """Every relay with a draft, by name."""
    return [summarize_relay(workspace, name) for name in workspace.list_relays()]
