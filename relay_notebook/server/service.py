"""The REST API's operations on one workspace, as JSON-ready dicts (no HTTP, no tornado here).

Design note: every method is a plain blocking call on the command layer, made from a worker
thread by the handlers so the server's event loop never waits on disk, SQLite or a child
process start. Runs started here are supervised by this process: their ``RunHandle`` is kept
until the attempt ends (its reader thread writes the outcome to ``run.json``), and nothing
ever calls ``wait``. Request bodies are validated here, so the rules hold for any caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from relay_notebook import commands
from relay_notebook.commands import api_requests, run_events, time_travel
from relay_notebook.commands.authoring import PublishResult
from relay_notebook.commands.live_runs import LiveRuns
from relay_notebook.commands.relays import Deleted, RelaySummary
from relay_notebook.commands.run_events import RunEvents
from relay_notebook.commands.runs import RunBrief, RunOutcome, RunSummary
from relay_notebook.commands.settings import Settings
from relay_notebook.commands.time_travel import LineageNode
from relay_notebook.commands.waiting import Delivery
from relay_notebook.server.idempotency import IdempotencyStore, fingerprint, validate_key
from relay_notebook.workspace import Draft, Release, list_releases
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["AccessState", "Reconciled", "RelayService"]


class AccessState(TypedDict):
    """A relay's access after a grant or revoke: ``granted`` or ``revoked``."""

    relay: str
    access: str


class Reconciled(TypedDict):
    """An uncertain call once settled: its key, its journal state and the result given."""

    run_id: str
    key: str
    state: str
    result: Any


class RelayService:
    """List, publish, run, recover and reconcile the relays of one workspace.

    Methods return the command layer's typed records; the handlers turn each into JSON with
    its own ``to_dict``."""

    def __init__(self, settings: Settings | Path) -> None:
        """``settings`` resolved by the extension (a bare path: that workspace, defaults)."""
        if not isinstance(settings, Settings):
            settings = Settings(home=str(settings))
        self.workspace = settings.workspace()
        self._idempotency = IdempotencyStore(self.workspace.home)
        self._live = LiveRuns()

    # -- relays and releases ------------------------------------------------------------------

    def _draft(self, name: str) -> Draft:
        """The draft called ``name``; a name is never read as a file path here."""
        return self.workspace.load_draft(name)

    def _access(self, name: str) -> str:
        return "granted" if AccessPolicy(self.workspace.home).is_granted(name) else "revoked"

    def list_relays(self) -> list[RelaySummary]:
        """``GET relay/api/relays``: a draft that fails admission is ``broken``, with its
        first diagnostic as ``problem``."""
        return commands.relays(self.workspace)

    def delete_relay(self, name: str, *, force: bool) -> Deleted:
        """``DELETE relay/api/relays/{name}[?force=true]``: refused while it has runs unless
        ``force`` (then none may be live)."""
        self._draft(name)
        from relay_notebook.commands.relays import delete_relay

        return delete_relay(self.workspace, name, force=force)

    def delete_run(self, run_id: str) -> Deleted:
        """``DELETE relay/api/runs/{run_id}``: refused while an attempt executes it; its
        release is kept."""
        from relay_notebook.commands.relays import delete_run

        return delete_run(self.workspace, run_id)

    def relay(self, name: str) -> dict[str, Any]:
        """``GET relay/api/relays/{name}``: manifest, releases, flow graph and check report."""
        draft = self._draft(name)
        return {
            "name": draft.name,
            "manifest": draft.manifest.to_dict(),
            "access": self._access(name),
            "releases": [r.to_dict() for r in list_releases(self.workspace, name)],
            "graph": commands.graph_of_draft(draft).to_dict(),
            "check": commands.check_draft(draft).to_dict(),
        }

    def releases(self, name: str) -> list[Release]:
        """``GET relay/api/relays/{name}/releases``: oldest first."""
        self._draft(name)
        return commands.releases(self.workspace, name)

    def publish(self, name: str) -> PublishResult:
        """``POST relay/api/relays/{name}/releases``: the release (``created`` if it is new)."""
        self._draft(name)
        return commands.publish(self.workspace, name)

    def set_access(self, name: str, *, granted: bool) -> AccessState:
        """``POST relay/api/relays/{name}/grant`` and ``.../revoke``."""
        self._draft(name)
        (commands.grant if granted else commands.revoke)(self.workspace, name)
        return AccessState(relay=name, access=self._access(name))

    # -- runs ---------------------------------------------------------------------------------

    def _brief(self, run_id: str) -> RunBrief:
        return commands.run_brief(self.workspace, run_id)

    def _run_exists(self, run_id: str) -> bool:
        return commands.run_exists(self.workspace, run_id)

    def start_run(
        self, name: str, body: dict[str, Any], idempotency_key: str | None = None
    ) -> tuple[RunBrief, bool]:
        """``POST relay/api/relays/{name}/runs``: ``(run, started)``; a known key starts none."""
        request = api_requests.run_request(body)
        self._draft(name)

        def start() -> str:
            handle = commands.run(
                self.workspace, name, run_input=request.run_input, release=request.release,
                crash=request.crash,
            )  # fmt: skip
            self._live.keep(handle)
            return handle.run_id

        if idempotency_key is None:
            return self._brief(start()), True
        key = validate_key(idempotency_key)
        digest = fingerprint(request)
        run_id, started = self._idempotency.run_once(name, key, digest, start, self._run_exists)
        return self._brief(run_id), started

    def list_runs(self, relay: str | None) -> list[RunSummary]:
        """``GET relay/api/runs[?relay=NAME]``: oldest first."""
        if relay is not None:
            self._draft(relay)
        return commands.runs(self.workspace, relay)

    def run(self, run_id: str) -> dict[str, Any]:
        """``GET relay/api/runs/{run_id}``: status, result or error, attempts, steps, trace."""
        return commands.run_detail(self.workspace, run_id)

    def recover(self, run_id: str) -> RunOutcome | RunBrief:
        """``POST relay/api/runs/{run_id}/recover``: the run, once its next attempt started.

        When no attempt starts (the run finished, access is revoked, or an uncertain call
        waits for reconciliation) its outcome comes back at once.
        """
        handle = commands.recover(self.workspace, run_id)
        if handle.outcome is not None:
            return handle.outcome
        self._live.keep(handle)
        return self._brief(run_id)

    def send_message(
        self, run_id: str, body: dict[str, Any], idempotency_key: str | None = None
    ) -> Delivery:
        """``POST relay/api/runs/{run_id}/messages``: the delivery (with the ``handle`` of the
        attempt it resumed, if any).

        The body is ``{"topic": T, "message": JSON}``. A known ``Idempotency-Key`` delivers
        nothing again (``duplicate`` true); a finished run is refused (``run-not-waiting``).
        """
        from relay_notebook.commands import waiting

        topic, message = api_requests.message_request(body)
        key = validate_key(idempotency_key) if idempotency_key is not None else None
        delivery = waiting.send(self.workspace, run_id, topic, message, idempotency_key=key)
        if delivery.handle is not None:
            self._live.keep(delivery.handle)
        return delivery

    def lineage(self, run_id: str) -> LineageNode:
        """``GET relay/api/runs/{run_id}/lineage``: the fork tree the run belongs to, from the
        run it was first forked from (each node: run id, status, fork origin, its forks)."""
        return time_travel.lineage(self.workspace, run_id)

    def events(self, run_id: str) -> RunEvents:
        """``GET relay/api/runs/{run_id}/events``: what the run published, as it is now: each
        event's latest value, every set_event call, stream values, messages sent to it."""
        return run_events.read_run_events(self.workspace, run_id)

    def fork(self, run_id: str, body: dict[str, Any]) -> RunBrief:
        """``POST relay/api/runs/{run_id}/fork``: a new run from one of RUN's calls (earlier
        calls copied, the rest run fresh); its first attempt starts at once."""

        request = api_requests.fork_request(body)
        handle = time_travel.fork(self.workspace, run_id, request)
        self._live.keep(handle)
        return self._brief(handle.run_id)

    def reconcile(self, run_id: str, body: dict[str, Any]) -> Reconciled:
        """``POST relay/api/runs/{run_id}/reconcile``: resolve one uncertain call."""
        request = api_requests.reconcile_request(body)
        state = commands.reconcile(
            self.workspace, run_id, result=request.result, retry=request.retry, key=request.key
        )
        return Reconciled(run_id=run_id, key=state.key, state=state.state, result=state.result)

    # -- supervision --------------------------------------------------------------------------

    def live_runs(self) -> list[str]:
        """Runs with an attempt this process supervises right now."""
        return self._live.run_ids()

    def interrupt_all(self, grace: float = 2.0) -> list[str]:
        """Stop every live attempt (server shutdown): each ends ``interrupted``, recoverable."""
        return self._live.interrupt_all(grace)
