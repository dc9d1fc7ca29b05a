"""``vault(NAME)``: a secret, read live for every run; never persisted by the kit."""

from __future__ import annotations

import os

from agentworks._runtime import current
from agentworks.errors import VaultError

__all__ = ["vault"]


def vault(name: str) -> str:
    """The value of secret ``name`` from the workspace vault, else from the environment."""
    rt = current("vault()")
    if name in rt.secrets:
        return rt.secrets[name]
    value = os.environ.get(name)
    if value is not None:
        return value
    raise VaultError(
        f"Secret {name!r} is not in the vault of workspace {rt.workspace} nor in the "
        f"environment. Set it with: relay vault set {name}  (or %relay vault set {name})"
    )
