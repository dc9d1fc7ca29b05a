"""The run a child process is executing, as seen by agentworks (installed by the runner).

Design note: authored code imports ``agentworks`` in a kernel, a test or a child alike; only
the runner's child installs a ``Runtime``, so platform calls made anywhere else fail at once
with ``NotInRunError`` instead of doing something half-real. The runtime carries plain data
and callbacks (emit an event, authorize, stop the attempt, wrap a step's body), so
agentworks never imports the runner. The events it emits are kinds of the kit's ledger
vocabulary (``relay_notebook.record.ledger_events``), which types them and refuses a field it does
not know; a test checks every ``emit`` call here against that vocabulary.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from agentworks.errors import NotInRunError
from agentworks.redact import Redactor

__all__ = [
    "CALL_MARKER",
    "Emit",
    "Runtime",
    "StepBody",
    "StepCall",
    "current",
    "install",
    "uninstall",
]

#: written first in every ``execution/call-N/``: the agent, attempt and journal key
CALL_MARKER = "call.json"


class Emit(Protocol):
    """Writes one ledger event of ``kind`` with ``fields`` and returns it as written.

    ``kind`` and the fields' names are those of the kit's vocabulary; the kit's writer raises
    ``ValueError`` for a field the kind does not have.
    """

    def __call__(self, kind: str, /, **fields: object) -> Mapping[str, object]: ...


@dataclass(frozen=True)
class StepCall:
    """A platform call made in the workflow body, which runs as a DBOS step of its own."""

    name: str  # the step's name: ``agent:NAME`` or ``mcp:SERVER.TOOL``
    occurrence: int  # which call of it in this attempt (1 = the first)
    site: list[int] | None  # where the relay makes the call (line, column)


#: around one run of a platform call's own step body (the runner's child records its events)
StepBody = Callable[[StepCall], contextlib.AbstractContextManager[None]]


def _plain_step_body(call: StepCall) -> contextlib.AbstractContextManager[None]:
    """No events: the body of a step in a runtime that records none (one built by a test)."""
    return contextlib.nullcontext()


@dataclass
class Runtime:
    """Everything a platform call needs about the run in progress."""

    run_id: str
    relay: str
    attempt: int
    folder: Path  # the run folder
    code_dir: Path  # the relay's source (draft or frozen release)
    workspace: Path
    variables: dict[str, str]
    default_model: str | None
    secrets: dict[str, str]
    emit: Emit
    # checks live access before an attempt's platform call; a revoked relay stops the attempt
    # as ``denied`` (via ``stop``) rather than raising into authored code
    authorize: Callable[[str], None]
    stop: Callable[[str, dict[str, Any]], NoReturn]  # end the attempt with a status, now
    #: False for ``relay_durability: none`` legacy programs: calls run without checkpoints
    durable: bool = True
    #: crash injection for platform calls: ("agent:NAME", occurrence, "during"|"after")
    crash_point: Callable[[str, int, str], None] = lambda name, n, when: None
    #: the relay's module file in ``code_dir``, where call sites are looked for
    entry: str = "relay.py"
    #: wraps the body of a platform call's own step; the child installs the one its native
    #: steps use (``runner.instrument``), so both record the same step events
    step_body: StepBody = _plain_step_body
    redactor: Redactor = field(init=False)
    _calls: itertools.count[int] = field(init=False, default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.redactor = Redactor(self.secrets)

    @property
    def relay_file(self) -> str:
        return str(self.code_dir / self.entry)

    @property
    def run_dir(self) -> Path:
        return self.folder / "execution"

    def next_call_dir(self, agent: str | None = None, key: str | None = None) -> Path:
        """A fresh ``execution/call-N/`` folder for one agent call's artifacts.

        A call made again by a later attempt gets a new folder (an existing one is never
        reused), and ``call.json`` says at once which attempt made it and for which call, so
        a folder left by a killed attempt is still labelled.
        """
        while True:
            path = self.run_dir / f"call-{next(self._calls)}"
            try:
                path.mkdir(parents=True)
            except FileExistsError:
                continue
            marker = {
                "agent": agent,
                "attempt": self.attempt,
                "key": key,
                "started_at": time.time(),
            }
            text = self.redactor.scrub(json.dumps(marker, indent=2, sort_keys=True))
            (path / CALL_MARKER).write_text(text + "\n", encoding="utf-8")
            return path


_current: Runtime | None = None


def install(runtime: Runtime) -> None:
    global _current
    _current = runtime


def uninstall() -> None:
    global _current
    _current = None


def current(what: str = "this call") -> Runtime:
    """The runtime of the run in progress; ``NotInRunError`` outside one."""
    if _current is None:
        raise NotInRunError(
            f"{what} needs a relay run: it works inside a relay started with '%relay run' or "
            f"'relay run', not in a kernel or a plain script."
        )
    return _current
