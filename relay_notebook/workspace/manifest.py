"""The relay manifest (``relay.yaml``): kind, runtime, durability, variables and model profile."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from relay_notebook.errors import InvalidManifestError

__all__ = ["MANIFEST_FILE", "Manifest", "dump_manifest", "load_manifest", "parse_manifest"]

MANIFEST_FILE = "relay.yaml"


class Manifest(BaseModel):
    """What ``relay.yaml`` may hold. Unknown keys are rejected so typos do not go unnoticed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["relay"] = "relay"
    relay_runtime: Literal["python"] = "python"
    relay_durability: Literal["dbos", "none"] = "dbos"
    description: StrictStr | None = None
    model: StrictStr | None = Field(
        default=None,
        description="Default model profile for agent() calls without model=, e.g. "
        "'scripted:fixtures.json' or 'openai:gpt-4o-mini'.",
    )
    variables: dict[StrictStr, StrictStr] = Field(default_factory=dict)


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        got = e.get("input")
        got_text = f", got {type(got).__name__} {got!r}" if not isinstance(got, dict) else ""
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        elif e["type"] == "string_type":
            parts.append(f"{where}: expected a string{got_text} (quote the value in YAML)")
        else:
            parts.append(f"{where}: {e['msg']}{got_text}")
    return "; ".join(parts)


def parse_manifest(text: str, *, where: str = MANIFEST_FILE) -> Manifest:
    """Parse manifest YAML text; raise ``InvalidManifestError`` with every problem on one line."""
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise InvalidManifestError(
            f"{where} is not valid YAML{at}: {getattr(exc, 'problem', exc)}."
        ) from exc
    if not isinstance(data, dict):
        raise InvalidManifestError(
            f"{where} must be a mapping of keys (kind, relay_runtime, relay_durability, variables, "
            f"model), got {type(data).__name__}."
        )
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise InvalidManifestError(
            f"{where} is invalid: {_describe(exc)}. Allowed keys: "
            f"{', '.join(Manifest.model_fields)}."
        ) from exc


def load_manifest(path: Path) -> Manifest:
    """Read and validate ``relay.yaml`` at ``path``."""
    return parse_manifest(path.read_text(encoding="utf-8"), where=str(path))


def dump_manifest(manifest: Manifest) -> str:
    """The manifest as YAML text, keys in a fixed order, defaults written out."""
    data = manifest.model_dump(exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
