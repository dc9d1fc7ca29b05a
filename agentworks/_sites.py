"""Call sites: where in the relay's own source a step or platform call was made.

Design note: the flow graph draws one node per call site, inlining helpers at each call
(``relay_notebook.source.flow``), so a call is named by the lines of the helper calls that led
to it and then its own line, outermost first. At run time that is the stack of the relay
module's frames: the innermost frame's line is the call, and an outer frame's line counts only
where it calls another function of the module (a comprehension or generator expression is
part of the function it sits in). A call awaited directly still has its caller on the stack;
one scheduled as a task (``asyncio.gather``) has not, so coroutine origin tracking keeps the
stack where the coroutine was made (``sys.set_coroutine_origin_tracking_depth``), read from
the running task when the frames end before reaching the relay.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Final

__all__ = ["call_site", "track_origins"]

#: frames searched for the relay's source; deeper stacks are cut off here
MAX_DEPTH: Final = 64

Frame = tuple[str, int, str]  # file, line, function name


def track_origins(depth: int = MAX_DEPTH) -> None:
    """Remember where coroutines are made, so calls run as tasks still have a call site."""
    sys.set_coroutine_origin_tracking_depth(depth)


def _site(frames: Iterable[Frame], relay_file: str) -> list[int] | None:
    """The call site in ``relay_file`` from frames innermost first, or None if none is there."""
    mine = [(line, name) for file, line, name in frames if file == relay_file]
    if not mine:
        return None
    site = [mine[0][0]]
    for (_, inner_name), (line, _) in itertools.pairwise(mine):
        if not inner_name.startswith("<"):
            site.append(line)  # this frame called a function of the relay's
    site.reverse()
    return site


def _stack(frame: FrameType | None) -> list[Frame]:
    found: list[Frame] = []
    while frame is not None and len(found) < MAX_DEPTH:
        code = frame.f_code
        found.append((code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return found


def call_site(relay_file: str | os.PathLike[str], skip: int = 1) -> list[int] | None:
    """Where the call being made now came from in ``relay_file``: see the module's note.

    ``skip`` frames (this function's caller by default) are left out of the search.
    """
    target = os.fspath(relay_file)
    frame = sys._getframe(skip + 1)
    site = _site(_stack(frame), target)
    if site is not None:
        return site
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    coro = task.get_coro() if task is not None else None
    origin = getattr(coro, "cr_origin", None)
    if not origin:
        return None
    return _site(((f, line, name) for f, line, name in origin), target)
