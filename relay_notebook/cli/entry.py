"""The ``relay`` command line: the same commands as the ``%relay`` magics, for terminals and CI.

Bad input is one line on stderr with a stable code and exit status 2; failures exit 1; a
Python traceback is never shown (set RELAY_DEBUG=1 to see one for an internal error).

Design note: a ``relay run``, ``recover`` or ``fork`` process runs one attempt, so it is its own
warm parent's only customer: when this process is the ``relay`` program, it starts that parent
before its own imports (half of its start-up), the parent imports DBOS on another core while the
command line is parsed and the relay checked, and the attempt is forked from it (``runner.warm``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from relay_notebook.runner import warm_launch

#: the commands that run an attempt in this process (unless ``--queue`` hands it to a worker);
#: ``send`` and ``wait`` resume a waiting run here (``send``: if it waits for the message;
#: ``wait``: when its timer is due), so they are given a warm parent too
ATTEMPT_COMMANDS = frozenset({"run", "recover", "fork", "send", "wait"})
_GLOBAL_OPTIONS = frozenset({"--home", "--database-url"})  # the options that take a value
#: ``warm_status`` states in which this process has no warm parent of its own (a stale or dead
#: one still gets the attempt: it is spawned, and its record says why)
_NO_PARENT = ("not started", "off")


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


def _is_program(argv0: str) -> bool:
    """Whether this process is the ``relay`` command (its script, or ``python -m``)."""
    return os.path.basename(argv0) == "relay" or argv0.endswith(
        os.path.join("relay_notebook", "cli", "__main__.py")
    )


_LAUNCHED = (
    warm_launch.launch(one_attempt=True)
    if _is_program(sys.argv[0])
    and os.environ.get(warm_launch.ENV_WARM_START, "1") != "0"
    and _early_command(sys.argv[1:]) is not None
    else None
)

import argparse
import atexit
import contextlib
import dataclasses
import threading
import traceback

from relay_notebook.cli.parser import RECORD_COMMANDS, CommandLineError, build_parser
from relay_notebook.cli.rendering import EXIT_FAILED, EXIT_OK, EXIT_USAGE, handler
from relay_notebook.commands.due import wake_in_background
from relay_notebook.commands.settings import Settings, arm_fault_point
from relay_notebook.errors import AdmissionError, RelayError, codes
from relay_notebook.errors.storage import storage_error
from relay_notebook.runner import warm
from relay_notebook.views.wording import error_text

# the early warm parent, adopted now that the modules to watch it are loaded
_EARLY = warm.start_awaited_warm_parent(_LAUNCHED) if _LAUNCHED is not None else None

__all__ = ["RECORD_COMMANDS", "CommandLineError", "build_parser", "main"]


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
    home: Path | None = None
    try:
        args = build_parser().parse_args(argv)
        # the one place the CLI reads its settings: flags first, then the environment
        settings = Settings.from_environment(home=args.home, database_url=args.database_url)
        arm_fault_point()
        args.warm_start = settings.warm_start
        if settings.warm_start and args.command == "doctor":
            warmed = warm.start_awaited_warm_parent() or warmed  # what `relay run` gets
        if args.command in ("worker", "mcp"):
            # a worker starts its warm parent itself; an MCP server's first attempt is spawned
            # and warms the next (launch_attempt), as in a notebook
            pass
        elif not (
            _forks_attempt(args) and warm.warm_status(settings.warm_start).state not in _NO_PARENT
        ):
            # no attempt here, or many (crash-each), or called in a process with no warm
            # parent (a test's in-process call): spawned, and no parent started after it
            settings = dataclasses.replace(settings, warm_start=False)
        home = Path(settings.home or "relays")
        ws = settings.workspace()
        home = ws.home
        args.backend = settings.backend()
        if args.command not in _NO_WAKE:  # a due waiting run resumes at any relay command
            wake_in_background(ws, args.backend)
        return handler(args.command)(ws, args)
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
        stored = storage_error(exc, home)  # a full disk or a read-only workspace: no bug
        if stored is not None:
            print(f"relay: error: {' '.join(str(stored).split())}", file=sys.stderr)
            return stored.exit_code
        if os.environ.get("RELAY_DEBUG"):
            traceback.print_exc()
        print(
            f"relay: internal error: {type(exc).__name__}: {' '.join(error_text(exc).split())}. "
            f"This is a bug in relay_notebook; "
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
