"""The ``relay`` handlers of a run's later life: fork, lineage and diff; send, wake and wait;
``test --crash-each``; events and files. Each factory returns its commands' handlers, given the
command line's own outcome report, wait and progress (``cli.rendering``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from relay_notebook.cli.parser import fork_arguments
from relay_notebook.commands import crash_each, inputs, run_events, run_files, time_travel, waiting
from relay_notebook.commands.runs import EventCallback
from relay_notebook.workspace import Workspace


def time_travel_handlers(
    report: Any, wait: Any, progress: Callable[..., None]
) -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    """The CLI's handlers; ``report``, ``wait`` and ``progress`` are the CLI's own helpers."""

    def cmd_fork(ws: Workspace, args: argparse.Namespace) -> int:
        if getattr(args, "queue", False):
            queued = time_travel.fork_queued(
                ws, args.run_id, **fork_arguments(args), backend=args.backend
            )
            if not args.json:
                print(f"run {queued.run_id}: forked from {args.run_id} at {args.from_call}; "
                      "queued, waiting for a worker", file=sys.stderr, flush=True)  # fmt: skip
            queued_code: int = report(queued.wait(), args.json)
            return queued_code
        handle = time_travel.fork(ws, args.run_id, **fork_arguments(args),
                                  on_event=None if args.json else progress)  # fmt: skip
        if not args.json:
            print(f"run {handle.run_id}: forked from {args.run_id} at {args.from_call}",
                  file=sys.stderr, flush=True)  # fmt: skip
        code: int = report(wait(handle), args.json)
        return code

    def cmd_lineage(ws: Workspace, args: argparse.Namespace) -> int:
        tree = time_travel.lineage(ws, args.run_id)
        if args.json:
            print(json.dumps(tree.to_dict(), indent=2))
        else:
            print(time_travel.lineage_text(tree))
        return 0

    def cmd_diff(ws: Workspace, args: argparse.Namespace) -> int:
        rows = time_travel.diff(ws, args.run_a, args.run_b)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print("\n".join(time_travel.diff_lines(rows, args.run_a, args.run_b)))
        return 0

    return {"fork": cmd_fork, "lineage": cmd_lineage, "diff": cmd_diff}


def waiting_handlers(
    report: Any, wait: Any, progress: EventCallback
) -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    """The CLI's handlers; ``report``, ``wait`` and ``progress`` are the CLI's own helpers."""

    def cmd_send(ws: Workspace, args: argparse.Namespace) -> int:
        message = inputs.value_from_text(args.message, "the message")
        delivery = waiting.send(
            ws, args.run_id, args.topic, message, idempotency_key=args.idempotency_key,
            on_event=None if args.json else progress, backend=args.backend,
        )  # fmt: skip
        if args.json and (args.no_wait or delivery.handle is None):
            print(json.dumps(delivery.to_dict(), indent=2))
            return 0
        if not args.json:
            print(waiting.delivery_line(delivery), file=sys.stderr, flush=True)
        if delivery.handle is None or args.no_wait:
            return 0
        code: int = report(wait(delivery.handle), args.json)
        return code

    def cmd_wake(ws: Workspace, args: argparse.Namespace) -> int:
        handles = waiting.wake(ws, backend=args.backend, on_event=None if args.json else progress)
        if not handles:
            if args.json:
                print("[]")
            else:
                print("relay wake: no waiting run is due", file=sys.stderr)
            return 0
        outcomes = [wait(h) for h in handles]
        if args.json:
            print(json.dumps([o.to_dict() for o in outcomes], indent=2))
            return 0
        for o in outcomes:
            print(f"run {o.run_id}: {o.status} (attempt {o.attempt})")
        return 0

    def cmd_wait(ws: Workspace, args: argparse.Namespace) -> int:
        try:
            outcome = waiting.wait_for_run(
                ws, args.run_id, timeout=args.timeout, backend=args.backend,
                on_event=None if args.json else progress,
            )  # fmt: skip
        except TimeoutError as exc:
            print(f"relay wait: {exc}", file=sys.stderr)
            return 5
        code: int = report(outcome, args.json)
        return code

    return {"send": cmd_send, "wake": cmd_wake, "wait": cmd_wait}


def crash_each_handlers() -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    def cmd_test(ws: Workspace, args: argparse.Namespace) -> int:
        import sys

        run_input = inputs.run_input(text=args.input, file=args.input_file)

        def progress(point: str) -> None:
            if not args.json:
                print(f"crashing {point} …", file=sys.stderr, flush=True)

        report = crash_each.crash_each(ws, args.name, run_input, progress=progress)
        if args.json:
            print(json.dumps(report.to_dict(), indent=2, default=repr))
        else:
            print("\n".join(crash_each.report_lines(report)))
        return 0 if report.ok else 1

    return {"test": cmd_test}


def _cmd_events(ws: Workspace, args: argparse.Namespace) -> int:
    found: run_events.RunEvents = run_events.read_run_events(ws, args.run_id)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
    else:
        print("\n".join(run_events.events_lines(found)))
    return 0


def events_handlers() -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    return {"events": _cmd_events}


def _cmd_files(ws: Workspace, args: argparse.Namespace) -> int:
    files = run_files.run_files(ws, args.run_id)
    if args.json:
        print(json.dumps(run_files.files_document(files, args.call), indent=2, sort_keys=True))
    else:
        print("\n".join(run_files.files_lines(files, "terminal", args.call)))
    return 0


def files_handlers() -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    return {"files": _cmd_files}


def later_life_handlers(
    report: Any, wait: Any, progress: EventCallback
) -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    """Every handler of this module, by command (``cli.rendering.handler`` dispatches to them
    when one is chosen); ``report``, ``wait`` and ``progress`` are the CLI's own helpers."""
    return {
        **time_travel_handlers(report, wait, progress),
        **waiting_handlers(report, wait, progress),
        **crash_each_handlers(),
        **events_handlers(),
        **files_handlers(),
    }
