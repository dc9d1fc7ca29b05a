"""Lazy package namespaces: names load on first use (PEP 562), so importing one submodule in a
child process does not pay for the whole package."""

from __future__ import annotations

import importlib
import sys

# not `typing`: it costs tens of milliseconds, before `relay run` can start its warm parent
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, loading each name from its module."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
