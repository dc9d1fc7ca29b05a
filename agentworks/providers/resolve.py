"""Model selection: turn ``model="scripted:FILE"`` or ``"openai:MODEL"`` into a provider."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from urllib.parse import urlsplit

from agentworks.errors import ProviderError, VaultError
from agentworks.providers.base import Provider
from agentworks.providers.openai_compat import OpenAICompatProvider
from agentworks.providers.scripted import ScriptedProvider

__all__ = ["PUBLIC_OPENAI_BASE_URL", "resolve_provider"]

PUBLIC_OPENAI_BASE_URL = "https://api.openai.com/v1"
_FORMS = (
    "'scripted:FILE' (a JSON script beside the relay, e.g. 'scripted:turns.json') or "
    "'openai:MODEL' (any chat-completions server, e.g. 'openai:gpt-4o-mini')"
)


def resolve_provider(
    model: str | None,
    *,
    default: str | None,
    base_dir: Path,
    secret: Callable[[str], str],
) -> tuple[Provider, str]:
    """The provider for ``model`` (or the workspace ``default``) and the model profile chosen.

    ``secret`` reads the vault and raises VaultError for a missing name. The returned string is
    the profile as selected (``"scripted:FILE"`` or ``"openai:MODEL"``); the model the server
    actually used comes back on each AssistantTurn.
    """
    chosen = model if model is not None else default
    if chosen is None:
        raise ProviderError(
            "No model selected for this agent call: pass model='scripted:FILE' or "
            "model='openai:MODEL' to agent(), or set `model:` in relay.yaml."
        )
    kind, sep, rest = chosen.partition(":")
    if sep and kind == "scripted":
        return _scripted(chosen, rest, base_dir), chosen
    if sep and kind == "openai":
        return _openai(chosen, rest, secret), chosen
    raise ProviderError(f"Unknown model {chosen!r}: expected {_FORMS}.")


def _scripted(chosen: str, file: str, base_dir: Path) -> ScriptedProvider:
    if not file:
        raise ProviderError(f"Model {chosen!r} names no script file: expected {_FORMS}.")
    if PurePosixPath(file).is_absolute() or PureWindowsPath(file).is_absolute():
        raise ProviderError(
            f"Model {chosen!r} names an absolute path; expected a path relative to the relay's "
            f"folder {base_dir}. Put the script beside the relay and name it relatively."
        )
    root = base_dir.resolve()
    path = (root / file).resolve()
    if not path.is_relative_to(root):
        raise ProviderError(
            f"Model {chosen!r} names a script outside the relay's folder {base_dir}; expected "
            "a file inside it (no '..'), so that releases freeze it with the relay."
        )
    return ScriptedProvider(path)


def _openai(chosen: str, name: str, secret: Callable[[str], str]) -> OpenAICompatProvider:
    if not name:
        raise ProviderError(f"Model {chosen!r} names no model: expected {_FORMS}.")
    try:
        base_url = secret("OPENAI_BASE_URL")
    except VaultError:
        base_url = PUBLIC_OPENAI_BASE_URL
    try:
        api_key: str | None = secret("OPENAI_API_KEY")
    except VaultError:
        if urlsplit(base_url).hostname == urlsplit(PUBLIC_OPENAI_BASE_URL).hostname:
            raise
        api_key = None  # a loopback or self-hosted server that needs no key
    return OpenAICompatProvider(base_url, name, api_key)
