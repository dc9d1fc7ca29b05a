"""``variables``, ``run_dir`` and ``admit``: the run's configuration, folder and access check."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from agentworks._runtime import current

__all__ = ["admit", "run_dir", "variables"]


class _Variables(Mapping[str, str]):
    """The relay's flat string variables (``relay.yaml``), read from the run in progress."""

    def __getitem__(self, key: str) -> str:
        return current("variables").variables[key]

    def __iter__(self) -> Iterator[str]:
        return iter(current("variables").variables)

    def __len__(self) -> int:
        return len(current("variables").variables)

    def __repr__(self) -> str:
        try:
            return f"variables({dict(current('variables').variables)!r})"
        except Exception:
            return "variables(<not in a run>)"


class _RunDir(os.PathLike[str]):
    """The run's ``execution/`` folder: the one place authored code writes files."""

    def _path(self) -> Path:
        return current("run_dir").run_dir

    def __fspath__(self) -> str:
        return str(self._path())

    def __truediv__(self, other: str) -> Path:
        return self._path() / other

    def __str__(self) -> str:
        return str(self._path())

    def __repr__(self) -> str:
        try:
            return f"run_dir({str(self._path())!r})"
        except Exception:
            return "run_dir(<not in a run>)"


variables: Mapping[str, str] = _Variables()
run_dir = _RunDir()


async def admit(operation: str = "a custom external operation") -> None:
    """Ask the run's authorization before ``operation``; a revoked relay stops as ``denied``."""
    current("admit()").authorize(operation)
