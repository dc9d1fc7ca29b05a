"""The ``relay`` command line's parser, shared with the ``%relay`` magics (``notebook=True``).

Every command's words, the families' (time travel, waiting runs, run files, events, crash-each)
included; no command runs here.
"""

from __future__ import annotations

import argparse
import math
from typing import Any, NoReturn

__all__ = ["RECORD_COMMANDS", "CommandLineError", "build_parser", "fork_arguments"]


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

    p = _on_a_relay(sub, "check", "run admission and the determinism lint")
    p.add_argument(
        "--replay", nargs="*", metavar="RUN", default=None,
        help="also replay the draft against recorded runs (default: the relay's recent runs) "
        "in a sandbox copy; exit 1 if any would not replay",
    )  # fmt: skip
    p.add_argument("--release", metavar="REF", help="with --replay: check a release instead")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = _on_a_relay(sub, "graph", "print the flow graph (relay-graph/v1)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the relay-graph/v1 document")
    fmt.add_argument("--svg", action="store_true", help="print an SVG drawing")

    p = _on_a_relay(sub, "publish", "freeze the draft as a content-hashed release")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("releases", help="list a relay's releases")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    p = sub.add_parser("verify", help="check frozen files against their release checksums")
    p.add_argument("name", metavar="NAME")
    p.add_argument("release", metavar="RELEASE", nargs="?", help="vN, a hash prefix or latest")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    p = _on_a_relay(sub, "run", "run a relay in a supervised child process")
    _input_options(p, "the run", "{}")
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

    _add_time_travel_parsers(sub, notebook=notebook)
    _add_waiting_parsers(sub, notebook=notebook)
    _add_crash_each_parsers(sub, notebook=notebook)
    _add_events_parsers(sub, notebook=notebook)

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
    _add_files_parsers(sub)

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
        p.add_argument(
            "--poll",
            type=_positive_float,
            default=0.5,
            metavar="SECONDS",
            help="how often the pool looks at the queue besides being woken by a queued run or "
            "a finished one (default 0.5; like --concurrency, the latest started worker's "
            "setting applies to the whole pool)",
        )
    p = sub.add_parser(
        "doctor", help="which start (warm or spawned) and confinement runs get here, and why"
    )
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p = sub.add_parser("workers", help="list the worker pool's leases")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    _add_mcp_parser(sub, notebook=notebook)
    return parser


def _on_a_relay(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """The parser of command ``name`` on one relay: ``TARGET``, its name or its file."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=summary)
    p.add_argument("target", metavar="TARGET", help="relay name or path to a .py file")
    return p


def _input_options(p: argparse.ArgumentParser, whose: str, default: str) -> None:
    """``--input JSON`` or ``--input-file FILE``: ``whose`` input (``default`` without)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="JSON", help=f"{whose} input as JSON (default: {default})")
    src.add_argument("--input-file", metavar="FILE", help=f"read {whose} input from a JSON file")


def _add_mcp_parser(sub: Any, *, notebook: bool = False) -> None:
    """``relay mcp``: the workspace served to coding agents over MCP (``%relay mcp``: the
    client configuration that starts it)."""
    if notebook:
        sub.add_parser("mcp", help="print the mcpServers JSON that serves this workspace to agents")
        return
    p = sub.add_parser(
        "mcp", help="serve the workspace's relays to coding agents over MCP (stdio, or --http)"
    )
    p.add_argument(
        "--http", type=_port, metavar="PORT",
        help="serve streamable HTTP on 127.0.0.1:PORT instead (0: a free port), behind a bearer "
        "token ($RELAY_MCP_TOKEN, else a new one, printed on stderr with the URL)",
    )  # fmt: skip
    p.add_argument(
        "--config", action="store_true",
        help="print the mcpServers JSON for this workspace (a client's configuration) and exit",
    )  # fmt: skip


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


def _number(text: str, kind: type[int] | type[float], what: str) -> float:
    """``text`` as a ``kind`` number, or argparse's error saying what was expected."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = int(_number(text, int, "a whole number"))
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = int(_number(text, int, "a port number"))
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = _number(text, float, "seconds")
    if not math.isfinite(value):  # float() reads "inf" and "nan", which no interval can be
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, got {value:g}")
    return value


def _add_time_travel_parsers(sub: Any, *, notebook: bool = False) -> None:
    """``fork``, ``lineage`` and ``diff`` on the CLI's (or the magic's) subparsers."""
    p = sub.add_parser(
        "fork", help="a new run from a call of RUN: earlier calls copied, the rest run fresh"
    )
    p.add_argument("run_id", metavar="RUN", help="the run to fork, e.g. invoice-3")
    p.add_argument(
        "--from", dest="from_call", metavar="STEP[#N]", required=True,
        help="the first call that runs fresh (the N-th call of STEP, from 1)",
    )  # fmt: skip
    _input_options(p, "the fork's", "RUN's")
    p.add_argument(
        "--set", dest="sets", metavar="STEP#N=JSON", action="append", default=[],
        help="replace a copied call's output (repeatable)",
    )  # fmt: skip
    code = p.add_mutually_exclusive_group()
    code.add_argument("--release", metavar="REF", help="run a release's code")
    code.add_argument("--draft", action="store_true", help="run the current draft (after a fix)")
    p.add_argument("--crash", metavar="SPEC", help="crash the fork on purpose (as for run)")
    if not notebook:
        p.add_argument(
            "--queue", action="store_true",
            help="hand the fork to the worker pool (relay worker) instead of running it here",
        )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if notebook:
        p.add_argument("--wait", action="store_true", help="block until the attempt ends")
        p.add_argument("-o", "--output", metavar="VAR", help="bind the result to VAR")
    p = sub.add_parser("lineage", help="a run's forks as a tree")
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--json", action="store_true", help="print the tree as JSON")
    p = sub.add_parser("diff", help="two runs compared call by call")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", action="store_true", help="print a JSON list")


def fork_arguments(args: argparse.Namespace, variables: dict[str, Any] | None = None) -> Any:
    """The keyword arguments of ``fork`` (its request, its crash) from parsed ``relay fork``
    arguments."""
    # lazy dispatch: the fork's modules load when the fork command is chosen, not with the parser
    from relay_notebook.commands import inputs
    from relay_notebook.commands.time_travel import ForkRequest, parse_sets

    given = args.input is not None or args.input_file is not None
    request = ForkRequest(
        args.from_call,
        run_input=inputs.run_input(text=args.input, file=args.input_file, variables=variables)
        if given
        else None,
        input_given=given,
        sets=parse_sets(args.sets, variables),
        release=args.release,
        draft=args.draft,
    )
    return {"request": request, "crash": args.crash}


def _add_waiting_parsers(sub: Any, *, notebook: bool = False) -> None:
    """``send`` and ``wake`` on the CLI's (or the magic's) subparsers."""
    p = sub.add_parser("send", help="send a message to a run (e.g. an approval); it resumes")
    p.add_argument("run_id", metavar="RUN", help="the run, e.g. refund-3")
    p.add_argument("topic", metavar="TOPIC", help="the topic the run waits on (DBOS.recv)")
    p.add_argument(
        "message", metavar="JSON", help="the message: JSON (or, in a notebook, a variable name)"
    )
    p.add_argument(
        "--idempotency-key", metavar="KEY",
        help="deliver at most once per KEY (a retried send is not delivered twice)",
    )  # fmt: skip
    if notebook:
        p.add_argument("--wait", action="store_true", help="block until the resumed run ends")
        p.add_argument("-o", "--output", metavar="VAR", help="bind the run's result to VAR")
    else:
        p.add_argument(
            "--no-wait", action="store_true", help="do not wait for the resumed attempt to end"
        )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p = sub.add_parser(
        "wake", help="resume waiting runs whose timer is due or whose message came (for cron)"
    )
    p.add_argument("--json", action="store_true", help="print a JSON list of the outcomes")
    p = sub.add_parser(
        "wait", help="block until a run finishes, through its waits (resuming it when due)"
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--timeout", type=float, metavar="S", help="give up after S seconds")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if notebook:
        p.add_argument("-o", "--output", metavar="VAR", help="bind the result to VAR")


def _add_crash_each_parsers(sub: Any, *, notebook: bool = False) -> None:
    """``relay test NAME --crash-each`` on the CLI's (or the magic's) subparsers."""
    p = sub.add_parser("test", help="crash a relay at every point and recover each run")
    p.add_argument("name", metavar="NAME", help="the relay to test")
    p.add_argument(
        "--crash-each", action="store_true", required=True,
        help="crash after and during every call of a clean run, recover, compare the results",
    )  # fmt: skip
    _input_options(p, "the run", "{}")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if notebook:
        p.add_argument("-o", "--output", metavar="VAR", help="bind the report to VAR")


def _add_events_parsers(sub: Any, *, notebook: bool = False) -> None:
    """The ``events`` subcommand (the CLI's and the magics' shared parser)."""
    p = sub.add_parser(
        "events", help="a run's DBOS events, stream values and messages (as they are now)"
    )
    p.add_argument("run_id", metavar="RUN", help="a run id, e.g. approval-1")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    if notebook:
        p.add_argument(
            "-o", "--output", metavar="VAR", help="bind {'events': {...}, 'streams': {...}} to VAR"
        )


def _add_files_parsers(sub: Any) -> None:
    """The ``files`` subcommand (the CLI's and the magics' shared parser)."""
    p = sub.add_parser("files", help="a run's execution/ folder: each agent call's files")
    p.add_argument("run_id", metavar="RUN", help="a run id, e.g. invoice-3")
    p.add_argument("call", metavar="CALL", nargs="?", help="only this call folder, e.g. call-2")
    p.add_argument("--json", action="store_true", help="print one JSON object")
