"""Child side of the adapter: the agentworks Runtime, its authorization, and early stops.

Design note: some outcomes are not errors of the relay and must not be recorded by DBOS as
one (that would make the run terminal): a revoked relay (``denied``) and an uncertain call
(``needs_reconciliation``). For those the child writes its outcome and leaves the process at
once, so the workflow stays ``PENDING`` and a later attempt continues it. Everything the
child writes to stdout or stderr passes through the run's redactor first, and every value DBOS
saves through the guards of ``runner.guards``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO, cast

from agentworks import _runtime
from agentworks.redact import Redactor
from relay_notebook.errors import codes
from relay_notebook.record.ledger import EventWriter
from relay_notebook.record.ledger_events import Event, EventFields, EventKind
from relay_notebook.runner.leave import crash_point, leave
from relay_notebook.runner.spec import AttemptSpec
from relay_notebook.workspace.access import AccessPolicy

__all__ = ["install_runtime", "read_private", "read_secrets"]


class _RedactingStream(io.TextIOBase):
    """A text stream that scrubs vault values before they reach the captured file."""

    def __init__(self, inner: TextIO, redactor: Redactor) -> None:
        self._inner = inner
        self._redactor = redactor

    def write(self, text: str) -> int:
        self._inner.write(self._redactor.scrub(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding


def read_private() -> dict[str, Any]:
    """What the supervisor wrote to our stdin: vault values and the database URL (never files)."""
    try:
        data = sys.stdin.read()
    except (OSError, ValueError):
        return {}
    if not data.strip():
        return {}
    private: dict[str, Any] = json.loads(data)
    return private


def read_secrets(private: dict[str, Any]) -> dict[str, str]:
    """The vault values among ``private``."""
    return {str(k): str(v) for k, v in (private.get("vault") or {}).items()}


def install_runtime(
    spec: AttemptSpec, events: EventWriter, secrets: dict[str, str], outcome_path: Path
) -> _runtime.Runtime:
    """Build and install the Runtime that agentworks calls see in this process."""
    workspace = spec.context.workspace
    relay = spec.relay
    release = spec.context.release

    def stop(status: str, error: dict[str, Any]) -> NoReturn:
        leave(events, outcome_path, {"status": status, "error": error})

    def authorize(what: str) -> None:
        if not AccessPolicy(workspace).is_granted(relay):
            # the recovery rules (and the record they read) are not a child's to import at start
            from relay_notebook.record.rules import access_revoked_message

            stop(
                "denied",
                codes.ACCESS_REVOKED.record(access_revoked_message(spec.run_id, relay, what)),
            )
        if release:
            from relay_notebook.workspace.releases import _read_release, verify_release

            report = verify_release(_read_release(spec.code_dir))
            if not report.ok:
                stop(
                    "denied",
                    codes.RELEASE_TAMPERED.record(
                        f"Release v{release['version']} of {relay} changed while "
                        f"run {spec.run_id} was running ({'; '.join(report.problems)}); "
                        f"{what} was denied."
                    ),
                )

    crash = spec.crash

    def platform_crash_point(label: str, occurrence: int, when: str) -> None:
        crash_point(events, crash, (label,), occurrence, when)

    def emit(kind: str, /, **fields: object) -> Event:
        # agentworks cannot name the kit's types: the writer checks its kinds and fields
        return events.emit(cast(EventKind, kind), **cast(EventFields, fields))

    runtime = _runtime.Runtime(
        run_id=spec.run_id,
        relay=relay,
        attempt=spec.attempt,
        folder=spec.run_dir,
        code_dir=spec.code_dir,
        workspace=workspace,
        variables=dict(spec.context.variables),
        default_model=spec.context.default_model,
        secrets=secrets,
        emit=emit,
        authorize=authorize,
        stop=stop,
        crash_point=platform_crash_point,
        durable=spec.context.durable,
        entry=spec.entry,
    )
    _runtime.install(runtime)
    if runtime.redactor:
        from relay_notebook.runner.guards import install_guards

        install_guards(runtime.redactor)  # before the relay is imported: see runner.guards
        events.scrub = runtime.redactor.scrub
        sys.stdout = _RedactingStream(sys.stdout, runtime.redactor)
        sys.stderr = _RedactingStream(sys.stderr, runtime.redactor)
    return runtime
