"""The replay check's child: new code replayed by DBOS against a copy of a run's history.

Design note: the supervisor copies the run's DBOS database into a sandbox folder; this process
opens only that copy. It forks the run's workflow there with DBOS's own ``fork_workflow`` (all
recorded steps copied, the new code's application version), so DBOS itself replays the new
code: recorded calls return their checkpoints, and DBOS checks each recorded call's name
(``DBOSUnexpectedStepError`` where the new code calls something else; ``DBOS.patch`` markers
resolve as they would on a real recovery). Before the relay is imported, ``DBOS.step`` and
``DBOS.run_step[_async]`` are replaced so that every call is noted with its call site, and any
*body* DBOS would really run — a call past the recorded history — stops the process before it
runs. Nothing here touches the run's own files; no vault value is given to this process.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from agentworks._sites import Sited, call_site

__all__ = ["main"]

_CALLS: list[dict[str, Any]] = []


def _write(report_path: Path, report: dict[str, Any]) -> NoReturn:
    tmp = report_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**report, "calls": _CALLS}, default=repr), encoding="utf-8")
    os.replace(tmp, report_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _divergence(exc: BaseException, call: dict[str, Any] | None) -> dict[str, Any]:
    """DBOS's ``DBOSUnexpectedStepError``: at ``step_id`` the new code called ``called`` where
    the history recorded ``recorded``."""
    inputs = getattr(exc, "inputs", None) or (None, None, None, None)
    return {
        "outcome": "diverged",
        "step_id": inputs[1],
        "called": inputs[2],
        "recorded": inputs[3],
        "call": call,
        "message": str(exc),
    }


class _Replay:
    """The patched decorators: note every call, stop at the first body DBOS would run."""

    def __init__(self, relay_file: str, report_path: Path) -> None:
        from dbos import DBOS

        self.relay_file = relay_file
        self.report_path = report_path
        self.original_step = DBOS.step
        self.original_run_step = DBOS.run_step
        self.original_run_step_async = DBOS.run_step_async

    def install(self) -> None:
        from dbos import DBOS

        setattr(DBOS, "step", staticmethod(self.step))  # noqa: B010
        setattr(DBOS, "run_step", staticmethod(self.run_step))  # noqa: B010
        sited = Sited(self.original_run_step_async, self.run_step_async, self.relay_file)
        setattr(DBOS, "run_step_async", staticmethod(sited))  # noqa: B010

    def _note(self, name: str, site: list[int] | None) -> dict[str, Any]:
        call = {"name": name, "line": site[-1] if site else None}
        _CALLS.append(call)
        return call

    def _stop(self, name: str) -> NoReturn:
        call = _CALLS[-1] if _CALLS and _CALLS[-1]["name"] == name else {"name": name}
        _write(self.report_path, {"outcome": "past-history", "call": call})

    def _diverged(self, exc: BaseException) -> NoReturn:
        _write(self.report_path, _divergence(exc, _CALLS[-1] if _CALLS else None))

    def _stopper(self, func: Callable[..., Any], name: str) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_stop(*args: Any, **kwargs: Any) -> Any:
                self._stop(name)

            return async_stop

        @functools.wraps(func)
        def stop(*args: Any, **kwargs: Any) -> Any:
            self._stop(name)

        return stop

    def _guard(self, wrapped: Callable[..., Any], name: str) -> Callable[..., Any]:
        from dbos import error as dbos_error

        if asyncio.iscoroutinefunction(wrapped):

            async def async_call(
                site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> Any:
                self._note(name, site)
                try:
                    return await wrapped(*args, **kwargs)
                except dbos_error.DBOSUnexpectedStepError as exc:
                    self._diverged(exc)

            return Sited(wrapped, async_call, self.relay_file)

        @functools.wraps(wrapped)
        def call(*args: Any, **kwargs: Any) -> Any:
            self._note(name, call_site(self.relay_file))
            try:
                return wrapped(*args, **kwargs)
            except dbos_error.DBOSUnexpectedStepError as exc:
                self._diverged(exc)

        return call

    def step(self, **options: Any) -> Callable[[Callable[..., Any]], Any]:
        decorate = self.original_step(**options)

        def wrap(func: Callable[..., Any]) -> Any:
            name = options.get("name") or func.__qualname__
            return self._guard(decorate(self._stopper(func, name)), name)

        return wrap

    def run_step(self, *arguments: Any, **keywords: Any) -> Any:
        from dbos import error as dbos_error

        from relay_notebook.runner.instrument import step_runner_binder

        options, func, args, kwargs = step_runner_binder("run_step")(*arguments, **keywords)
        name = str((options or {}).get("name") or getattr(func, "__qualname__", "step"))
        self._note(name, call_site(self.relay_file))

        try:
            return self.original_run_step(options, self._stopper(func, name), *args, **kwargs)
        except dbos_error.DBOSUnexpectedStepError as exc:
            self._diverged(exc)

    async def run_step_async(
        self, site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``DBOS.run_step_async`` (a ``Sited``: ``site`` is where the call was made)."""
        from dbos import error as dbos_error

        from relay_notebook.runner.instrument import step_runner_binder

        options, func, rest, keywords = step_runner_binder("run_step_async")(*args, **kwargs)
        name = str((options or {}).get("name") or getattr(func, "__qualname__", "step"))
        self._note(name, site)
        try:
            return await self.original_run_step_async(
                options, self._stopper(func, name), *rest, **keywords
            )
        except dbos_error.DBOSUnexpectedStepError as exc:
            self._diverged(exc)


async def _replay(spec: dict[str, Any]) -> Any:
    from dbos import DBOS

    from relay_notebook.runner.dbos_private import set_internal_queue_poll

    set_internal_queue_poll(0.01)  # the workflow is dequeued at once, as the child's is
    handle = await DBOS.fork_workflow_async(
        spec["run_id"], spec["start_step"], application_version=spec["app_version"]
    )
    deadline = time.monotonic() + float(spec.get("timeout_s", 60))
    while True:
        status = await DBOS.get_workflow_status_async(handle.workflow_id)
        if status is not None and status.status in ("SUCCESS", "ERROR", "CANCELLED"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the replay did not finish in time")
        await asyncio.sleep(0.01)
    return await handle.get_result()


def main(spec_path: str) -> None:
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    report_path = Path(spec["report_path"])
    code_dir = Path(spec["code_dir"])
    from dbos import DBOS
    from dbos import error as dbos_error

    from relay_notebook.record.ledger import EventWriter
    from relay_notebook.runner.child import _load_relay
    from relay_notebook.runner.child_runtime import install_runtime
    from relay_notebook.runner.spec import AttemptContext, AttemptSpec

    sandbox = Path(spec["sandbox"])
    events = EventWriter(sandbox / "events.jsonl", run_id=spec["run_id"], attempt=0)
    attempt = AttemptSpec(
        run_id=spec["run_id"],
        relay=spec["relay"],
        attempt=0,
        attempt_id="replay-check",
        code_dir=code_dir,
        entry=spec["entry"],
        app_version=spec["app_version"],
        input=None,
        database=Path(spec["database"]),
        events_path=sandbox / "events.jsonl",
        result_path=sandbox / "result.json",
        outcome_path=sandbox / "outcome.json",
        run_dir=sandbox,
        context=AttemptContext(workspace=Path(spec["workspace"])),
    )
    install_runtime(attempt, events, {}, attempt.outcome_path)
    _Replay(str(code_dir / spec["entry"]), report_path).install()
    from relay_notebook.runner.queues import DeclaredQueues

    queues = DeclaredQueues()  # module-level DBOS.register_queue: registered after the launch
    queues.install()
    try:
        _load_relay(code_dir, spec["entry"])
    except Exception as exc:
        _write(report_path, {"outcome": "failed", "message": f"{type(exc).__name__}: {exc}"})
    DBOS(
        config={
            "name": "relay",
            "system_database_url": f"sqlite:///{Path(spec['database']).resolve()}",
            "application_version": spec["app_version"],
            "executor_id": "relay-replay-check",
            "log_level": "ERROR",
        }
    )
    DBOS.launch()
    try:
        queues.register()
        result = asyncio.run(_replay(spec))
    except dbos_error.DBOSUnexpectedStepError as exc:
        _write(report_path, _divergence(exc, None))
    except Exception as exc:
        _write(report_path, {"outcome": "raised", "message": f"{type(exc).__name__}: {exc}"})
    _write(report_path, {"outcome": "returned", "result": result})


if __name__ == "__main__":
    main(sys.argv[1])
