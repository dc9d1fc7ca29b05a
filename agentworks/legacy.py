"""The ``ctx`` of legacy ``run(INPUT, ctx)`` programs, on top of the same platform calls.

With ``relay_durability: dbos`` every ``ctx.call_agent``, ``ctx.call_mcp`` and ``ctx.step``
is checkpointed at its whole-call boundary (a step of the root workflow); with ``none`` they
simply run. Only JSON results and receipts are saved, never the context or closures.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from agentworks._runtime import current
from agentworks.agent import agent
from agentworks.context import run_dir, variables
from agentworks.errors import AgentError
from agentworks.mcp import mcp
from agentworks.platform import platform_call, platform_entry
from agentworks.vault import vault

__all__ = ["Context"]


class Context:
    """What a legacy program receives as ``ctx``."""

    def __repr__(self) -> str:
        return "Context()"

    @property
    def variables(self) -> Mapping[str, str]:
        return variables

    @property
    def run_dir(self) -> Any:
        return run_dir

    def vault(self, name: str) -> str:
        return vault(name)

    @platform_entry
    async def call_agent(self, **kwargs: Any) -> Any:
        """``agent(...)`` with the same arguments, checkpointed as one call."""
        return await agent(**kwargs)

    @platform_entry
    async def call_mcp(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        replay_safe: bool = False,
    ) -> Any:
        """``mcp(...)``, checkpointed as one call."""
        return await mcp(server=server, tool=tool, arguments=arguments, replay_safe=replay_safe)

    @platform_entry
    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        arguments: dict[str, Any] | None = None,
        *,
        replay_safe: bool = False,
    ) -> Any:
        """Run ``fn(**arguments)`` (sync or async) as a checkpointed service operation.

        Interrupted before its checkpoint it is uncertain: recovery stops for reconciliation
        unless ``replay_safe=True`` (a read, or a service deduplicating an idempotency key
        included in ``arguments``).
        """
        if not callable(fn):
            raise AgentError(f"ctx.step({name!r}, fn): fn must be callable, got {type(fn)}.")
        args = dict(arguments or {})
        current("ctx.step()")

        async def perform() -> Any:
            result = fn(**args)
            if inspect.isawaitable(result):
                result = await result
            return result

        return await platform_call(
            "step", name, {"arguments": args}, perform, replay_safe=replay_safe
        )
