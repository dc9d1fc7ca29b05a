"""Legacy relays, ``run(INPUT, ctx)``: a plain function of two parameters, run as a workflow.

The child wraps it as the run's root workflow named ``run`` (or as a plain coroutine when the
relay is not durable), with ``agentworks.legacy.Context`` as ``ctx``.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["is_legacy", "legacy_entry"]


def is_legacy(entry: Any) -> bool:
    """``run(INPUT, ctx)``: a plain function of two parameters, not a DBOS workflow."""
    import inspect

    try:
        params = list(inspect.signature(entry).parameters)
    except (TypeError, ValueError):
        return False
    return len(params) == 2


def legacy_entry(run_fn: Any, *, durable: bool) -> Any:
    """Wrap ``run(INPUT, ctx)`` as the run's root workflow (or a plain coroutine if not durable)."""
    import inspect

    from agentworks.legacy import Context

    ctx = Context()

    async def call(run_input: Any) -> Any:
        if inspect.iscoroutinefunction(run_fn):
            return await run_fn(run_input, ctx)
        return await asyncio.to_thread(run_fn, run_input, ctx)

    if not durable:
        return call
    from dbos import DBOS

    return DBOS.workflow(name="run")(call)
