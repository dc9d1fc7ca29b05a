"""Child-side instrumentation of ``DBOS.step`` and ``DBOS.workflow``: events and crash points.

Design note: DBOS does not say whether a step was executed or reused, nor show the attempts of
a step it retried. Before the relay is imported, the child replaces ``DBOS.step`` and
``DBOS.workflow`` with versions that wrap the authored function twice: an *inner* wrapper
around the body (DBOS calls it only when the step really runs, once per retry attempt) and an
*outer* wrapper around DBOS's own wrapper (it sees every call, and returns only after DBOS has
saved the checkpoint). ``functools.wraps`` keeps ``__qualname__``, so DBOS records the same
step names as without the kit. ``--crash after:`` exits in the outer wrapper, ``--crash
during:`` at the end of the inner one, so the body's effects happened but no checkpoint exists.
A platform call made in the workflow body is a step of its own (``agentworks.platform``): its
body goes through the same ``_ran`` as a native step's (installed as the runtime's
``step_body``), so both record the same events with the same fields; its crash points and
journal stay the platform call's own.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbos import DBOS
from dbos import error as dbos_error

from agentworks._runtime import Runtime, StepCall
from agentworks._sites import Sited, call_site
from agentworks.errors import SecretLeakError
from agentworks.framework_calls import framework_owned, framework_step
from agentworks.platform import begin_step_body
from agentworks.redact import Redactor
from relay_notebook.record.backend import database_error, error_text
from relay_notebook.record.ledger import EventWriter, encode_step_info, encode_text
from relay_notebook.record.ledger_events import StepInfo, StepReused
from relay_notebook.runner.crash import CrashSpec
from relay_notebook.runner.dbos_private import step_context
from relay_notebook.runner.guards import withheld
from relay_notebook.runner.leave import crash_point
from relay_notebook.runner.waits import WaitWatch

__all__ = ["Instrumentation", "step_runner_binder", "user_traceback"]


@dataclass
class _Call:
    name: str
    function: str
    occurrence: int
    site: list[int] | None = None
    executed: bool = False


#: characters of a step's arguments kept in its ``step_start`` event (the node details show it)
PREVIEW_CHARS = 240


#: ``json.dumps(…, default=repr)``, made once: a preview is made per step
_ENCODE = json.JSONEncoder(default=repr).encode


def _preview(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A short JSON-ish text of a call's arguments (the ledger scrubs vault values)."""
    if not kwargs and len(args) == 1 and type(args[0]) is int:
        text = int.__repr__(args[0])  # as JSON writes it (a loop's index, an id)
    else:
        shown: list[Any] = list(args)
        if kwargs:
            shown.append(kwargs)
        try:
            text = _ENCODE(shown[0] if len(shown) == 1 else shown)
        except (TypeError, ValueError, RecursionError):
            text = repr(shown)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _ms_since(started: float) -> float:
    """Milliseconds since ``started`` (``time.perf_counter``), to 0.01 ms."""
    return round((time.perf_counter() - started) * 100_000) / 100  # not ``round(…, 2)``: slower


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("relay_call", default=None)


StepRunnerArguments = tuple[Any, Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def step_runner_binder(method: str) -> Callable[..., StepRunnerArguments]:
    """A binder of ``DBOS.<method>``'s arguments (``run_step``, ``run_step_async``) as DBOS
    binds them: by its parameters' names (``func=`` or ``dbos_step_options=`` given by keyword
    work as they do in DBOS), and a missing one said as DBOS says it (``DBOS.run_step_async()
    missing 1 required positional argument: 'func'``), not by the kit's name."""

    def bind(
        dbos_step_options: Any, func: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> StepRunnerArguments:
        return dbos_step_options, func, args, kwargs

    bind.__qualname__ = f"DBOS.{method}"
    return bind


def user_traceback(exc: BaseException, code_dir: Path) -> str:
    """The traceback trimmed to frames in the relay's own files, with their line numbers."""
    root = str(code_dir.resolve())
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if os.path.abspath(f.filename).startswith(root + os.sep)
    ]
    lines = ["Traceback (most recent call last):\n"]
    for f in frames:
        rel = os.path.relpath(f.filename, root)
        lines.append(f'  File "{rel}", line {f.lineno}, in {f.name}\n')
        if f.line:
            lines.append(f"    {f.line.strip()}\n")
    shown = database_error(exc) or exc  # a database error's own line: never its SQL
    lines.extend(traceback.format_exception_only(type(shown), shown))
    return "".join(lines)


class Instrumentation:
    """Installs the wrappers and holds the per-attempt counters they share."""

    def __init__(
        self,
        events: EventWriter,
        crash: CrashSpec | None,
        code_dir: Path,
        redactor: Redactor | None = None,
        entry: str = "relay.py",
        watch: WaitWatch | None = None,
    ) -> None:
        self.events = events
        #: told of every step call, so that a waiting run never leaves while a step runs
        self.watch = watch
        self.redactor = redactor or Redactor({})
        #: whether there is any secret to search for (a redactor's are fixed when it is made)
        self._has_secrets = bool(self.redactor)
        self.crash = crash
        self.code_dir = code_dir
        #: the relay's module file as its frames name it (see ``agentworks._sites``)
        self.relay_file = str(code_dir / entry)
        self._calls: dict[str, int] = {}
        self._original_step = DBOS.step
        self._original_workflow = DBOS.workflow
        #: the workflow, step id and step status of the step running now, in one read
        self._step_context = step_context()

    def install(self, runtime: Runtime | None = None) -> None:
        """Replace ``DBOS.step`` and ``DBOS.workflow``; ``runtime``'s platform calls made in the
        workflow body wrap their own steps' bodies as native steps' are wrapped."""
        setattr(DBOS, "step", staticmethod(self._step_decorator))  # noqa: B010
        setattr(DBOS, "workflow", staticmethod(self._workflow_decorator))  # noqa: B010
        self._wrap_step_runners()
        self._wrap_transactions()
        if runtime is not None:
            runtime.step_body = self.platform_step

    # -- crash points -------------------------------------------------------------------------

    def _crash_now(self, call: _Call, when: str) -> None:
        if self.crash is not None:
            crash_point(self.events, self.crash, (call.name, call.function), call.occurrence, when)

    # -- steps --------------------------------------------------------------------------------

    def _step_decorator(self, **options: Any) -> Callable[[Callable[..., Any]], Any]:
        dbos_decorate = self._original_step(**options)

        def decorate(func: Callable[..., Any]) -> Any:
            name = options.get("name") or func.__qualname__
            # a framework's model request or MCP call records its receipt (decided here, once)
            observed = framework_step(name, func)
            # its other steps (Pydantic AI's MCP get_tools, get_instructions) take its run context
            owned = observed is not func or framework_owned(func)
            body = self._wrap_body(observed, name, framework=owned)
            return self._wrap_calls(dbos_decorate(body), name, func)

        return decorate

    def _refuse_secret(self, what: str, value: Any) -> None:
        leaked = self.redactor.find(value)
        if leaked:
            raise SecretLeakError(
                f"{what} carries the value of vault secret {leaked}; DBOS would save it in the "
                f"run's history, so it was refused. Read the secret with vault({leaked!r}) "
                f"inside the step instead of passing or returning it."
            )

    def _scrubbed(self, exc: BaseException) -> BaseException:
        """An exception safe to checkpoint: one carrying a secret anywhere in it is replaced."""
        return withheld(exc, self.redactor)

    def _step_info(self, name: str, occurrence: int | None, site: list[int] | None) -> StepInfo:
        workflow_id, step_id, status = self._step_context()
        return StepInfo(
            step=name,
            occurrence=occurrence,
            site=site,
            step_id=step_id,
            workflow_id=workflow_id,
            step_attempt=(status.current_attempt or 0) + 1 if status else 1,
            max_attempts=status.max_attempts if status else None,
        )

    def _body_failed(self, info: StepInfo, started: float, exc: BaseException) -> None:
        self.events.emit(
            "step_error",
            **info,
            duration_ms=_ms_since(started),
            error_type=type(exc).__name__,
            error=error_text(exc)[:2000],
        )

    def _step_started(self, info: StepInfo, preview: str | None) -> str:
        """``step_start``, with the argument preview if any; returns ``info`` encoded, which
        the step's ``step_end`` shares (``_step_done``): encoded once for the two lines."""
        members = encode_step_info(info)
        if preview is None:
            self.events.emit_members("step_start", members)
        else:
            self.events.emit_members(
                "step_start", f'{members},"input_preview":{encode_text(preview)}'
            )
        return members

    def _step_done(self, members: str, started: float) -> None:
        """The body returned: ``step_end``, with the info ``_step_started`` encoded."""
        self.events.emit_members("step_end", f'{members},"duration_ms":{_ms_since(started)!r}')

    @contextlib.contextmanager
    def _ran(
        self, info: StepInfo, preview: str | None, last: Callable[[], None] | None = None
    ) -> Iterator[None]:
        """Around one run of any step's body: ``step_start``, then ``step_end`` or
        ``step_error``; an exception carrying a secret is replaced before DBOS saves it.
        ``last`` runs as the body ends, before ``step_end`` (a crash point)."""
        members = self._step_started(info, preview)
        started = time.perf_counter()
        try:
            yield
        except Exception as exc:
            self._body_failed(info, started, exc)
            safe = self._scrubbed(exc)
            if safe is not exc:
                raise safe from None
            raise
        except BaseException as exc:
            self._body_failed(info, started, exc)
            raise
        finally:
            if last is not None:
                last()
        self._step_done(members, started)

    @contextlib.contextmanager
    def platform_step(self, call: StepCall) -> Iterator[None]:
        """Around the body of a platform call's own step: a native step's events, and the wait
        watch told a step runs (its crash points are the platform call's, in its journal)."""
        with (
            self._step_scope(),
            self._ran(self._step_info(call.name, call.occurrence, call.site), None),
        ):
            yield

    def _step_scope(self) -> contextlib.AbstractContextManager[Any]:
        return self.watch.step() if self.watch is not None else contextlib.nullcontext()

    # A native step's body and its calls are wrapped without context managers: they are on the
    # path of every step, and ``_begin_body``/``_end_body`` (``_begin_call``/``_end_call``) do
    # in straight calls what ``_ran`` does around a platform call's body, in the same order.

    def _begin_body(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], framework: bool
    ) -> tuple[StepInfo, str, _Call | None, float]:
        """One run of a native step's body starts: ``step_start``. A framework's call
        (``agentworks.frameworks``) has its receipt instead of an argument preview. Returns
        the step's info, encoded too (its ``step_end`` shares it), its call and start."""
        begin_step_body()
        call = _CALL.get()
        if call is not None and call.name == name:
            call.executed = True
        if call is None:
            info = self._step_info(name, None, None)
        else:
            info = self._step_info(name, call.occurrence, call.site)
        members = self._step_started(info, None if framework else _preview(args, kwargs))
        return info, members, call, time.perf_counter()

    def _refuse_arguments(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A native step's arguments carry no secret. A framework's call is not searched: its
        arguments are the framework's run context, which DBOS does not save."""
        if self._has_secrets and (args or kwargs):
            self._refuse_secret(f"An argument of step {name!r}", (args, kwargs))

    def _body_raised(self, info: StepInfo, started: float, exc: BaseException) -> BaseException:
        """The body raised: ``step_error``; what to raise instead (``exc`` if it carries no
        secret, or if it is not an ``Exception``, which DBOS does not save)."""
        self._body_failed(info, started, exc)
        return self._scrubbed(exc) if isinstance(exc, Exception) else exc

    def _end_body(self, call: _Call | None) -> None:
        """As the body ends, whatever way: ``--crash during`` (called only with a crash asked)."""
        if call is not None:
            self._crash_now(call, "during")

    def _wrap_body(
        self, func: Callable[..., Any], name: str, framework: bool = False
    ) -> Callable[..., Any]:
        """Around each run of a native step's body: its events, the secret checks of its
        arguments and result, ``--crash during``."""
        result_is = f"The result of step {name!r}"
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_body(*args: Any, **kwargs: Any) -> Any:
                info, members, call, started = self._begin_body(name, args, kwargs, framework)
                try:
                    if not framework:
                        self._refuse_arguments(name, args, kwargs)
                    result = await func(*args, **kwargs)
                    if self._has_secrets:
                        self._refuse_secret(result_is, result)
                except BaseException as exc:
                    safe = self._body_raised(info, started, exc)
                    if safe is not exc:
                        raise safe from None
                    raise
                finally:
                    if self.crash is not None:
                        self._end_body(call)
                self._step_done(members, started)
                return result

            return async_body

        @functools.wraps(func)
        def sync_body(*args: Any, **kwargs: Any) -> Any:
            info, members, call, started = self._begin_body(name, args, kwargs, framework)
            try:
                if not framework:
                    self._refuse_arguments(name, args, kwargs)
                result = func(*args, **kwargs)
                if self._has_secrets:
                    self._refuse_secret(result_is, result)
            except BaseException as exc:
                safe = self._body_raised(info, started, exc)
                if safe is not exc:
                    raise safe from None
                raise
            finally:
                if self.crash is not None:
                    self._end_body(call)
            self._step_done(members, started)
            return result

        return sync_body

    def _begin_call(
        self, name: str, function: str, site: list[int] | None
    ) -> tuple[_Call, contextvars.Token[Any]]:
        """A call of a step (run or replayed), made at ``site``, starts; the wait watch is
        told a step runs."""
        n = self._calls.get(name, 0) + 1
        self._calls[name] = n
        call = _Call(name, function, n, site)
        token = _CALL.set(call)
        if self.watch is not None:
            self.watch.step_started()
        return call, token

    def _end_call(
        self, call: _Call, token: contextvars.Token[Any], exc: BaseException | None = None
    ) -> None:
        """The call returned (``exc``: raised): ``step_reused``, or ``--crash after``."""
        try:
            if self.watch is not None:
                self.watch.step_ended()
            if exc is not None:
                self._after_raise(call, exc)
        finally:
            _CALL.reset(token)
        if exc is None:
            self._after_call(call)

    def _after_call(self, call: _Call) -> None:
        if not call.executed:
            self._reused(call)
        elif self.crash is not None:
            self._crash_now(call, "after")

    def _reused(self, call: _Call, raised: str | None = None) -> None:
        """``step_reused``; ``raised``: the checkpoint was that error, raised again."""
        fields = StepReused(
            step=call.name, occurrence=call.occurrence, site=call.site, workflow_id=DBOS.workflow_id
        )
        if raised is not None:
            fields["raised"] = raised
        self.events.emit("step_reused", **fields)

    def _after_raise(self, call: _Call, exc: BaseException) -> None:
        """A call that raised without running its body replayed its checkpointed error."""
        if not call.executed and not isinstance(exc, dbos_error.DBOSException):
            self._reused(call, raised=type(exc).__name__)

    def _wrap_calls(self, wrapped: Any, name: str, func: Callable[..., Any]) -> Any:
        """Around every call of a step: see ``_begin_call``. An async step is ``Sited``: its
        call site is read where its coroutine is made (``agentworks._sites``)."""
        function = func.__name__
        if inspect.iscoroutinefunction(func):

            async def async_call(
                site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> Any:
                call, token = self._begin_call(name, function, site)
                try:
                    result = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    self._end_call(call, token, exc)
                    raise
                self._end_call(call, token)
                return result

            return Sited(wrapped, async_call, self.relay_file)

        @functools.wraps(wrapped)
        def sync_call(*args: Any, **kwargs: Any) -> Any:
            call, token = self._begin_call(name, function, call_site(self.relay_file))
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as exc:
                self._end_call(call, token, exc)
                raise
            self._end_call(call, token)
            return result

        return sync_call

    def _wrap_step_runners(self) -> None:
        """``DBOS.run_step[_async](options, fn, ...)`` of a function of the relay's own: ``fn``
        runs as a step named as DBOS names it, with a native step's events and crash points.
        Other callers' functions (a platform call's own step, a framework's) are left alone:
        they record their own events."""
        run_step, run_step_async = DBOS.run_step, DBOS.run_step_async
        code_dir = self.code_dir
        roots = tuple({str(p) + os.sep for p in (code_dir.absolute(), code_dir.resolve())})

        def relays(func: Any) -> bool:
            code = getattr(func, "__code__", None)
            return code is not None and os.path.abspath(code.co_filename).startswith(roots)

        def names(options: Any, func: Callable[..., Any]) -> tuple[str, Callable[..., Any]]:
            name = (options or {}).get("name") or func.__qualname__
            return name, self._wrap_body(func, name)

        bind_run_step = step_runner_binder("run_step")
        bind_run_step_async = step_runner_binder("run_step_async")

        @functools.wraps(run_step)  # type: ignore[arg-type]
        def run_step_wrapped(*args: Any, **kwargs: Any) -> Any:
            options, func, a, kw = bind_run_step(*args, **kwargs)
            if not relays(func):
                return run_step(options, func, *a, **kw)
            name, body = names(options, func)
            call, token = self._begin_call(name, func.__name__, call_site(self.relay_file))
            try:
                result = run_step(options, body, *a, **kw)
            except BaseException as exc:
                self._end_call(call, token, exc)
                raise
            self._end_call(call, token)
            return result

        async def run_step_async_wrapped(
            site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            options, func, a, kw = bind_run_step_async(*args, **kwargs)
            if not relays(func):
                return await run_step_async(options, func, *a, **kw)
            name, body = names(options, func)
            call, token = self._begin_call(name, func.__name__, site)
            try:
                result = await run_step_async(options, body, *a, **kw)
            except BaseException as exc:
                self._end_call(call, token, exc)
                raise
            self._end_call(call, token)
            return result

        setattr(DBOS, "run_step", staticmethod(run_step_wrapped))  # noqa: B010
        sited = Sited(run_step_async, run_step_async_wrapped, self.relay_file)
        setattr(DBOS, "run_step_async", staticmethod(sited))  # noqa: B010

    def _wrap_transactions(self) -> None:
        """``@ds.transaction()`` of a DBOS datasource: its body and its calls wrapped as a native
        step's (a ``during`` crash ends the process before the transaction commits)."""
        from dbos import AsyncSQLAlchemyDatasource, SQLAlchemyDatasource

        for cls in (SQLAlchemyDatasource, AsyncSQLAlchemyDatasource):
            original = cls.transaction

            def transaction(
                ds: Any,
                func: Callable[..., Any] | None = None,
                *,
                _original: Any = original,
                **options: Any,
            ) -> Any:
                def decorate(f: Callable[..., Any]) -> Any:
                    name = options.get("name") or f.__qualname__
                    wrapped = _original(ds, **options)(self._wrap_body(f, name))
                    return self._wrap_calls(wrapped, name, f)

                return decorate(func) if func is not None else decorate

            setattr(cls, "transaction", transaction)  # noqa: B010

    # -- workflows ----------------------------------------------------------------------------

    def _workflow_decorator(self, **options: Any) -> Callable[[Callable[..., Any]], Any]:
        dbos_decorate = self._original_workflow(**options)

        def decorate(func: Callable[..., Any]) -> Any:
            name = options.get("name") or func.__qualname__
            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def body(*args: Any, **kwargs: Any) -> Any:
                    with self._workflow_body(name):
                        result = await func(*args, **kwargs)
                        self._refuse_secret(f"The result of workflow {name!r}", result)
                    return result

                return dbos_decorate(body)

            @functools.wraps(func)
            def sync_body(*args: Any, **kwargs: Any) -> Any:
                with self._workflow_body(name):
                    result = func(*args, **kwargs)
                    self._refuse_secret(f"The result of workflow {name!r}", result)
                return result

            return dbos_decorate(sync_body)

        return decorate

    @contextlib.contextmanager
    def _workflow_body(self, name: str) -> Iterator[None]:
        """Around one run of a workflow's body (async, or sync in DBOS's thread): its start, and
        its error with the relay's traceback; an error carrying a secret is replaced."""
        self.events.emit("workflow_start", workflow=name, workflow_id=DBOS.workflow_id)
        try:
            yield
        except Exception as exc:
            self.events.emit(
                "workflow_error",
                workflow=name,
                workflow_id=DBOS.workflow_id,
                error_type=type(exc).__name__,
                error=error_text(exc)[:2000],
                traceback=user_traceback(exc, self.code_dir),
            )
            safe = self._scrubbed(exc)
            if safe is not exc:
                raise safe from None
            raise
