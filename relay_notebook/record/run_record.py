"""The run record, ``run.json``: what a run is bound to and how its attempts went.

``RunRecord.load`` is the one reader: it checks the file as ``RunFolder.read_meta`` always has
(a damaged record raises ``RunRecordDamagedError`` naming the file) and fills what older runs
did not record (``max_attempts``, ``durable``, ``workflow_id``...) with the values they ran
with. ``RunRecord.to_json`` is the writer's form: every key read is written back, so a field
this version does not know survives a rewrite.
"""

from __future__ import annotations

import copy
import marshal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from relay_notebook.record.folders import RunFolder

__all__ = ["MAX_ATTEMPTS", "TERMINAL", "WAITING", "AttemptRecord", "RunRecord", "WaitState"]

#: a run's budget of process attempts (run.json's ``max_attempts``; older runs lack it)
MAX_ATTEMPTS = 3
#: statuses after which no attempt runs
TERMINAL = frozenset({"succeeded", "failed"})
#: the status of a run whose attempt ended blocked in ``DBOS.recv`` or ``DBOS.sleep``
WAITING = "waiting"


_T = TypeVar("_T")


def _copied(value: _T) -> _T:
    """A deep copy of JSON-like ``value`` (a run's record): by ``marshal``, in C (an attempt's
    lists hold every step it ran); ``copy.deepcopy`` for anything ``marshal`` does not take."""
    try:
        return cast(_T, marshal.loads(marshal.dumps(cast(Any, value))))
    except ValueError:
        return copy.deepcopy(value)


@dataclass(frozen=True)
class WaitState:
    """What a waiting run waits for: a message on ``topic`` (``kind="message"``) or a timer
    (``kind="sleep"``), until ``until_ms`` (a recv's timeout or the sleep's end; ``None``: no
    timer). ``since_ms`` is when its attempt ended; ``workflow_id`` the workflow that waits."""

    kind: str
    workflow_id: str
    since_ms: float
    topic: str | None = None
    until_ms: float | None = None

    @classmethod
    def from_json(cls, data: Any) -> WaitState | None:
        if not isinstance(data, dict) or data.get("kind") not in ("message", "sleep"):
            return None
        until, since = data.get("until_ms"), data.get("since_ms")
        topic = data.get("topic")
        return cls(
            kind=str(data["kind"]),
            workflow_id=str(data.get("workflow_id") or ""),
            since_ms=float(since) if isinstance(since, int | float) else 0.0,
            topic=topic if isinstance(topic, str) else None,
            until_ms=float(until) if isinstance(until, int | float) else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "workflow_id": self.workflow_id,
            "since_ms": self.since_ms,
            "topic": self.topic,
            "until_ms": self.until_ms,
        }

    def due(self, now_ms: float) -> bool:
        """Whether its timer has run out (a message wait is due only then, or on a message)."""
        return self.until_ms is not None and now_ms >= self.until_ms

    def describe(self) -> str:
        """``a message on topic "approval"``, ``a timer`` — what a person reads."""
        if self.kind == "message":
            return f'a message on topic "{self.topic}"' if self.topic else "a message"
        return "a durable sleep"


def _ids(value: Any) -> list[int]:
    return [i for i in value or () if type(i) is int] if isinstance(value, list) else []


@dataclass
class AttemptRecord:
    """One entry of ``run.json``'s ``attempts``: one process of the run."""

    attempt: int
    id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    status: str | None = None
    returncode: int | None = None
    host: str | None = None
    executor_id: str | None = None
    #: the supervisor's process id (recorded once the child started)
    pid: int | None = None
    #: the crash injected into this attempt (``--crash``), as recorded
    crash: dict[str, Any] | None = None
    #: its supervisor went away before the attempt ended (settled later)
    lost: bool = False
    #: every key as written, including those this version does not model
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        ended = data.get("ended_at")
        return cls(
            attempt=int(data["attempt"]),
            id=None if data.get("id") is None else str(data["id"]),
            started_at=data.get("started_at"),
            ended_at=ended if isinstance(ended, int | float) else None,
            status=data.get("status"),
            returncode=data.get("returncode"),
            host=data.get("host"),
            executor_id=data.get("executor_id"),
            pid=data["pid"] if isinstance(data.get("pid"), int) else None,
            crash=data.get("crash"),
            lost=data.get("lost") is True,
            raw=data,
        )

    @property
    def ended(self) -> bool:
        return bool(self.ended_at)

    # read when asked: a run of thousands of steps lists thousands of ids, and a list of runs
    # needs only their count

    @property
    def executed(self) -> list[int]:
        """Function ids whose checkpoints this attempt wrote."""
        return _ids(self.raw.get("executed"))

    @property
    def reused(self) -> list[int]:
        """Function ids whose checkpoints this attempt replayed."""
        return _ids(self.raw.get("reused"))

    @property
    def reused_count(self) -> int:
        """How many checkpoints this attempt replayed (as recorded, without reading them)."""
        reused = self.raw.get("reused")
        return len(reused) if isinstance(reused, list) else 0

    def update(self, **fields: Any) -> None:
        """Set fields of the entry as run.json keeps them (e.g. when the attempt ends)."""
        self.raw.update(_copied(fields))
        fresh = AttemptRecord.from_json(self.raw)
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    def end(
        self,
        *,
        status: str,
        returncode: int | None,
        executed: list[int],
        reused: list[int],
        ended_at: float,
        **more: Any,
    ) -> None:
        """Record the end of the attempt (``more``: e.g. ``lost=True``, its confinement)."""
        self.update(
            ended_at=ended_at,
            returncode=returncode,
            status=status,
            executed=executed,
            reused=reused,
            **more,
        )

    def to_json(self) -> dict[str, Any]:
        return _copied(self.raw)


@dataclass
class RunRecord:
    """One run's ``run.json``, typed."""

    run_id: str
    relay: str
    status: str
    code_dir: str
    app_version: str
    bindings: dict[str, str]
    created_at: float
    deadline_ms: float
    input: Any
    attempts: list[AttemptRecord]
    workflow_id: str
    #: ``{"version": N, "hash": H}`` for a run of a release, ``None`` for a draft's
    release: dict[str, Any] | None = None
    variables: dict[str, str] = field(default_factory=dict)
    #: ``None`` is a recorded "no model"; older runs did not record it (``has_default_model``)
    default_model: str | None = None
    has_default_model: bool = True
    max_attempts: int = MAX_ATTEMPTS
    #: ``False`` for ``relay_durability: none``: nothing is checkpointed
    durable: bool = True
    #: ``{"kind": "postgresql", "url": …}`` (no password), ``None`` for the run's SQLite file
    database: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    fork: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, folder: RunFolder) -> RunRecord:
        """``folder``'s run.json; ``RunRecordDamagedError`` names the file if it is unusable."""
        return cls.from_json(folder.read_meta())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        """A record from run.json's object, already checked by ``RunFolder.read_meta``.

        The record keeps ``data`` (not a copy, so listing many runs stays cheap): a caller that
        changes the record through ``AttemptRecord.update`` changes ``data`` too.
        """
        max_attempts = data.get("max_attempts")
        return cls(
            run_id=data["run_id"],
            relay=data["relay"],
            status=data["status"],
            code_dir=data["code_dir"],
            app_version=data["app_version"],
            bindings=dict(data["bindings"]),
            created_at=data["created_at"],
            deadline_ms=data["deadline_ms"],
            input=data["input"],
            attempts=[AttemptRecord.from_json(a) for a in data["attempts"]],
            workflow_id=str(data.get("workflow_id") or data["run_id"]),
            release=data.get("release"),
            variables=dict(data.get("variables") or {}),
            default_model=data.get("default_model"),
            has_default_model="default_model" in data,
            max_attempts=int(max_attempts) if isinstance(max_attempts, int) else MAX_ATTEMPTS,
            durable=data.get("durable", True) is not False,
            database=data.get("database") or None,
            error=data.get("error"),
            fork=data.get("fork"),
            raw=data,
        )

    def to_json(self) -> dict[str, Any]:
        """run.json's object: every typed field, over the keys read that this version does not
        know (kept as they were, so an older or newer kit's record survives a rewrite)."""
        data = _copied(self.raw)
        data.update(
            run_id=self.run_id,
            relay=self.relay,
            workflow_id=self.workflow_id,
            release=self.release,
            code_dir=self.code_dir,
            app_version=self.app_version,
            input=self.input,
            variables=self.variables,
            bindings=self.bindings,
            created_at=self.created_at,
            deadline_ms=self.deadline_ms,
            max_attempts=self.max_attempts,
            durable=self.durable,
            status=self.status,
            error=self.error,
            attempts=[a.to_json() for a in self.attempts],
        )
        if self.has_default_model:
            data["default_model"] = self.default_model
        for key, value in (("database", self.database), ("fork", self.fork)):
            if value is not None:
                data[key] = value
        return data

    def save(self, folder: RunFolder) -> None:
        """Write the record atomically (a crash leaves the old file or the new one)."""
        folder.write_meta(self.to_json())

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def begin_attempt(self, attempt: int, **fields: Any) -> AttemptRecord:
        """Record that attempt ``attempt`` starts now (``fields``: its id, start time, host,
        executor, crash, confinement as run.json keeps them); the run is ``running``."""
        entry = AttemptRecord.from_json({"attempt": attempt, **_copied(fields)})
        self.attempts.append(entry)
        self.status = "running"
        self.raw["waiting"] = None
        return entry

    def attempt_entry(self, attempt: int) -> AttemptRecord | None:
        """The entry of attempt number ``attempt``, if recorded."""
        return next((a for a in self.attempts if a.attempt == attempt), None)

    @property
    def attempts_used(self) -> int:
        return len(self.attempts)

    @property
    def budget_used(self) -> int:
        """Attempts counted against the budget: an attempt that ended ``waiting`` is not."""
        return sum(1 for a in self.attempts if a.status != WAITING)

    @property
    def waiting(self) -> WaitState | None:
        """What the run waits for, while its status is ``waiting``."""
        return WaitState.from_json(self.raw.get("waiting")) if self.status == WAITING else None

    def waited_ms(self, now_ms: float) -> float:
        """Time the run spent waiting with no process: from each attempt that ended ``waiting``
        to the start of the next (or to ``now_ms`` while it still waits)."""
        total = 0.0
        for i, a in enumerate(self.attempts):
            if a.status != WAITING or a.ended_at is None:
                continue
            later = self.attempts[i + 1] if i + 1 < len(self.attempts) else None
            if later is not None and isinstance(later.started_at, int | float):
                total += max(0.0, later.started_at - a.ended_at)
            elif later is None:
                total += max(0.0, now_ms - a.ended_at)
        return total

    def deadline_at(self, now_ms: float) -> float:
        """The run's execution deadline: its first attempt's, moved on by the time it waited."""
        return self.deadline_ms + self.waited_ms(now_ms)

    @property
    def live_attempt(self) -> int | None:
        """The attempt running now by the record (``running`` and its last attempt not ended)."""
        if self.status != "running" or not self.attempts or self.attempts[-1].ended:
            return None
        return self.attempts[-1].attempt
