"""Workspace: drafts, manifests, releases and (later) run folders on disk."""

from relay_notebook.workspace.drafts import DEFAULT_HOME, ENTRY_FILE, Draft, Workspace, resolve_home
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
