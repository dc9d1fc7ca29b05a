"""The REST API's operations on one workspace, as JSON-ready dicts (no HTTP, no tornado here).

Design note: every method is a plain blocking call on the command layer, made from a worker
thread by the handlers so the server's event loop never waits on disk, SQLite or a child
process start. Runs started here are supervised by this process: their ``RunHandle`` is kept
until the attempt ends (its reader thread writes the outcome to ``run.json``), and nothing
ever calls ``wait``. Request bodies are validated here, so the rules hold for any caller.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from relay_notebook import commands
from relay_notebook.commands import inputs, run_events, time_travel
from relay_notebook.commands.runs import RunHandle
from relay_notebook.commands.settings import Settings
from relay_notebook.errors import InvalidRequestError
from relay_notebook.server.idempotency import IdempotencyStore, fingerprint, validate_key
from relay_notebook.workspace import Draft, list_releases
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["RelayService"]

_RUN_FIELDS = {"input", "release", "crash"}
_RECONCILE_FIELDS = {"result", "retry", "key"}
_FORK_FIELDS = {"from", "input", "set", "release", "draft"}


def _check_fields(body: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequestError(
            f"Unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
            f"the {what} body; expected only {', '.join(sorted(allowed))}."
        )


def _optional_str(body: dict[str, Any], key: str, what: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidRequestError(
            f"Field {key!r} of the {what} body must be a string or null, got "
            f"{type(value).__name__} {json.dumps(value)[:60]}."
        )
    return value


class RelayService:
    """List, publish, run, recover and reconcile the relays of one workspace."""

    def __init__(self, settings: Settings | Path) -> None:
        """``settings`` resolved by the extension (a bare path: that workspace, defaults)."""
        if not isinstance(settings, Settings):
            settings = Settings(home=str(settings))
        self.workspace = settings.workspace()
        self._idempotency = IdempotencyStore(self.workspace.home)
        self._handles: dict[str, RunHandle] = {}
        self._lock = threading.Lock()

    # -- relays and releases ------------------------------------------------------------------

    def _draft(self, name: str) -> Draft:
        """The draft called ``name``; a name is never read as a file path here."""
        return self.workspace.load_draft(name)

    def _access(self, name: str) -> str:
        return "granted" if AccessPolicy(self.workspace.home).is_granted(name) else "revoked"

    def list_relays(self) -> list[dict[str, Any]]:
        """``GET relay/api/relays``: a draft that fails admission is ``broken``, with its
        first diagnostic as ``problem``."""
        return [r.to_dict() for r in commands.relays(self.workspace)]

    def delete_relay(self, name: str, *, force: bool) -> dict[str, Any]:
        """``DELETE relay/api/relays/{name}[?force=true]``: refused while it has runs unless
        ``force`` (then none may be live)."""
        self._draft(name)
        from relay_notebook.commands.relays import delete_relay

        return delete_relay(self.workspace, name, force=force).to_dict()

    def delete_run(self, run_id: str) -> dict[str, Any]:
        """``DELETE relay/api/runs/{run_id}``: refused while an attempt executes it; its
        release is kept."""
        from relay_notebook.commands.relays import delete_run

        return delete_run(self.workspace, run_id).to_dict()

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

    def releases(self, name: str) -> list[dict[str, Any]]:
        """``GET relay/api/relays/{name}/releases``: oldest first."""
        self._draft(name)
        return [r.to_dict() for r in commands.releases(self.workspace, name)]

    def publish(self, name: str) -> tuple[dict[str, Any], bool]:
        """``POST relay/api/relays/{name}/releases``: the release and whether it is new."""
        self._draft(name)
        result = commands.publish(self.workspace, name)
        return result.to_dict(), result.created

    def set_access(self, name: str, *, granted: bool) -> dict[str, Any]:
        """``POST relay/api/relays/{name}/grant`` and ``.../revoke``."""
        self._draft(name)
        (commands.grant if granted else commands.revoke)(self.workspace, name)
        return {"relay": name, "access": self._access(name)}

    # -- runs ---------------------------------------------------------------------------------

    def _keep(self, handle: RunHandle) -> None:
        with self._lock:
            for run_id in [r for r, h in self._handles.items() if h.done()]:
                del self._handles[run_id]
            if not handle.done():
                self._handles[handle.run_id] = handle

    def _brief(self, run_id: str) -> dict[str, Any]:
        return commands.run_brief(self.workspace, run_id)

    def _run_exists(self, run_id: str) -> bool:
        return commands.run_exists(self.workspace, run_id)

    def start_run(
        self, name: str, body: dict[str, Any], idempotency_key: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """``POST relay/api/relays/{name}/runs``: ``(run, started)``; a known key starts none."""
        _check_fields(body, _RUN_FIELDS, "run request")
        release = _optional_str(body, "release", "run request")
        crash = _optional_str(body, "crash", "run request")
        if body.get("input") is not None:
            inputs.checked_value(body["input"], "Field 'input' of the run request")
        self._draft(name)

        def start() -> str:
            handle = commands.run(
                self.workspace, name, run_input=body.get("input"), release=release, crash=crash
            )
            self._keep(handle)
            return handle.run_id

        if idempotency_key is None:
            return self._brief(start()), True
        key = validate_key(idempotency_key)
        # no input and null input are both the empty object INPUT gets, so they are one request
        fields = {f: body.get(f) for f in sorted(_RUN_FIELDS)}
        fields["input"] = {} if fields["input"] is None else fields["input"]
        digest = fingerprint(fields)
        run_id, started = self._idempotency.run_once(name, key, digest, start, self._run_exists)
        return self._brief(run_id), started

    def list_runs(self, relay: str | None) -> list[dict[str, Any]]:
        """``GET relay/api/runs[?relay=NAME]``: oldest first."""
        if relay is not None:
            self._draft(relay)
        return [s.to_dict() for s in commands.runs(self.workspace, relay)]

    def run(self, run_id: str) -> dict[str, Any]:
        """``GET relay/api/runs/{run_id}``: status, result or error, attempts, steps, trace."""
        return commands.run_detail(self.workspace, run_id)

    def recover(self, run_id: str) -> tuple[dict[str, Any], bool]:
        """``POST relay/api/runs/{run_id}/recover``: ``(run, started)``.

        When no attempt starts (the run finished, access is revoked, or an uncertain call
        waits for reconciliation) the outcome comes back at once with ``started`` false.
        """
        handle = commands.recover(self.workspace, run_id)
        if handle.outcome is not None:
            return handle.outcome.to_dict(), False
        self._keep(handle)
        return self._brief(run_id), True

    def send_message(
        self, run_id: str, body: dict[str, Any], idempotency_key: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """``POST relay/api/runs/{run_id}/messages``: ``(delivery, resumed)``.

        The body is ``{"topic": T, "message": JSON}``. A known ``Idempotency-Key`` delivers
        nothing again (``duplicate`` true); a finished run is refused (``run-not-waiting``).
        """
        from relay_notebook.commands import waiting

        _check_fields(body, {"topic", "message"}, "message request")
        topic = body.get("topic")
        if not isinstance(topic, str) or not topic:
            raise InvalidRequestError(
                "Field 'topic' of the message request must be a non-empty string: the topic "
                'the run waits on, e.g. {"topic": "approval", "message": {"approved": true}}.'
            )
        if "message" not in body:
            raise InvalidRequestError(
                "The message request has no field 'message': send the JSON value the run "
                'receives, e.g. {"topic": "approval", "message": {"approved": true}}.'
            )
        key = validate_key(idempotency_key) if idempotency_key is not None else None
        delivery = waiting.send(self.workspace, run_id, topic, body["message"], idempotency_key=key)
        if delivery.handle is not None:
            self._keep(delivery.handle)
        return delivery.to_dict(), delivery.handle is not None

    def lineage(self, run_id: str) -> dict[str, Any]:
        """``GET relay/api/runs/{run_id}/lineage``: the fork tree the run belongs to, from the
        run it was first forked from (each node: run id, status, fork origin, its forks)."""
        tree: dict[str, Any] = time_travel.lineage(self.workspace, run_id).to_dict()
        return tree

    def events(self, run_id: str) -> dict[str, Any]:
        """``GET relay/api/runs/{run_id}/events``: what the run published, as it is now: each
        event's latest value, every set_event call, stream values, messages sent to it."""
        return run_events.read_run_events(self.workspace, run_id).to_dict()

    def fork(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST relay/api/runs/{run_id}/fork``: a new run from one of RUN's calls (earlier
        calls copied, the rest run fresh); its first attempt starts at once."""

        _check_fields(body, _FORK_FIELDS, "fork request")
        call = _optional_str(body, "from", "fork request")
        if not call:
            raise InvalidRequestError(
                'A fork request needs "from": the call that runs fresh, e.g. "price#2".'
            )
        sets = body.get("set") or {}
        if not isinstance(sets, dict) or not all(isinstance(k, str) for k in sets):
            raise InvalidRequestError(
                'Field "set" of the fork request must map calls to outputs, e.g. {"price#1": 8}.'
            )
        draft = body.get("draft", False)
        if not isinstance(draft, bool):
            raise InvalidRequestError('Field "draft" of the fork request must be true or false.')
        given = "input" in body
        if given:
            inputs.checked_value(body["input"], "Field 'input' of the fork request")
        for key, value in sets.items():
            inputs.checked_value(value, f"The output given for {key} in the fork request")
        handle = time_travel.fork(
            self.workspace, run_id, from_call=call, run_input=body.get("input"),
            input_given=given, sets=sets, release=_optional_str(body, "release", "fork request"),
            draft=draft,
        )  # fmt: skip
        self._keep(handle)
        return self._brief(handle.run_id)

    def reconcile(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST relay/api/runs/{run_id}/reconcile``: resolve one uncertain call."""
        _check_fields(body, _RECONCILE_FIELDS, "reconcile request")
        retry = body.get("retry", False)
        if not isinstance(retry, bool):
            raise InvalidRequestError(
                f"Field 'retry' of the reconcile request must be true or false, got "
                f"{json.dumps(retry)[:60]}."
            )
        if retry == ("result" in body):
            raise InvalidRequestError(
                'A reconcile request needs exactly one of {"result": JSON} (the call took '
                'effect with this result) or {"retry": true} (it did not; run it again).'
            )
        key = _optional_str(body, "key", "reconcile request")
        if "result" in body:
            inputs.checked_value(body["result"], "Field 'result' of the reconcile request")
        state = commands.reconcile(
            self.workspace, run_id, result=body.get("result"), retry=retry, key=key
        )
        return {"run_id": run_id, "key": state.key, "state": state.state, "result": state.result}

    # -- supervision --------------------------------------------------------------------------

    def live_runs(self) -> list[str]:
        """Runs with an attempt this process supervises right now."""
        with self._lock:
            return sorted(r for r, h in self._handles.items() if not h.done())

    def interrupt_all(self, grace: float = 2.0) -> list[str]:
        """Stop every live attempt (server shutdown): each ends ``interrupted``, recoverable."""
        with self._lock:
            live = [h for h in self._handles.values() if not h.done()]
        threads = [threading.Thread(target=h.cancel, args=(grace,)) for h in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sorted(h.run_id for h in live)
