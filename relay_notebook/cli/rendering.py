"""The ``relay`` command line's handlers: one function per command, given the workspace and the
parsed arguments, returning the exit status (``cli`` dispatches through ``handler``).

Dispatch is lazy, as in large command lines: a handler's commands load when it runs (the
``commands`` package loads its names on first use), and the handlers of a run's later life
(``run_handlers``) are imported only when one of them is chosen.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from relay_notebook import commands
from relay_notebook.cli.parser import CommandLineError
from relay_notebook.commands import inputs
from relay_notebook.views import wording as surfaces
from relay_notebook.workspace import Workspace

if TYPE_CHECKING:
    from relay_notebook.commands.runs import (
        Event,
        RunHandle,
        RunOutcome,
        RunSummary,
        StepCall,
    )

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Handler", "handler"]

#: a command's handler: the workspace and the parsed arguments in, the exit status out
Handler = Callable[[Workspace, argparse.Namespace], int]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


class _Listed(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


_L = TypeVar("_L", bound=_Listed)


def _print_listing(
    found: Sequence[_L], as_json: bool, none_yet: str, line: Callable[[_L], str]
) -> None:
    """A listing command's output: the items as JSON, ``none_yet`` when there are none, else
    one ``line`` each (``relay runs``, ``relay relays``, ``relay workers``)."""
    if as_json:
        _print_json([item.to_dict() for item in found])
    elif not found:
        print(none_yet)
    else:
        for item in found:
            print(line(item))


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
    from relay_notebook.commands.authoring import replay_lines

    reports = commands.replay(ws, args.target, args.replay or None, release=args.release)
    # CI fails on a run recovery would fail on; a finished run that differs only says so
    ok = not any(r.blocks_recovery for r in reports)
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


def _progress(event: Event) -> None:
    """One line on stderr per step event (a fork's replay of a call it copied names the run
    it was copied from: ``runner.copied_calls``)."""
    kind = event.get("kind")
    copied_from = cast(dict[str, Any], event).get("copied_from")
    n = event.get("occurrence")
    where = f"{event.get('step')}#{n}" if n is not None else str(event.get("step"))
    if kind == "step_end":
        line = f"  step {where} done in {event.get('duration_ms')} ms"
    elif kind == "step_reused" and copied_from is not None:
        line = f"  step {where} copied from {copied_from}"
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
        n = len(outcome.reused)
        head += f", {n} checkpoint{'s' if n != 1 else ''} reused"
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
    commands.serve_worker(
        ws, args.backend, executor_id=args.executor_id, concurrency=args.concurrency,
        lease_s=args.lease, poll_s=args.poll, log=lambda line: print(line, flush=True),
    )  # fmt: skip
    return EXIT_OK


def _cmd_doctor(ws: Workspace, args: argparse.Namespace) -> int:
    from relay_notebook.commands.settings import start_report

    report = start_report(confine=ws.confine, warm_start=args.warm_start, one_attempt=True)
    if args.json:
        _print_json(report.to_dict())
    else:
        print("\n".join(report.lines()))
    return 0


def _cmd_mcp(ws: Workspace, args: argparse.Namespace) -> int:
    """``relay mcp``: serve the workspace to coding agents over stdio until the client leaves
    (``--http PORT``: streamable HTTP on loopback behind a token, until Ctrl-C); ``--config``
    prints the client's ``mcpServers`` entry instead. The MCP SDK loads only here."""
    from relay_notebook.commands.mcp_config import client_config, http_client_config

    if args.config:
        port = args.http
        _print_json(client_config(ws.home) if port is None else http_client_config(port))
        return EXIT_OK
    from relay_notebook import mcp_server

    server, served = mcp_server.build_server(ws)
    if args.http is None:
        mcp_server.serve_stdio(server, served)
        return EXIT_OK
    import os
    import secrets

    given = os.environ.get("RELAY_MCP_TOKEN")  # read here, at the boundary, like --home's
    token = given or secrets.token_urlsafe(32)
    try:
        sock = mcp_server.bind_loopback(args.http)
    except OSError as exc:
        raise CommandLineError(
            f"relay mcp --http {args.http}: cannot listen on 127.0.0.1:{args.http} "
            f"({exc.strerror or exc}); pick another port, or 0 for a free one"
        ) from None
    url = f"http://127.0.0.1:{sock.getsockname()[1]}{mcp_server.MCP_PATH}"
    print(f"relay mcp: serving {ws.home} at {url}", file=sys.stderr)
    shown = "the value of RELAY_MCP_TOKEN" if given else token
    print(f"relay mcp: send 'Authorization: Bearer {shown}'", file=sys.stderr, flush=True)
    mcp_server.serve_http(server, served, sock, token)
    return EXIT_OK


def _cmd_workers(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.workers(args.backend)
    _print_listing(found, args.json, "no workers yet (start one with: relay worker)", _worker_line)
    return EXIT_OK


def _worker_line(w: Any) -> str:
    state = "alive" if w.alive else f"lease expired {-w.expires_in_s:.0f} s ago"
    return (
        f"{w.executor_id:<28} {state:<26} running {w.running}/{w.concurrency}  "
        f"host {w.host} pid {w.pid}"
    )


def _cmd_runs(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.runs(ws, args.name)
    if args.tree and not args.json and found:
        # lazy dispatch: the time-travel family loads only for --tree
        from relay_notebook.commands import time_travel

        print("\n".join(time_travel.tree_lines(ws, [r.run_id for r in found])))
    else:
        _print_listing(found, args.json, "no runs yet (start one with: relay run NAME)", _run_line)
    if not args.json:
        for broken in commands.broken_drafts(ws, args.name):
            print(surfaces.broken_line(broken, "terminal"))
    return EXIT_OK


def _run_line(r: RunSummary) -> str:
    from relay_notebook.views.usage_text import listed_usage_text

    if r.problem is not None:
        return f"{r.run_id:<20} {r.status:<21} {r.problem}"
    return (
        f"{r.run_id:<20} {r.status:<21} attempts {r.attempts}  reused {r.reused:<3} "
        f"{r.release:<6} {surfaces.duration_text(r.active_ms, r.duration_ms, r.attempts)}"
        + (f"  {listed_usage_text(r.usage)}" if r.usage is not None else "")
    )


def _cmd_relays(ws: Workspace, args: argparse.Namespace) -> int:
    found = commands.relays(ws)
    none_yet = "no relays yet (save one with: relay check path/to/NAME.py)"
    _print_listing(found, args.json, none_yet, lambda r: r.line())
    return EXIT_OK


def _cmd_delete(ws: Workspace, args: argparse.Namespace) -> int:
    deleted = commands.delete(ws, args.target, force=args.force, backend=args.backend)
    if args.json:
        _print_json(deleted.to_dict())
    else:
        print(surfaces.deleted_line(deleted))
    return EXIT_OK


def _cmd_logs(ws: Workspace, args: argparse.Namespace) -> int:
    if args.json:
        # lazy dispatch: the REST log document's module loads only for --json
        from relay_notebook.commands.api_requests import log_document

        _print_json(log_document(ws, args.run_id))
        return EXIT_OK
    log = commands.logs(ws, args.run_id)
    run = log.run
    print(
        f"run {run.run_id}: {run.status}"
        + (f" (DBOS {run.dbos_status})" if run.dbos_status else "")
    )
    if run.status == "creating":  # a fork whose command stopped while it was made (runner.fork)
        fork = run.fork if isinstance(run.fork, dict) else {}
        what = f"a fork of {fork.get('parent')} from {fork.get('from')}" if fork else "a fork"
        print(
            f"  {what}, still being made when its command stopped: relay recover {run.run_id} "
            f"finishes making it and runs it; relay delete {run.run_id} drops it"
        )
    for w in run.outside:
        print(f"  not made by the kit: workflow {w.describe()} is in the run's DBOS database")
    for a in log.attempts:
        where = ""
        if a.executor_id not in (None, "relay-local"):
            where = f" on {a.executor_id}"
        lost = " (lost with its supervisor)" if a.lost else ""
        print(
            f"  attempt {a.attempt}: {a.status}{lost}{where}, executed "
            f"{len(a.executed)}, reused {len(a.reused)}"
        )
    if run.error and run.status not in ("succeeded", "creating"):
        print(f"  why: {run.error.get('message', '')} [{run.error.get('code', '')}]")
        said = run.error.get("stderr", "").strip().splitlines()[-5:]
        print("".join(f"    stderr: {line}\n" for line in said), end="")
    children = {c.parent_function_id: c for c in log.children if c.parent_workflow_id == run.run_id}
    for st in log.steps:
        print(_step_line(st, ""))
        child = children.get(st.function_id) if st.kind == "workflow" else None
        if child is not None:  # its calls under the call that started it (a DBOSAgent's too)
            calls = f"{len(child.steps)} call" + ("" if len(child.steps) == 1 else "s")
            head = f"child workflow {child.workflow_id} ({child.name})"
            print(f"       {head}: DBOS {child.status}, {calls}")
            print("\n".join(_step_line(c, "  ") for c in child.steps))
    if log.usage is not None:
        from relay_notebook.views.usage_text import usage_lines

        print("\n".join(usage_lines(log.usage)))
    return EXIT_OK


def _step_line(st: StepCall, indent: str) -> str:
    """One call of ``relay logs``: its kind when it is not a plain step (``model``, ``tool``,
    ``mcp``, ``workflow``), the run a fork copied it from, the attempts that executed and
    reused it, its failed tries."""
    marks = [st.kind] if st.kind not in ("step", "dbos") else []
    if st.copied_from:  # as the run graph and the side panel say it
        marks.append(f"copied from {st.copied_from}" + (", edited" if st.edited else ""))
    if st.executed_in:
        marks.append("executed in " + ",".join(map(str, st.executed_in)))
    if st.reused_in:
        marks.append("reused in " + ",".join(map(str, st.reused_in)))
    if st.retries:
        marks.append(f"{len(st.retries)} failed tries")
    return f"{indent}  {st.function_id:>4} {st.name:<24} {st.status:<13} {'; '.join(marks)}"


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


#: the handlers in this module, by command
COMMANDS: dict[str, Handler] = {
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
    "grant": _cmd_grant,
    "revoke": _cmd_revoke,
    "reconcile": _cmd_reconcile,
    "vault": _cmd_vault,
    "worker": _cmd_worker,
    "workers": _cmd_workers,
    "doctor": _cmd_doctor,
    "mcp": _cmd_mcp,
}


def handler(command: str) -> Handler:
    """The handler of ``command``: this module's, or one of a run's later life (fork, lineage,
    diff; send, wake, wait; test; events; files), whose module is imported only now."""
    found = COMMANDS.get(command)
    if found is not None:
        return found
    # lazy dispatch: run_handlers and the commands it calls load only when one is chosen
    from relay_notebook.cli.run_handlers import later_life_handlers

    return later_life_handlers(_report_outcome, _wait, _progress)[command]
