"""Model prices: the shipped table (``prices.yaml`` beside this module, dated ``as_of``) with the
workspace's own ``prices.yaml`` over it, model by model."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PRICES_FILE", "PriceTable", "load_prices"]

#: the workspace's override, in its home folder
PRICES_FILE = "prices.yaml"
_SHIPPED = Path(__file__).with_name(PRICES_FILE)


@dataclass(frozen=True)
class PriceTable:
    """USD per ``per_tokens`` input and output tokens, by model name."""

    as_of: str | None
    currency: str = "USD"
    per_tokens: int = 1_000_000
    models: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: where the prices came from: the shipped file, then the workspace's if it has one
    sources: tuple[str, ...] = ()

    def price_of(self, model: str | None) -> tuple[float, float] | None:
        """(input, output) price of ``model``: its exact name, else the longest listed name it
        starts with, after a ``provider:`` prefix is dropped."""
        if not model:
            return None
        name = model.rsplit(":", 1)[-1] if ":" in model else model
        for candidate in (model, name):
            if candidate in self.models:
                return self.models[candidate]
        best = max((m for m in self.models if name.startswith(m)), key=len, default=None)
        return self.models[best] if best is not None else None

    def cost(
        self, model: str | None, input_tokens: int | None, output_tokens: int | None
    ) -> float | None:
        """The cost of one call, or None when the model has no price or no tokens were told."""
        price = self.price_of(model)
        if price is None or (input_tokens is None and output_tokens is None):
            return None
        spent = (input_tokens or 0) * price[0] + (output_tokens or 0) * price[1]
        return spent / self.per_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of,
            "currency": self.currency,
            "per_tokens": self.per_tokens,
            "sources": list(self.sources),
        }


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _models(data: dict[str, Any]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for name, entry in (data.get("models") or {}).items():
        if isinstance(entry, dict):
            try:
                out[str(name)] = (float(entry.get("input", 0)), float(entry.get("output", 0)))
            except (TypeError, ValueError):
                continue
    return out


def load_prices(home: Path | None = None) -> PriceTable:
    """The shipped prices with ``home/prices.yaml``'s entries over them (its ``as_of``,
    ``currency`` and ``per_tokens`` too, when it gives them)."""
    shipped = _read(_SHIPPED)
    data, models, sources = dict(shipped), _models(shipped), [str(_SHIPPED)]
    override = home / PRICES_FILE if home is not None else None
    if override is not None and override.is_file():
        mine = _read(override)
        data.update({k: v for k, v in mine.items() if k != "models"})
        models.update(_models(mine))
        sources.append(str(override))
    as_of = data.get("as_of")
    return PriceTable(
        as_of=str(as_of) if as_of is not None else None,
        currency=str(data.get("currency") or "USD"),
        per_tokens=int(data.get("per_tokens") or 1_000_000),
        models=models,
        sources=tuple(sources),
    )
