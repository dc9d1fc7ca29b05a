"""The relay manifest (``relay.yaml``): kind, runtime, durability, variables and model profile."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final, Literal, cast

import yaml

from relay_notebook.errors import InvalidManifestError

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_KEYS",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_NODES",
    "Manifest",
    "dump_manifest",
    "load_manifest",
    "network_endpoints",
    "parse_manifest",
]

MANIFEST_FILE = "relay.yaml"
#: the largest ``relay.yaml`` read (a manifest is a few lines)
MAX_MANIFEST_BYTES: Final = 64 * 1024
#: the most YAML nodes a manifest may expand to, aliases counted each time they are used
MAX_MANIFEST_NODES: Final = 10_000
_EXCERPT: Final = 60
_PROBLEMS_SHOWN: Final = 5
#: the values each key of a fixed vocabulary may take
_CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "kind": ("relay",),
    "relay_runtime": ("python",),
    "relay_durability": ("dbos", "none"),
}


_ENDPOINT = re.compile(r"(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost):\d{1,5}")


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """What ``relay.yaml`` may hold. Unknown keys are rejected so typos do not go unnoticed.

    Design note: a dataclass checked by hand rather than a pydantic model: every ``relay``
    command reads a manifest, and pydantic's import and model build were the largest part of
    the CLI's start-up (on ``relay run``'s critical path, see ``runner.warm_launch``).
    """

    kind: Literal["relay"] = "relay"
    relay_runtime: Literal["python"] = "python"
    relay_durability: Literal["dbos", "none"] = "dbos"
    description: str | None = None
    #: the default model profile of agent() calls without model=, e.g.
    #: 'scripted:fixtures.json' or 'openai:gpt-4o-mini'
    model: str | None = None
    variables: dict[str, str] = field(default_factory=dict)
    #: what the relay may reach: unset (the outside, never this machine's own servers),
    #: ``'none'`` (nothing), or ``{'allow': ['127.0.0.1:8000']}`` (the outside and those
    #: endpoints on this machine's loopback)
    network: str | dict[str, list[str]] | None = None

    def __post_init__(self) -> None:
        problems = _problems(self.to_dict())
        if problems:
            raise InvalidManifestError(f"{MANIFEST_FILE} is invalid: {_joined(problems)}.")

    def to_dict(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """The manifest's keys in their fixed order (``exclude_none``: without unset ones)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.variables, dict):
            data["variables"] = dict(self.variables)  # a copy: the manifest stays as it is
        return {k: v for k, v in data.items() if v is not None} if exclude_none else data


#: every key a manifest may hold, in the order ``dump_manifest`` writes them
MANIFEST_KEYS: Final = tuple(f.name for f in fields(Manifest))


def _cut(text: str) -> str:
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"


def _excerpt(value: Any) -> str:
    """A short, one-line rendering of a value from the manifest (never the whole of it)."""
    return _cut(repr(value))


def _got(value: Any) -> str:
    if isinstance(value, dict | list):
        return f", got a {type(value).__name__}"
    return f", got {type(value).__name__} {_excerpt(value)}"


def _string_problem(where: str, value: Any) -> str:
    return f"{_cut(where)}: expected a string{_got(value)} (quote the value in YAML)"


def _problems(data: dict[Any, Any]) -> list[str]:
    """Every problem of a manifest's mapping, in the order of its keys."""
    problems: list[str] = []
    for key, value in data.items():
        if key not in MANIFEST_KEYS:
            problems.append(f"unknown key {_cut(key) if isinstance(key, str) else _excerpt(key)!r}")
        elif key in _CHOICES:
            allowed = _CHOICES[key]
            if value not in allowed:
                choices = " or ".join(repr(a) for a in allowed)
                problems.append(f"{key}: expected {choices}{_got(value)}")
        elif key == "network":
            problems += _network_problems(value)
        elif key in ("description", "model"):
            if value is not None and not isinstance(value, str):
                problems.append(_string_problem(key, value))
        elif not isinstance(value, dict):
            problems.append(f"{key}: expected a mapping of names to strings{_got(value)}")
        else:
            for name, text in value.items():
                where = f"{key}.{name if isinstance(name, str) else _excerpt(name)}"
                if not isinstance(name, str):
                    problems.append(f"{_cut(where)}: a variable's name must be a string")
                elif not isinstance(text, str):
                    problems.append(_string_problem(where, text))
    return problems


def _network_problems(value: Any) -> list[str]:
    """What is wrong with a manifest's ``network`` (an endpoint is ``HOST:PORT`` on loopback)."""
    if value is None or value == "none":
        return []
    allow = value.get("allow") if isinstance(value, dict) and set(value) == {"allow"} else None
    if not isinstance(allow, list):
        return [f"network: expected 'none' or {{allow: ['127.0.0.1:PORT']}}{_got(value)}"]
    return [
        f"network.allow: expected HOST:PORT on this machine's loopback such as "
        f"'127.0.0.1:8000'{_got(item)}"
        for item in allow
        if not isinstance(item, str) or not _ENDPOINT.fullmatch(item)
    ]


def network_endpoints(manifest: Manifest) -> tuple[str, list[str]]:
    """The manifest's network policy: ``('none', [])`` or ``('outside', allowed endpoints)``."""
    if manifest.network == "none":
        return "none", []
    if isinstance(manifest.network, dict):
        return "outside", list(manifest.network.get("allow", []))
    return "outside", []


def _joined(problems: list[str]) -> str:
    shown = problems[:_PROBLEMS_SHOWN]
    if len(problems) > _PROBLEMS_SHOWN:
        shown.append(f"and {len(problems) - _PROBLEMS_SHOWN} more")
    return "; ".join(shown)


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
    problems = _problems(data)
    if problems:
        raise InvalidManifestError(
            f"{where} is invalid: {_joined(problems)}. Allowed keys: {', '.join(MANIFEST_KEYS)}."
        )
    return Manifest(**cast(dict[str, Any], data))


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
    data = manifest.to_dict(exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
