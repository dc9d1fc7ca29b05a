"""Child-side guard on what DBOS saves: no vault value reaches the run's DBOS history.

Design note: DBOS passes every value it persists through a serializer: step and workflow
outputs and errors, workflow inputs (a child workflow's arguments), ``set_event`` values and
their history, ``write_stream`` values, messages, sleeps and schedules. Guarding the two
serializers DBOS 3.x has (pickle, the default, and portable JSON), rather than each API that
reaches them, means a new API cannot bypass the check. A value carrying a secret is refused
where it is written (the call that saves it raises ``SecretLeakError``, so a workflow output
fails the run and ``set_event`` raises in the relay); an exception carrying one anywhere (its
message, arguments, attributes, ``__notes__``, cause) is saved as a ``SecretLeakError`` naming
only its type, since refusing to record an error would leave the step without an outcome.
Pickled bytes are searched as well as the value, so state a ``__reduce__`` hides is found.
Identifiers DBOS saves as they are (a child workflow id, an event or stream key, a topic)
never reach a serializer, so every row DBOS inserts or updates is checked as well, in a
SQLAlchemy hook before the statement runs: a secret there refuses the statement.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Mapping
from typing import Any

from agentworks._runtime import current
from agentworks.errors import SecretLeakError
from agentworks.redact import Redactor
from relay_notebook.runner.dbos_private import wrap_serializers

__all__ = ["install_guards", "refuse_secret_result", "withheld"]

_installed: dict[str, Any] = {}


def withheld(exc: BaseException, redactor: Redactor) -> BaseException:
    """``exc``, or a ``SecretLeakError`` in its place when a secret occurs anywhere in it."""
    leaked = redactor.find(exc)
    if not leaked:
        return exc
    return SecretLeakError(
        f"{type(exc).__name__} raised carrying the value of vault secret {leaked} (in its "
        f"message, arguments, attributes, notes or cause); it was withheld from the run's "
        f"history. Raise errors that name the secret, not its value."
    )


def refuse_secret_result(result: Any) -> None:
    """Refuse a run result carrying a secret (a run without DBOS has no serializer to guard)."""
    leaked = current().redactor.find(result)
    if leaked:
        raise SecretLeakError(
            f"The result of run() carries the value of vault secret {leaked}; it would be saved "
            f"with the run and printed, so it was refused. Return what the secret was used for, "
            f"never its value."
        )


def _what(data: Any) -> str:
    if isinstance(data, dict) and set(data) == {"args", "kwargs"}:
        return "The input of a workflow"
    return "A value"


def _refused(data: Any, leaked: str) -> SecretLeakError:
    return SecretLeakError(
        f"{_what(data)} that DBOS was about to save in the run's history (a result, workflow "
        f"input, event, stream value or message) carries the value of vault secret {leaked}; "
        f"it was refused. Read the secret with vault({leaked!r}) where it is used instead of "
        f"passing, storing or returning it."
    )


def _guard_statements(redactor: Redactor) -> None:
    """Refuse any INSERT or UPDATE whose parameters hold a secret as plain text."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def check(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if statement.lstrip()[:6].upper() not in {"INSERT", "UPDATE"}:
            return
        for row in parameters if many else [parameters]:
            values = row.values() if isinstance(row, Mapping) else row or ()
            for value in values:
                leaked = redactor.find_text(value) if isinstance(value, str) else None
                if leaked:
                    raise SecretLeakError(
                        f"DBOS was about to save the value of vault secret {leaked} in the "
                        f"run's history as an identifier (a workflow id, an event or stream "
                        f"key, a topic); it was refused. Build identifiers from names, not "
                        f"from secret values."
                    )

    event.listen(Engine, "before_cursor_execute", check)


def install_guards(redactor: Redactor) -> None:
    """Make DBOS's serializers refuse (or, for errors, withhold) values carrying a secret."""
    if not redactor or _installed:
        return

    def guarded_pickle(original: Callable[[Any, Any], str]) -> Callable[[Any, Any], str]:
        @functools.wraps(original)
        def serialize(self: Any, data: Any) -> str:
            if isinstance(data, BaseException):
                data = withheld(data, redactor)
            text = original(self, data)
            leaked = redactor.find(data) or redactor.find_bytes(base64.b64decode(text))
            if leaked:
                if isinstance(data, BaseException):  # hidden from the walk, not from pickle
                    return original(self, SecretLeakError(f"{type(data).__name__} withheld"))
                raise _refused(data, leaked)
            return text

        return serialize

    def guarded_json(original: Callable[[Any, Any], str]) -> Callable[[Any, Any], str]:
        @functools.wraps(original)
        def serialize(self: Any, data: Any) -> str:
            text = original(self, data)
            leaked = redactor.find(data) or redactor.find_text(text)
            if leaked:
                raise _refused(data, leaked)
            return text

        return serialize

    def guarded_error_data(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(original)
        def error_data(err: Any) -> Any:
            return original(withheld(err, redactor) if isinstance(err, BaseException) else err)

        return error_data

    wrap_serializers(guarded_pickle, guarded_json, guarded_error_data)
    _installed["serializers"] = True
    _guard_statements(redactor)
