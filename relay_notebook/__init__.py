"""relay_notebook: the Jupyter kit for authoring and operating relays (durable DBOS programs)."""

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
]
