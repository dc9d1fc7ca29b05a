"""relay_notebook: the Jupyter kit for authoring and operating relays (durable DBOS programs)."""

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


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext relay_notebook``: register ``%%relay`` and ``%relay``."""
    from relay_notebook.magics import RelayMagics

    ipython.register_magics(RelayMagics(ipython))


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt extension shipped in this package."""
    return [{"src": "labextension", "dest": "relay-notebook"}]


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
