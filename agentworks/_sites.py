"""Call sites: where in the relay's own source a step or platform call was made.

Design note: the flow graph draws one node per call site, inlining helpers at each call
(``relay_notebook.source.flow``), so a call is named by the lines of the helper calls that led
to it and then its own line, outermost first. At run time that is the stack of the relay
module's frames: the innermost frame's line is the call, and an outer frame's line counts only
where it calls another function of the module (a comprehension or generator expression is
part of the function it sits in). A call awaited directly still has its caller on the stack;
one scheduled as a task (``asyncio.gather``) has not, so coroutine origin tracking keeps the
stack where the coroutine was made (``sys.set_coroutine_origin_tracking_depth``), read from
the running task when the frames end before reaching the relay. Tracking costs every
coroutine made, and a step's machinery (DBOS's wrappers, the kit's) makes several per call,
none of them where a relay's call can start; ``untracked`` runs that machinery without it and
``tracked`` turns it back on for the step's own body, which is the relay's code again.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import types
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any, Final, TypeVar

__all__ = ["call_site", "track_origins", "tracked", "untracked"]

#: frames searched for the relay's source; deeper stacks are cut off here
MAX_DEPTH: Final = 64

Frame = tuple[str, int, str]  # file, line, function name
T = TypeVar("T")

_origin_depth = 0  # what ``track_origins`` set: the depth ``tracked`` restores


def track_origins(depth: int = MAX_DEPTH) -> None:
    """Remember where coroutines are made, so calls run as tasks still have a call site."""
    global _origin_depth
    _origin_depth = depth
    sys.set_coroutine_origin_tracking_depth(depth)


@types.coroutine
def _with_depth(depth: int, make: Callable[[], Awaitable[T]]) -> Generator[Any, Any, T]:
    """Await what ``make`` returns with coroutine origin tracking at ``depth`` whenever it runs:
    the delegation of ``yield from`` (PEP 380), setting the depth around each resumption and
    restoring the caller's after it, so other tasks, run in between, keep theirs. What
    ``make`` returns is awaited here, never run as a task, so it is made without an origin."""
    get_depth = sys.get_coroutine_origin_tracking_depth
    set_depth = sys.set_coroutine_origin_tracking_depth
    inner: Any = None
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        outer = get_depth()
        try:
            if inner is None:
                set_depth(0)
                made = make()  # a generator-based coroutine (``types.coroutine``) is its own
                inner = made if isinstance(made, types.GeneratorType) else made.__await__()
            set_depth(depth)
            if thrown is None:
                yielded = inner.send(sent)
            else:
                exc, thrown = thrown, None
                yielded = inner.throw(exc)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            set_depth(outer)
        try:
            sent = yield yielded
        except GeneratorExit:
            outer = get_depth()
            set_depth(depth)
            try:
                inner.close()
            finally:
                set_depth(outer)
            raise
        except BaseException as exc:
            thrown, sent = exc, None


def untracked(make: Callable[[], Awaitable[T]]) -> Awaitable[T]:
    """What ``make`` returns, run without coroutine origin tracking (a step's machinery)."""
    return _with_depth(0, make)


def tracked(make: Callable[[], Awaitable[T]]) -> Awaitable[T]:
    """What ``make`` returns, run with the origin tracking ``track_origins`` set (the relay's
    own code, a step's body)."""
    return _with_depth(_origin_depth, make)


def _site(frames: Iterable[Frame], relay_file: str) -> list[int] | None:
    """The call site in ``relay_file`` from frames innermost first, or None if none is there."""
    mine = [(line, name) for file, line, name in frames if file == relay_file]
    return _site_of(mine)


def _site_of(mine: list[tuple[int, str]]) -> list[int] | None:
    """The call site from the relay's frames (line, function name), innermost first."""
    if not mine:
        return None
    site = [mine[0][0]]
    for (_, inner_name), (line, _) in itertools.pairwise(mine):
        if not inner_name.startswith("<"):
            site.append(line)  # this frame called a function of the relay's
    site.reverse()
    return site


def call_site(relay_file: str | os.PathLike[str], skip: int = 1) -> list[int] | None:
    """Where the call being made now came from in ``relay_file``: see the module's note.

    ``skip`` frames (this function's caller by default) are left out of the search.
    """
    target = os.fspath(relay_file)
    frame: types.FrameType | None = sys._getframe(skip + 1)
    mine: list[tuple[int, str]] = []
    for _ in range(MAX_DEPTH):  # only the relay's frames are read: the walk is the cost
        if frame is None:
            break
        code = frame.f_code
        if code.co_filename == target:
            mine.append((frame.f_lineno, code.co_name))
        frame = frame.f_back
    if mine:
        return _site_of(mine)
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    coro = task.get_coro() if task is not None else None
    origin = getattr(coro, "cr_origin", None)
    if not origin:
        return None
    return _site(((f, line, name) for f, line, name in origin), target)
