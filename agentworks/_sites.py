"""Call sites: where in the relay's own source a step or platform call was made.

Design note: the flow graph draws one node per call site, inlining helpers at each call
(``relay_notebook.source.flow``), so a call is named by the lines of the helper calls that led
to it and then its own line, outermost first. At run time that is the stack of the relay
module's frames: the innermost frame's line is the call, and an outer frame's line counts only
where it calls another function of the module (a comprehension or generator expression is
part of the function it sits in). A sync call has its caller on the stack when it runs; an
async call's coroutine may run later as a task (``asyncio.gather``, ``create_task``), when
the frames that made it are gone. So a call that can be scheduled is a ``Sited`` function:
calling it reads the site at once, from the frames that make the coroutine, and gives it to
the coroutine. That costs one walk of the stack per call, and nothing for any other
coroutine (coroutine origin tracking, used before, cost every coroutine made while relay
code ran, DBOS's machinery included, and the switching around that machinery cost every
resumption of every step).
"""

from __future__ import annotations

import asyncio.events
import contextvars
import functools
import inspect
import itertools
import os
import sys
import types
from collections.abc import Callable, Coroutine
from typing import Any, Final

__all__ = ["MAX_DEPTH", "Sited", "call_site", "made_at", "site_from"]

#: frames searched for the relay's source; deeper stacks are cut off here
MAX_DEPTH: Final = 64

#: where the walk ends sooner: an event loop running a task's step (what is beyond it started
#: the loop, not this call)
_LOOP_CALLBACK: Final = asyncio.events.Handle._run.__code__

#: the site a ``made_at`` coroutine was made at, while it runs (its inner calls, run in a task
#: where no frame of the relay's is left, take it)
_MADE_AT: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "relay_made_at", default=None
)


def _site_of(mine: list[tuple[int, str]]) -> list[int]:
    """The call site from the relay's frames (line, function name), innermost first: one or
    more."""
    site = [mine[0][0]]
    for (_, inner_name), (line, _) in itertools.pairwise(mine):
        if not inner_name.startswith("<"):
            site.append(line)  # this frame called a function of the relay's
    site.reverse()
    return site


#: code flags of a frame that can be resumed by another caller than the one it had
_RESUMABLE: Final = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR

#: the last walk: (its frame, the frame's instruction, the frame's caller, the relay's file,
#: the site), or ``None``
_last: tuple[types.FrameType, int, types.FrameType | None, str, list[int]] | None = None


def site_from(frame: types.FrameType | None, relay_file: str) -> list[int] | None:
    """The call site in ``relay_file`` of a call made in ``frame`` (see the module's note);
    with no frame of the relay's on the stack, the site of the ``made_at`` call this runs in.

    A loop calling steps asks again and again from one frame at one instruction: while a frame
    runs, the frames it was called from stay where they are (each waits in its call of the
    next), so the site found for the frame at that instruction, from that caller, is the site
    again. The last one found is kept (with the frame: one frame kept alive, at most) and given
    again without a walk, unless the frame is a generator's (resumed by any caller) or the
    site came from ``made_at`` (it depends on the task, not the frames)."""
    global _last
    if frame is None:
        return _MADE_AT.get()
    last = _last
    if (
        last is not None
        and last[0] is frame
        and last[1] == frame.f_lasti
        and last[2] is frame.f_back
        and last[3] == relay_file
    ):
        return last[4].copy()
    start, mine = frame, []
    for _ in range(MAX_DEPTH):  # only the relay's frames are read: the walk is the cost
        if frame is None:
            break
        code = frame.f_code
        if code is _LOOP_CALLBACK:
            break
        if code.co_filename == relay_file:
            mine.append((frame.f_lineno, code.co_name))
        frame = frame.f_back
    if not mine:
        return _MADE_AT.get()
    site = _site_of(mine)
    if not start.f_code.co_flags & _RESUMABLE:
        _last = (start, start.f_lasti, start.f_back, relay_file, site.copy())
    return site


def call_site(relay_file: str | os.PathLike[str], skip: int = 1) -> list[int] | None:
    """Where the call being made now came from in ``relay_file``: see ``site_from``.

    ``skip`` frames (this function's caller by default) are left out of the search.
    """
    return site_from(sys._getframe(skip + 1), os.fspath(relay_file))


Start = Callable[[list[int] | None, tuple[Any, ...], dict[str, Any]], Coroutine[Any, Any, Any]]


class Sited:
    """Stands for the async function ``like``: a call reads its call site at once, in the
    frames that make it, and returns the coroutine ``start(site, args, kwargs)``.

    To ``inspect`` it is ``like``: an async function (``iscoroutinefunction``: its code is
    ``like``'s, as a function-like object's may be), with ``like``'s name, signature and
    attributes; as a class attribute it binds as a method does. ``relay_file`` is the relay's
    module file, or a function giving it (``None``: not in a run, no site).
    """

    def __init__(
        self, like: Callable[..., Any], start: Start, relay_file: str | Callable[[], str | None]
    ) -> None:
        functools.update_wrapper(self, like)
        for name in ("__code__", "__defaults__", "__kwdefaults__"):
            if hasattr(like, name):
                setattr(self, name, getattr(like, name))
        self._sited_start = start
        self._sited_file = relay_file

    def __call__(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        where = self._sited_file
        file = where if type(where) is str else where()  # type: ignore[operator]
        site = None if file is None else site_from(sys._getframe(1), file)
        return self._sited_start(site, args, kwargs)

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self) -> str:
        return f"<sited {self.__wrapped__!r}>"  # type: ignore[attr-defined]


def made_at(
    func: Callable[..., Coroutine[Any, Any, Any]], relay_file: Callable[[], str | None]
) -> Sited:
    """``func`` (async) as a ``Sited`` whose coroutine runs with its site known to
    ``call_site``: a call it makes in a task, with no frame of the relay's left, gets it."""

    async def start(site: list[int] | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        token = _MADE_AT.set(site)
        try:
            return await func(*args, **kwargs)
        finally:
            _MADE_AT.reset(token)

    return Sited(func, start, relay_file)
