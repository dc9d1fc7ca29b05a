"""The requests of the API surfaces (REST and MCP), checked once: the fields, types and bounds
of a run, fork, reconcile or message request and of a draft's source; the documents they
return (a run's log as ``relay logs --json`` prints it), with the workspace's vault values
scrubbed.

Design note: the REST server (``server.service``) and the MCP server (``mcp_server``) take the
same JSON objects for the same commands, so the rules for them live here, below both; a bad
request is one ``[invalid-request]`` (or ``[invalid-input]``) line, the same from either.
"""

from __future__ import annotations

import json
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Final

from agentworks.redact import Redactor
from relay_notebook.commands import inputs
from relay_notebook.commands.run_files import logs_files
from relay_notebook.commands.runs import logs, preview
from relay_notebook.commands.time_travel import ForkRequest
from relay_notebook.errors import InvalidRequestError
from relay_notebook.workspace import Workspace
from relay_notebook.workspace.vault import Vault

__all__ = [
    "FORK_FIELDS",
    "MAX_SOURCE_BYTES",
    "MESSAGE_FIELDS",
    "RECONCILE_FIELDS",
    "RUN_FIELDS",
    "ReconcileRequest",
    "RunRequest",
    "check_fields",
    "checked_source",
    "fork_request",
    "log_document",
    "message_request",
    "optional_str",
    "reconcile_request",
    "run_request",
    "scrub_secrets",
]

RUN_FIELDS: Final = frozenset({"input", "release", "crash"})
RECONCILE_FIELDS: Final = frozenset({"result", "retry", "key"})
FORK_FIELDS: Final = frozenset({"from", "input", "set", "release", "draft"})
MESSAGE_FIELDS: Final = frozenset({"topic", "message"})
#: run statuses whose log also says what a recovery would do (``relay logs RUN --json``)
_PREVIEWED: Final = frozenset({"interrupted", "needs_reconciliation", "denied"})
#: the largest relay source an API request saves as a draft
MAX_SOURCE_BYTES: Final = 1024 * 1024


def check_fields(body: dict[str, Any], allowed: Set[str], what: str) -> None:
    """Refuse a field ``body`` may not have, naming the ones it may."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequestError(
            f"Unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
            f"the {what} body; expected only {', '.join(sorted(allowed))}."
        )


def optional_str(body: dict[str, Any], key: str, what: str) -> str | None:
    """``body[key]``, which must be a string or null (or absent)."""
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidRequestError(
            f"Field {key!r} of the {what} body must be a string or null, got "
            f"{type(value).__name__} {json.dumps(value)[:60]}."
        )
    return value


@dataclass(frozen=True)
class RunRequest:
    """A checked run request: what ``commands.run`` takes."""

    run_input: Any
    release: str | None
    crash: str | None


def run_request(body: dict[str, Any]) -> RunRequest:
    """``{"input", "release", "crash"}`` checked (the input held to the run-input rule)."""
    check_fields(body, RUN_FIELDS, "run request")
    release = optional_str(body, "release", "run request")
    crash = optional_str(body, "crash", "run request")
    if body.get("input") is not None:
        inputs.checked_value(body["input"], "Field 'input' of the run request")
    return RunRequest(body.get("input"), release, crash)


def fork_request(body: dict[str, Any]) -> ForkRequest:
    """``{"from", "input", "set", "release", "draft"}`` checked for their shape; ``input``
    present (even null) replaces the run's input. The values are checked once, by the
    ``ForkRequest`` (the input as any run's, when the fork is created)."""
    check_fields(body, FORK_FIELDS, "fork request")
    call = optional_str(body, "from", "fork request")
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
    return ForkRequest(
        call, run_input=body.get("input"), input_given="input" in body, sets=sets,
        release=optional_str(body, "release", "fork request"), draft=draft,
    )  # fmt: skip


@dataclass(frozen=True)
class ReconcileRequest:
    """A checked reconcile request: what ``commands.reconcile`` takes."""

    result: Any
    retry: bool
    key: str | None


def reconcile_request(body: dict[str, Any]) -> ReconcileRequest:
    """Exactly one of ``{"result": JSON}`` or ``{"retry": true}``, and an optional ``key``."""
    check_fields(body, RECONCILE_FIELDS, "reconcile request")
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
    key = optional_str(body, "key", "reconcile request")
    if "result" in body:
        inputs.checked_value(body["result"], "Field 'result' of the reconcile request")
    return ReconcileRequest(body.get("result"), retry, key)


def message_request(body: dict[str, Any]) -> tuple[str, Any]:
    """``{"topic": T, "message": JSON}`` as ``(topic, message)``; the message's own bound is
    checked when it is sent (``waiting.send``)."""
    check_fields(body, MESSAGE_FIELDS, "message request")
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
    return topic, body["message"]


def checked_source(relay: str, source: str) -> str:
    """A relay's source sent in a request, refused over ``MAX_SOURCE_BYTES``."""
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidRequestError(
            f"The source of relay {relay!r} is not valid Unicode text (a lone surrogate at "
            f"character {exc.start}); send it as UTF-8."
        ) from None
    if size > MAX_SOURCE_BYTES:
        raise InvalidRequestError(
            f"The source of relay {relay!r} is {size:,} bytes; a request saves at most "
            f"{MAX_SOURCE_BYTES:,} (1 MiB). Move data the relay needs into a file it reads."
        )
    return source


def scrub_secrets(workspace: Workspace, data: Any) -> Any:
    """``data`` (JSON-ready) with every vault value of the workspace, plain or encoded,
    replaced by ``[vault:NAME]``: what an API result may hold, even from a run made before
    the supervisor's secret check."""
    secrets = Vault(workspace.home).values()
    return Redactor(secrets, encoded=True).scrub_json(data) if secrets else data


def log_document(workspace: Workspace, run_id: str) -> dict[str, Any]:
    """``relay logs RUN --json``: the run, its attempts and steps; what a recovery would do
    when the run can be recovered (``preview``); each agent call's files (``files``)."""
    doc = logs(workspace, run_id).to_dict()
    if doc.get("status") in _PREVIEWED:
        doc["preview"] = preview(workspace, run_id).to_dict()
    doc["files"] = logs_files(workspace, run_id)
    return doc
