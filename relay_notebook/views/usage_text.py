"""A run's model-call tokens and cost as text lines (``relay logs``, ``%relay logs``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay_notebook.history.model_calls import ModelCallCost, RunUsage, cost_text

__all__ = ["cost_text", "listed_usage_text", "usage_lines"]


def listed_usage_text(usage: Mapping[str, Any]) -> str:
    """A run's tokens and cost as ``relay runs`` and ``%relay runs`` list them (a
    ``RunSummary.usage``): ``tokens 101+20 cost 0.000362 USD (not paid: 48 tokens, 0.000144
    USD)``; no cost when no call is priced, no parenthesis when nothing was reused or copied."""
    paid, saved, currency = usage["paid"], usage["saved"], usage["currency"]
    text = f"tokens {paid['input_tokens']}+{paid['output_tokens']}"
    if paid["calls"] > paid["unpriced"]:
        text += f" cost {paid['cost']:.6f} {currency}"
    if saved["calls"]:
        text += f" (not paid: {saved['input_tokens'] + saved['output_tokens']} tokens"
        text += f", {saved['cost']:.6f} {currency})" if saved["calls"] > saved["unpriced"] else ")"
    return text


def _call_line(c: ModelCallCost, currency: str) -> str:
    where = f"{c.workflow_id}/{c.step_id}"
    tokens = f"{c.input_tokens if c.input_tokens is not None else '?'} in / "
    tokens += f"{c.output_tokens if c.output_tokens is not None else '?'} out"
    cost = f"{c.cost:.6f} {currency}" if c.cost is not None else "unpriced"
    if c.copied_from is not None:
        how = f"copied from {c.copied_from}, not paid"
    else:
        how = f"paid in attempt {c.attempt}"
        if not c.checkpointed:
            how += " (lost: ran again)"
        if c.reused_in:
            how += ", reused in " + ",".join(map(str, c.reused_in))
    return f"  {c.step} {where}: {c.model or '?'}, {tokens}, {cost}; {how}"


def usage_lines(usage: RunUsage, *, limit: int = 40) -> list[str]:
    """The run's totals paid and not paid, per attempt, then one line per model call."""
    currency = usage.prices.currency
    as_of = f" (prices as of {usage.prices.as_of})" if usage.prices.as_of else ""
    lines = [
        f"model calls{as_of}: paid {cost_text(usage.paid, currency)}; "
        f"not paid (reused or copied) {cost_text(usage.saved, currency)}"
    ]
    for attempt, (paid, saved) in sorted(usage.by_attempt.items()):
        lines.append(
            f"  attempt {attempt}: paid {cost_text(paid, currency)}; "
            f"not paid {cost_text(saved, currency)}"
        )
    lines += [_call_line(c, currency) for c in usage.calls[:limit]]
    if len(usage.calls) > limit:
        lines.append(f"  … {len(usage.calls) - limit} more")
    return lines
