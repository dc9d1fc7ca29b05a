"""The run header's one line on model calls (``history.model_calls.usage_summary``)."""

from __future__ import annotations

from relay_notebook.history.model_calls import (
    ModelCallCost,
    RunUsage,
    TokenTotal,
    usage_summary,
)
from relay_notebook.workspace.prices import PriceTable


def _call(tokens: tuple[int, int] | None, cost: float | None, attempt: int) -> ModelCallCost:
    given = tokens or (None, None)
    return ModelCallCost(
        step="model", workflow_id="r-1", step_id=attempt, kind="model", framework=None,
        model="m", input_tokens=given[0], output_tokens=given[1], cost=cost, attempt=attempt,
    )  # fmt: skip


def test_tokens_and_cost_paid_and_not_paid() -> None:
    paid, kept = _call((40, 8), 0.000144, 1), _call((61, 12), 0.000218, 2)
    usage = RunUsage(
        (paid, kept), PriceTable(as_of="2026-11-30"), TokenTotal().plus(paid),
        TokenTotal().plus(kept),
    )  # fmt: skip
    assert usage_summary(usage) == (
        "model calls: paid 1 call, 40 in + 8 out tokens, 0.000144 USD; not paid (reused or "
        "copied) 1 call, 61 in + 12 out tokens, 0.000218 USD"
    )
    alone = RunUsage((paid,), PriceTable(as_of=None), TokenTotal().plus(paid))
    assert usage_summary(alone) == "model calls: paid 1 call, 40 in + 8 out tokens, 0.000144 USD"


def test_a_provider_that_reports_no_tokens_is_never_zero_tokens() -> None:
    """Calls whose provider gave no token counts are counted, not priced at "0 tokens"."""
    one, two = _call(None, None, 1), _call(None, None, 1)
    usage = RunUsage(
        (one, two), PriceTable(as_of=None), TokenTotal().plus(one), TokenTotal().plus(two)
    )
    assert usage_summary(usage) == (
        "model calls: 1 made, 1 reused or copied; the provider reported no token counts"
    )
