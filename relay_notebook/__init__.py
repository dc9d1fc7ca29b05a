"""relay_notebook: the Jupyter kit for authoring and operating relays (durable DBOS programs)."""

from __future__ import annotations

from relay_notebook._lazy import TYPE_CHECKING, lazy_attributes

if TYPE_CHECKING:
    from typing import Any

    from relay_notebook.errors import (
        AdmissionError,
        InvalidManifestError,
        InvalidNameError,
        InvalidTargetError,
        RelayError,
        RelayNotFoundError,
        ReleaseNotFoundError,
        ReleaseTamperedError,
        WorkspaceError,
    )

__version__ = "0.1.0"

# The error classes load on first use: `relay run` starts its warm parent before anything else
# (see relay_notebook.cli), and a forked child imports only the submodules it uses.
__all__ = [
    "AdmissionError",
    "InvalidManifestError",
    "InvalidNameError",
    "InvalidTargetError",
    "RelayError",
    "RelayNotFoundError",
    "ReleaseNotFoundError",
    "ReleaseTamperedError",
    "WorkspaceError",
    "__version__",
    "load_ipython_extension",
]

_lazy_getattr, _lazy_dir = lazy_attributes(
    __name__, {name: "relay_notebook.errors" for name in __all__ if name.endswith("Error")}
)


def __getattr__(name: str) -> Any:
    return _lazy_getattr(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_lazy_dir()})


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext relay_notebook``: register ``%%relay`` and ``%relay``."""
    from relay_notebook.magics import RelayMagics

    ipython.register_magics(RelayMagics(ipython))


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt extension shipped in this package."""
    return [{"src": "labextension", "dest": "relay-notebook"}]
