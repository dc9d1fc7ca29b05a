"""The ``relay`` command line: the same commands as the ``%relay`` magics, for terminals and CI.

Bad input is one line on stderr with a stable code and exit status 2; failures exit 1; a
Python traceback is never shown (set RELAY_DEBUG=1 to see one for an internal error).

Design note: a ``relay run``, ``recover`` or ``fork`` process runs one attempt, so it is its own
warm parent's only customer: when this module is the program, it starts that parent before its
own imports (half of its start-up), the parent imports DBOS on another core while the command
line is parsed and the relay checked, and the attempt is forked from it (``runner.warm``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from relay_notebook.runner import warm_launch

#: the commands that run an attempt in this process (unless ``--queue`` hands it to a worker)
ATTEMPT_COMMANDS = frozenset({"run", "recover", "fork"})
_GLOBAL_OPTIONS = frozenset({"--home", "--database-url"})  # the options that take a value
_LIVE = ("starting", "ready")  # a warm parent's states in which attempts are forked from it


def _early_command(argv: Sequence[str]) -> str | None:
    """The subcommand of ``argv`` if it will fork an attempt here (or report on it), at a glance:
    the parser is not loaded yet, and a wrong guess costs one warm parent ended unused."""
    words = iter(argv)
    for word in words:
        if word in _GLOBAL_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            rest = set(words)
            if word in ATTEMPT_COMMANDS | {"doctor"} and not rest & {"--queue", "-h", "--help"}:
                return word
            return None
    return None


_LAUNCHED = (
    warm_launch.launch(one_attempt=True)
    if (__name__ == "__main__" or os.path.basename(sys.argv[0]) == "relay")
    and os.environ.get(warm_launch.ENV_WARM_START, "1") != "0"
    and _early_command(sys.argv[1:]) is not None
    else None
)

import argparse
import atexit
import contextlib
import dataclasses
import json
import threading
import traceback
from typing import Any, NoReturn

from relay_notebook import (
    codes,
    commands,
    crash_each,
    events,
    inputs,
    surfaces,
    time_travel,
    waiting,
)
from relay_notebook.errors import AdmissionError, RelayError
from relay_notebook.run_files import add_parsers as add_files_parsers
from relay_notebook.run_files import cli_commands as files_commands
from relay_notebook.run_files import logs_files
from relay_notebook.runner import RunHandle, RunOutcome, warm
from relay_notebook.settings import Settings
from relay_notebook.workspace import Workspace

# the early warm parent, adopted now that the modules to watch it are loaded
_EARLY = warm.start_awaited_warm_parent(_LAUNCHED) if _LAUNCHED is not None else None

__all__ = ["CommandLineError", "build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CommandLineError(Exception):
    """The command line (or magic line) itself is wrong; the message is one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandLineError(f"{message}. See: {self.prog} --help")


def build_parser(prog: str = "relay", *, notebook: bool = False) -> argparse.ArgumentParser:
    """The command line's parser; ``notebook=True`` adds the magics' own options."""
    parser = _Parser(
        prog=prog,
        description="Author, check, publish, run and recover relays (durable DBOS programs).",
    )
    parser.add_argument(
        "--home",
        help="workspace folder (default: $RELAY_HOME or ./relays)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL system database for new runs and workers, postgresql://USER@HOST:PORT/DB "
        "(default: $RELAY_DATABASE_URL; unset: one SQLite file per run)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("check", help="run admission and the determinism lint")
    p.add_argument("target", metavar="TARGET", help="relay name or path to a .py file")
    p.add_argument(
        "--replay", nargs="*", metavar="RUN", default=None,
        help="also replay the draft against recorded runs (default: the relay's recent runs) "
        "in a sandbox copy; exit 1 if any would not replay",
    )  # fmt: skip
    p.add_argument("--release", metavar="REF", help="with --replay: check a release instead")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("graph", help="print the flow graph (relay-graph/v1)")
    p.add_argument("target", metavar="TARGET", help="relay name or path to a .py file")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the relay-graph/v1 document")
    fmt.add_argument("--svg", action="store_true", help="print an SVG drawing")

    p = sub.add_parser("publish", help="freeze the draft as a content-hashed release")
    p.add_argument("target", metavar="TARGET", help="relay name or path to a .py file")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("releases", help="list a relay's releases")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    p = sub.add_parser("verify", help="check frozen files against their release checksums")
    p.add_argument("name", metavar="NAME")
    p.add_argument("release", metavar="RELEASE", nargs="?", help="vN, a hash prefix or latest")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    p = sub.add_parser("run", help="run a relay in a supervised child process")
    p.add_argument("target", metavar="TARGET", help="relay name or path to a .py file")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="JSON", help="the run input as JSON (default: {})")
    src.add_argument("--input-file", metavar="FILE", help="read the run input from a JSON file")
    p.add_argument("--release", metavar="REF", help="run a release (vN, hash prefix, latest)")
    p.add_argument(
        "--crash",
        metavar="SPEC",
        help="crash on purpose: after:STEP[#N] (after its checkpoint) or during:STEP[#N]",
    )
    p.add_argument(
        "--queue",
        action="store_true",
        help="hand the run to the worker pool (relay worker) instead of running it here",
    )
    if not notebook:
        p.add_argument(
            "--detach", action="store_true", help="with --queue: print the run id and return"
        )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    run_parser = p

    p = sub.add_parser("recover", help="start the next attempt of an interrupted run")
    p.add_argument("run_id", metavar="RUN", help="a run id as printed by run, e.g. invoice-3")
    if not notebook:  # the magic's RunView has no such option yet: refused, not ignored
        p.add_argument(
            "--accept-lost-checkpoints",
            action="store_true",
            help="run again, on purpose, steps whose checkpoints the database lost",
        )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if notebook:
        for q in (run_parser, p):
            q.add_argument("--wait", action="store_true", help="block until the attempt ends")
            q.add_argument("-o", "--output", metavar="VAR", help="bind the result to VAR")
        sub.add_parser("lab", help="the recovery lab: the five scenarios as buttons")
        _add_record_parsers(sub)

    time_travel.add_parsers(sub, notebook=notebook)
    waiting.add_parsers(sub, notebook=notebook)
    crash_each.add_parsers(sub, notebook=notebook)
    events.add_parsers(sub, notebook=notebook)

    p = sub.add_parser("runs", help="list runs")
    p.add_argument("name", metavar="NAME", nargs="?", help="only this relay's runs")
    p.add_argument("--tree", action="store_true", help="show forks under the run they came from")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    p = sub.add_parser("relays", help="list relays (a draft failing admission is broken)")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    p = sub.add_parser(
        "delete", help="delete a run, or a relay (its draft, releases and, with --force, runs)"
    )
    p.add_argument("target", metavar="NAME|RUN", help="a relay name or a run id")
    p.add_argument(
        "--force", action="store_true", help="delete a relay's runs with it (none may be live)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("grant", help="restore a relay's access")
    p.add_argument("name", metavar="NAME")
    p = sub.add_parser("revoke", help="revoke a relay's access (runs and recoveries are denied)")
    p.add_argument("name", metavar="NAME")

    p = sub.add_parser("reconcile", help="resolve an uncertain call so recovery can go on")
    p.add_argument("run_id", metavar="RUN")
    act = p.add_mutually_exclusive_group()
    act.add_argument("--result", metavar="JSON", help="the call's outcome, as established")
    act.add_argument("--retry", action="store_true", help="the call is safe to make again")
    p.add_argument("--key", help="which uncertain call (when there are several)")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("vault", help="workspace secrets")
    vsub = p.add_subparsers(dest="vault_command", metavar="ACTION", parser_class=_Parser)
    vsub.required = True
    v = vsub.add_parser("set", help="store a secret; the value is read from stdin, never echoed")
    v.add_argument("name", metavar="NAME")
    vsub.add_parser("list", help="the secrets' names (never their values)")

    p = sub.add_parser("logs", help="a run's attempts and steps")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_files_parsers(sub)

    if not notebook:
        p = sub.add_parser(
            "worker", help="execute queued runs (PostgreSQL); runs until Ctrl-C or SIGTERM"
        )
        p.add_argument(
            "--concurrency",
            type=_positive_int,
            default=2,
            help="runs executed at once by each worker (default 2; the latest started worker's "
            "setting applies to the whole pool)",
        )
        p.add_argument("--id", dest="executor_id", help="executor id (default: HOST-PID)")
        p.add_argument(
            "--lease",
            type=_positive_float,
            default=15.0,
            metavar="SECONDS",
            help="how long the pool waits after a worker's last heartbeat before recovering "
            "its runs elsewhere (default 15)",
        )
    p = sub.add_parser(
        "doctor", help="which start (warm or spawned) and confinement runs get here, and why"
    )
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p = sub.add_parser("workers", help="list the worker pool's leases")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    return parser


#: the notebook's record subcommands on RUN, and what each shows
RECORD_COMMANDS = {
    "preview": "what recovering the run would do: checkpoints reused, calls run again",
    "steps": "the run's step calls as a pandas DataFrame (bind it with -o VAR)",
    "attempts": "the run's process attempts as a pandas DataFrame (bind it with -o VAR)",
    "timeline": "the run's attempts and step bodies on a time axis (a plotly figure)",
}


def _add_record_parsers(sub: Any) -> None:
    for name, help_text in RECORD_COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        p.add_argument("run_id", metavar="RUN", help="a run id, e.g. invoice-3")
        if name in ("steps", "attempts"):
            p.add_argument("-o", "--output", metavar="VAR", help="bind the DataFrame to VAR")
        if name == "steps":
            p.add_argument(
                "--outputs", action="store_true", help="add redacted previews of each output"
            )
        p.add_argument("--json", action="store_true", help="return plain JSON-ready data")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, got {value:g}")
    return value


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def _cmd_check(ws: Workspace, args: argparse.Namespace) -> int:
    if args.replay is not None:
        return _cmd_replay(ws, args)
    report = commands.check(ws, args.target)
    if args.json:
        _print_json(report.to_dict())
    else:
        for d in report.diagnostics:
            print(d.format())
        verdict = "admitted" if report.ok else "rejected"
        print(
            f"{report.relay}: {verdict} ({len(report.errors)} errors, "
            f"{len(report.warnings)} warnings)"
        )
    return EXIT_OK if report.ok else EXIT_FAILED


def _cmd_replay(ws: Workspace, args: argparse.Namespace) -> int:
    from relay_notebook.runner.replay import replay_lines

    reports = commands.replay(ws, args.target, args.replay or None, release=args.release)
    ok = all(r.compatible for r in reports)
    if args.json:
        _print_json(
            {"relay": args.target, "code": args.release or "draft", "compatible": ok,
             "runs": [r.to_dict() for r in reports]}
        )  # fmt: skip
    else:
        code = f"release {args.release}" if args.release else "the draft"
        print("\n".join(replay_lines(args.target, reports, code)))
    return EXIT_OK if ok else EXIT_FAILED


def _cmd_graph(ws: Workspace, args: argparse.Namespace) -> int:
    flow = commands.graph(ws, args.target)
    if args.json:
        _print_json(flow.to_dict())
    elif args.svg:
        from relay_notebook.views.svg import render_svg

        sys.stdout.write(render_svg(flow))
    else:
        from relay_notebook.views.text import graph_text

        print(graph_text(flow))
    return EXIT_OK


def _cmd_publish(ws: Workspace, args: argparse.Namespace) -> int:
    result = commands.publish(ws, args.target)
    if args.json:
        _print_json(result.to_dict())
    else:
        for d in result.report.warnings:
            print(d.format(), file=sys.stderr)
        print(surfaces.published_line(result, "terminal"))
    return EXIT_OK


def _cmd_releases(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.releases(ws, args.name)
    if args.json:
        _print_json([r.to_dict() for r in found])
    else:
        print("\n".join(surfaces.releases_lines(args.name, found, "terminal")))
    return EXIT_OK


def _cmd_verify(ws: Workspace, args: argparse.Namespace) -> int:
    reports = commands.verify(ws, args.name, args.release)
    if args.json:
        _print_json(
            [
                {
                    "relay": r.release.relay,
                    "version": r.release.version,
                    "hash": r.release.hash,
                    "ok": r.ok,
                    "problems": r.problems,
                }
                for r in reports
            ]
        )
    else:
        print("\n".join(surfaces.verify_lines(reports, "terminal")))
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED


def _read_input(args: argparse.Namespace) -> Any:
    return inputs.run_input(text=args.input, file=args.input_file)


def _progress(event: dict[str, Any]) -> None:
    kind = event.get("kind")
    n = event.get("occurrence")
    where = f"{event.get('step')}#{n}" if n is not None else str(event.get("step"))
    if kind == "step_end":
        line = f"  step {where} done in {event.get('duration_ms')} ms"
    elif kind == "step_reused":
        line = f"  step {where} reused from its checkpoint"
    elif kind == "step_error":
        line = f"  step {where} attempt {event.get('step_attempt')} failed: {event.get('error')}"
    elif kind == "crash_injected":
        line = f"  crashing {event.get('when')} {where} (--crash)"
    else:
        return
    print(line, file=sys.stderr, flush=True)


def _report_outcome(outcome: RunOutcome, as_json: bool) -> int:
    if as_json:
        _print_json(outcome.to_dict())
        return outcome.exit_code
    head = f"run {outcome.run_id}: {outcome.status} (attempt {outcome.attempt})"
    if outcome.reused:
        head += f", {len(outcome.reused)} checkpoints reused"
    print(head)
    if outcome.status == "succeeded":
        print(json.dumps(outcome.result, indent=2))
    elif outcome.error:
        print(outcome.error.get("message", ""), file=sys.stderr)
        if outcome.error.get("traceback"):
            print(outcome.error["traceback"].rstrip(), file=sys.stderr)
        if outcome.error.get("stderr"):
            print(outcome.error["stderr"].rstrip(), file=sys.stderr)
    return outcome.exit_code


def _wait(handle: RunHandle) -> RunOutcome:
    try:
        return handle.wait()
    except KeyboardInterrupt:
        print(f"relay: stopping run {handle.run_id} ...", file=sys.stderr)
        return handle.cancel()


def _cmd_run(ws: Workspace, args: argparse.Namespace) -> int:
    if args.queue:
        return _run_queued(ws, args)
    handle = commands.run(
        ws,
        args.target,
        run_input=_read_input(args),
        release=args.release,
        crash=args.crash,
        on_event=None if args.json else _progress,
        backend=args.backend,
    )
    if not args.json:
        print(f"run {handle.run_id}: started", file=sys.stderr, flush=True)
    return _report_outcome(_wait(handle), args.json)


def _run_queued(ws: Workspace, args: argparse.Namespace) -> int:
    queued = commands.enqueue(
        ws,
        args.target,
        run_input=_read_input(args),
        release=args.release,
        crash=args.crash,
        backend=args.backend,
    )
    if args.detach:
        if args.json:
            _print_json(
                {"run_id": queued.run_id, "relay": queued.relay, "status": "queued",
                 "invocation_id": queued.invocation_id}
            )  # fmt: skip
        else:
            print(f"run {queued.run_id}: queued (follow it with: relay logs {queued.run_id})")
        return EXIT_OK
    if not args.json:
        print(f"run {queued.run_id}: queued; waiting for a worker", file=sys.stderr, flush=True)
    return _report_outcome(queued.wait(), args.json)


def _cmd_recover(ws: Workspace, args: argparse.Namespace) -> int:
    handle = commands.recover(
        ws, args.run_id, on_event=None if args.json else _progress, backend=args.backend,
        accept_lost_checkpoints=args.accept_lost_checkpoints,
    )  # fmt: skip
    return _report_outcome(_wait(handle), args.json)


def _cmd_worker(ws: Workspace, args: argparse.Namespace) -> int:
    from relay_notebook.runner.worker import Worker, WorkerSettings, default_executor_id

    backend = commands.require_pool_backend(args.backend, "relay worker")
    settings = WorkerSettings(
        executor_id=args.executor_id or default_executor_id(),
        concurrency=args.concurrency,
        lease_s=args.lease,
    )
    worker = Worker(ws, backend, settings, log=lambda line: print(line, flush=True))
    worker.start()
    worker.serve()
    return EXIT_OK


def _cmd_doctor(ws: Workspace, args: argparse.Namespace) -> int:
    from relay_notebook.runner.doctor import start_report

    report = start_report(confine=ws.confine, warm_start=args.warm_start, one_attempt=True)
    if args.json:
        _print_json(report.to_dict())
    else:
        print("\n".join(report.lines()))
    return 0


def _cmd_workers(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.workers(args.backend)
    if args.json:
        _print_json([w.to_dict() for w in found])
    elif not found:
        print("no workers yet (start one with: relay worker)")
    else:
        for w in found:
            state = "alive" if w.alive else f"lease expired {-w.expires_in_s:.0f} s ago"
            print(
                f"{w.executor_id:<28} {state:<26} running {w.running}/{w.concurrency}  "
                f"host {w.host} pid {w.pid}"
            )
    return EXIT_OK


def _cmd_runs(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.runs(ws, args.name)
    if args.tree and not args.json and found:
        print("\n".join(time_travel.tree_lines(ws, [r.run_id for r in found])))
    elif args.json:
        _print_json([r.to_dict() for r in found])
    elif not found:
        print("no runs yet (start one with: relay run NAME)")
    else:
        for r in found:
            if r.problem is not None:
                print(f"{r.run_id:<20} {r.status:<21} {r.problem}")
                continue
            print(
                f"{r.run_id:<20} {r.status:<21} attempts {r.attempts}  reused {r.reused:<3} "
                f"{r.release:<6} {surfaces.duration_text(r.active_ms, r.duration_ms, r.attempts)}"
            )
    if not args.json:
        for broken in commands.broken_drafts(ws, args.name):
            print(surfaces.broken_line(broken, "terminal"))
    return EXIT_OK


def _cmd_relays(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.relays(ws)
    if args.json:
        _print_json([r.to_dict() for r in found])
    elif not found:
        print("no relays yet (save one with: relay check path/to/NAME.py)")
    else:
        for r in found:
            print(r.line())
    return EXIT_OK


def _cmd_delete(ws: Workspace, args: argparse.Namespace) -> int:
    deleted = commands.delete(ws, args.target, force=args.force, backend=args.backend)
    if args.json:
        _print_json(deleted.to_dict())
    else:
        print(surfaces.deleted_line(deleted))
    return EXIT_OK


def _cmd_logs(ws: Workspace, args: argparse.Namespace) -> int:
    log = commands.logs(ws, args.run_id)
    if args.json:
        doc = log.to_dict()
        if log.run["status"] in ("interrupted", "needs_reconciliation", "denied"):
            from relay_notebook.history.preview import preview_recovery

            doc["preview"] = preview_recovery(ws, args.run_id).to_dict()
        doc["files"] = logs_files(ws, args.run_id)
        _print_json(doc)
        return EXIT_OK
    run = log.run
    print(f"run {run['run_id']}: {run['status']} (DBOS {run['dbos_status']})")
    for a in log.attempts:
        where = ""
        if a.get("executor_id") not in (None, "relay-local"):
            where = f" on {a['executor_id']}"
        lost = " (lost with its supervisor)" if a.get("lost") else ""
        print(
            f"  attempt {a['attempt']}: {a['status']}{lost}{where}, executed "
            f"{len(a['executed'])}, reused {len(a['reused'])}"
        )
    for st in log.steps:
        marks = []
        if st["executed_in"]:
            marks.append("executed in " + ",".join(map(str, st["executed_in"])))
        if st["reused_in"]:
            marks.append("reused in " + ",".join(map(str, st["reused_in"])))
        if st["retries"]:
            marks.append(f"{len(st['retries'])} failed tries")
        print(f"  {st['function_id']:>4} {st['name']:<24} {st['status']:<13} {'; '.join(marks)}")
    return EXIT_OK


def _cmd_grant(ws: Workspace, args: argparse.Namespace) -> int:
    commands.grant(ws, args.name)
    print(surfaces.access_line(args.name, True, "terminal"))
    return EXIT_OK


def _cmd_revoke(ws: Workspace, args: argparse.Namespace) -> int:
    commands.revoke(ws, args.name)
    print(surfaces.access_line(args.name, False, "terminal"))
    return EXIT_OK


def _cmd_reconcile(ws: Workspace, args: argparse.Namespace) -> int:
    if args.result is None and not args.retry:
        pending = commands.pending_calls(ws, args.run_id)
        if args.json:
            _print_json([{"key": p.key, "call": p.call, "attempt": p.attempt} for p in pending])
        else:
            print("\n".join(surfaces.pending_lines(args.run_id, pending, "terminal")))
        return EXIT_OK
    result = None
    if args.result is not None:
        result = inputs.reconcile_result(args.result)
    state = commands.reconcile(ws, args.run_id, result=result, retry=args.retry, key=args.key)
    if args.json:
        _print_json({"key": state.key, "state": state.state, "result": state.result})
    else:
        print(surfaces.reconciled_line(args.run_id, state, "terminal"))
    return EXIT_OK


def _cmd_vault(ws: Workspace, args: argparse.Namespace) -> int:
    if args.vault_command == "list":
        for name in commands.vault_names(ws):
            print(name)
        return EXIT_OK
    if sys.stdin.isatty():
        import getpass

        value = getpass.getpass(f"value for {args.name}: ")
    else:
        value = sys.stdin.read().rstrip("\n")
    commands.vault_set(ws, args.name, value)
    print(f"{args.name}: stored in the vault of {ws.home}")
    return EXIT_OK


_COMMANDS = {
    "check": _cmd_check,
    "graph": _cmd_graph,
    "publish": _cmd_publish,
    "releases": _cmd_releases,
    "verify": _cmd_verify,
    "run": _cmd_run,
    "recover": _cmd_recover,
    "runs": _cmd_runs,
    "relays": _cmd_relays,
    "delete": _cmd_delete,
    "logs": _cmd_logs,
    **files_commands(),
    "grant": _cmd_grant,
    "revoke": _cmd_revoke,
    "reconcile": _cmd_reconcile,
    "vault": _cmd_vault,
    "worker": _cmd_worker,
    "workers": _cmd_workers,
    "doctor": _cmd_doctor,
    **time_travel.cli_commands(_report_outcome, _wait, _progress),
    **waiting.cli_commands(_report_outcome, _wait, _progress),
    **crash_each.cli_commands(),
    **events.cli_commands(),
}


#: commands that do not wake due runs first (``wake`` itself; a worker wakes its own)
_NO_WAKE = frozenset({"wake", "worker"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (``relay`` calls ``sys.exit`` with it)."""
    code = _main(argv)
    if argv is None and _EARLY is not None:
        _leave_now(code)  # the program's run: end as a bare DBOS script does
    return code


def _leave_now(code: int) -> None:
    """Exit at once, as bare DBOS scripts do (``os._exit``): exit handlers run, but not the
    interpreter's teardown of every module, tens of milliseconds after a run."""
    main_thread = threading.main_thread()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not main_thread):
        return  # a thread Python would wait for: leave the usual way
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> int:
    warmed = _EARLY  # a warm parent started for this command, let go once it is done
    try:
        args = build_parser().parse_args(argv)
        # the one place the CLI reads its settings: flags first, then the environment
        settings = Settings.from_environment(home=args.home, database_url=args.database_url)
        args.warm_start = settings.warm_start
        if settings.warm_start and args.command == "doctor":
            warmed = warm.start_awaited_warm_parent() or warmed  # what `relay run` gets
        if args.command == "worker":
            pass  # a worker forks many attempts: it starts its warm parent itself
        elif not (_forks_attempt(args) and warm.warm_status(settings.warm_start).state in _LIVE):
            # no attempt here, or many (crash-each), or called in a process with no warm
            # parent (a test's in-process call): spawned, and no parent started after it
            settings = dataclasses.replace(settings, warm_start=False)
        ws = settings.workspace()
        args.backend = settings.backend()
        if args.command not in _NO_WAKE:  # a due waiting run resumes at any relay command
            waiting.wake_in_background(ws, args.backend)
        return _COMMANDS[args.command](ws, args)
    except CommandLineError as exc:
        print(f"relay: error: {exc} [{codes.USAGE.code}]", file=sys.stderr)
        return EXIT_USAGE
    except AdmissionError as exc:
        for d in exc.diagnostics:
            print(d.format(), file=sys.stderr)
        errors = sum(d.severity == "error" for d in exc.diagnostics)
        print(
            f"relay: error: relay {exc.relay!r} failed admission ({errors} errors); fix them and "
            f"run 'relay check {exc.relay}' [{exc.code}]",
            file=sys.stderr,
        )
        return exc.exit_code
    except RelayError as exc:
        print(f"relay: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # the reader went away (`relay graph x --json | head`): not an error worth a message
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("relay: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get("RELAY_DEBUG"):
            traceback.print_exc()
        print(
            f"relay: internal error: {type(exc).__name__}: {exc}. This is a bug in relay_notebook; "
            f"rerun with RELAY_DEBUG=1 for a traceback [{codes.INTERNAL_ERROR.code}]",
            file=sys.stderr,
        )
        return EXIT_FAILED
    finally:
        if warmed is not None:
            warm.let_go_warm_parent(warmed)


def _forks_attempt(args: argparse.Namespace) -> bool:
    """Whether this command runs its attempt here (not ``--queue``: a worker's)."""
    return args.command in ATTEMPT_COMMANDS and not getattr(args, "queue", False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
