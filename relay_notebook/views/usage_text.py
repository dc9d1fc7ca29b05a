"""A run's model-call tokens and cost as text lines (``relay logs``, ``%relay logs``)."""

from __future__ import annotations

from relay_notebook.history.model_calls import ModelCallCost, RunUsage, cost_text

__all__ = ["cost_text", "usage_lines"]


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
