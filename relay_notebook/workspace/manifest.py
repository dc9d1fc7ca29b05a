"""The relay manifest (``relay.yaml``): kind, runtime, durability, variables and model profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from relay_notebook.errors import InvalidManifestError

__all__ = [
    "MANIFEST_FILE",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_NODES",
    "Manifest",
    "dump_manifest",
    "load_manifest",
    "parse_manifest",
]

MANIFEST_FILE = "relay.yaml"
#: the largest ``relay.yaml`` read (a manifest is a few lines)
MAX_MANIFEST_BYTES: Final = 64 * 1024
#: the most YAML nodes a manifest may expand to, aliases counted each time they are used
MAX_MANIFEST_NODES: Final = 10_000
_EXCERPT: Final = 60


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


def _cut(text: str) -> str:
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"


def _excerpt(value: Any) -> str:
    """A short, one-line rendering of a value from the manifest (never the whole of it)."""
    return _cut(repr(value))


def _describe(err: ValidationError, limit: int = 5) -> str:
    parts = []
    found = err.errors()
    for e in found[:limit]:
        where = ".".join(_excerpt(p) if not isinstance(p, str) else p for p in e["loc"])
        where = _cut(where) or "(top level)"
        got = e.get("input")
        got_text = (
            f", got {type(got).__name__} {_excerpt(got)}"
            if not isinstance(got, dict | list)
            else f", got a {type(got).__name__}"
        )
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        elif e["type"] == "string_type":
            parts.append(f"{where}: expected a string{got_text} (quote the value in YAML)")
        else:
            parts.append(f"{where}: {e['msg']}{got_text}")
    if len(found) > limit:
        parts.append(f"and {len(found) - limit} more")
    return "; ".join(parts)


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many nodes ``root`` stands for once every alias is expanded, counting up to
    ``limit`` + 1; a node that contains itself counts as over the limit. No recursion."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            total = 1
            for child in _children(node):
                total = min(total + sizes[id(child)], limit + 1)
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            return limit + 1  # an alias to an enclosing node: infinite once expanded
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                return limit + 1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _safe_load(text: str, where: str) -> Any:
    """``yaml.safe_load`` that refuses alias bombs and nesting it cannot walk."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, MAX_MANIFEST_NODES) > MAX_MANIFEST_NODES:
            raise InvalidManifestError(
                f"{where} expands to more than {MAX_MANIFEST_NODES:,} YAML values (its aliases "
                f"repeat nested content); write the values out instead of using &anchors."
            )
        return loader.construct_document(node)
    except RecursionError:
        raise InvalidManifestError(
            f"{where} nests its values too deeply to read; a manifest is a flat mapping."
        ) from None
    finally:
        loader.dispose()


def parse_manifest(text: str, *, where: str = MANIFEST_FILE) -> Manifest:
    """Parse manifest YAML text; raise ``InvalidManifestError`` with every problem on one line."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_MANIFEST_BYTES:
        raise InvalidManifestError(
            f"{where} is {size:,} bytes; a manifest may have at most {MAX_MANIFEST_BYTES:,}."
        )
    try:
        data = _safe_load(text, where) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(exc, "problem", None) or exc)
        raise InvalidManifestError(f"{where} is not valid YAML{at}: {_cut(problem)}.") from None
    if data is None:
        data = {}
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
        ) from None


def load_manifest(path: Path) -> Manifest:
    """Read and validate ``relay.yaml`` at ``path``: at most ``MAX_MANIFEST_BYTES``, UTF-8."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise InvalidManifestError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise InvalidManifestError(
            f"{path} is over {MAX_MANIFEST_BYTES:,} bytes; a manifest is a few lines of YAML."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidManifestError(
            f"{path} is not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x}); save it as "
            f"UTF-8."
        ) from None
    return parse_manifest(text, where=str(path))


def dump_manifest(manifest: Manifest) -> str:
    """The manifest as YAML text, keys in a fixed order, defaults written out."""
    data = manifest.model_dump(exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
