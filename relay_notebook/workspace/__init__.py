"""Workspace: drafts, manifests, releases, vault and access on disk."""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay_notebook._lazy import lazy_attributes

if TYPE_CHECKING:
    from relay_notebook.workspace.drafts import (
        DEFAULT_HOME,
        ENTRY_FILE,
        Draft,
        Workspace,
        resolve_home,
    )
    from relay_notebook.workspace.manifest import Manifest, load_manifest, parse_manifest
    from relay_notebook.workspace.names import validate_relay_name
    from relay_notebook.workspace.releases import (
        Release,
        VerifyReport,
        content_hash,
        freeze_release,
        list_releases,
        resolve_release,
        verify_release,
    )

# Names load on first use: a child process importing one submodule does not pay for the rest.
_LAZY = {
    "DEFAULT_HOME": "relay_notebook.workspace.drafts",
    "Draft": "relay_notebook.workspace.drafts",
    "ENTRY_FILE": "relay_notebook.workspace.drafts",
    "Manifest": "relay_notebook.workspace.manifest",
    "Release": "relay_notebook.workspace.releases",
    "VerifyReport": "relay_notebook.workspace.releases",
    "Workspace": "relay_notebook.workspace.drafts",
    "content_hash": "relay_notebook.workspace.releases",
    "freeze_release": "relay_notebook.workspace.releases",
    "list_releases": "relay_notebook.workspace.releases",
    "load_manifest": "relay_notebook.workspace.manifest",
    "parse_manifest": "relay_notebook.workspace.manifest",
    "resolve_home": "relay_notebook.workspace.drafts",
    "resolve_release": "relay_notebook.workspace.releases",
    "validate_relay_name": "relay_notebook.workspace.names",
    "verify_release": "relay_notebook.workspace.releases",
}

__all__ = [
    "DEFAULT_HOME",
    "ENTRY_FILE",
    "Draft",
    "Manifest",
    "Release",
    "VerifyReport",
    "Workspace",
    "content_hash",
    "freeze_release",
    "list_releases",
    "load_manifest",
    "parse_manifest",
    "resolve_home",
    "resolve_release",
    "validate_relay_name",
    "verify_release",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
