"""``relay events RUN`` and ``%relay events RUN``: what a run published (events and streams).

The reading is ``history.run_events``; this module holds the shared parser, the CLI command
and the terminal's lines, so ``cli.py`` only registers them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from relay_notebook.history.run_events import RunEvents, read_run_events
from relay_notebook.views.events import events_lines
from relay_notebook.workspace import Workspace

__all__ = ["add_parsers", "cli_commands", "read_run_events"]


def add_parsers(sub: Any, *, notebook: bool = False) -> None:
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


def _cmd_events(ws: Workspace, args: argparse.Namespace) -> int:
    found: RunEvents = read_run_events(ws, args.run_id)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
    else:
        print("\n".join(events_lines(found.to_dict())))
    return 0


def cli_commands() -> dict[str, Callable[[Workspace, argparse.Namespace], int]]:
    return {"events": _cmd_events}
