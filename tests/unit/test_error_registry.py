"""The code registry: every code the kit emits is defined once, and docs/errors.md is its print."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import agentworks.codes
import agentworks.errors
import agentworks.tools
import relay_notebook.runner.fork  # noqa: F401  (ForkError lives there)
from relay_notebook import errors
from relay_notebook.errors import codes
from relay_notebook.errors.codes import REGISTRY
from relay_notebook.source import annotations

ROOT = Path(__file__).resolve().parents[2]
REGISTRY_FILES = {
    ROOT / "relay_notebook" / "errors" / "codes.py",
    ROOT / "relay_notebook" / "errors" / "check_codes.py",
    ROOT / "agentworks" / "codes.py",
}
SOURCE_LAYER = ROOT / "relay_notebook" / "source"
DIAGNOSTIC_SECTIONS = {"admission", "lint", "annotations"}
KEBAB = re.compile(r"[a-z]+(-[a-z0-9]+)+")
DIAGNOSTIC = re.compile(r"[a-z]+(-[a-z]+)+")
BRACKETED = re.compile(r"\[([a-z]+(?:-[a-z0-9]+)*)\]")


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_error_docs", ROOT / "tools/make_error_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for package in ("relay_notebook", "agentworks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path not in REGISTRY_FILES:
                yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of docstring constants (a docstring may quote a code as an example)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _is_text(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _literal_codes(path: Path, tree: ast.Module) -> Iterator[str]:
    """Each place the module spells a code itself instead of naming its registry entry."""
    where = path.relative_to(ROOT)
    docstrings = _docstrings(tree)
    in_source_layer = SOURCE_LAYER in path.parents
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _is_text(key) and key.value == "code" and _is_text(value):
                    yield f'{where}:{line}: {{"code": {value.value!r}}}'
        elif isinstance(node, ast.Assign) and _is_text(node.value):
            for target in node.targets:
                named = isinstance(target, ast.Name) and target.id in ("code", "error_code")
                keyed = isinstance(target, ast.Subscript) and _is_text(target.slice)
                if named or (keyed and target.slice.value == "code"):
                    yield f"{where}:{line}: code = {node.value.value!r}"
        elif isinstance(node, ast.keyword) and node.arg in ("code", "error_code"):
            if _is_text(node.value):
                yield f"{where}:{line}: {node.arg}={node.value.value!r}"
        elif _is_text(node) and id(node) not in docstrings:
            text = node.value
            entry = REGISTRY.get(text)
            if entry is not None and KEBAB.fullmatch(text):
                diagnostic = DIAGNOSTIC_SECTIONS & set(entry.sections)
                if not (diagnostic and in_source_layer):
                    yield f"{where}:{line}: {text!r}"
            elif in_source_layer and DIAGNOSTIC.fullmatch(text):
                yield f"{where}:{line}: {text!r} is not a diagnostic code in the registry"
            for bracketed in BRACKETED.findall(text):
                if bracketed in REGISTRY:
                    yield f"{where}:{line}: [{bracketed}] in a message"


def test_docs_errors_md_is_generated_from_the_registry() -> None:
    """docs/errors.md is exactly what tools/make_error_docs.py prints from the registry."""
    expected = _tool().render()
    assert (ROOT / "docs/errors.md").read_text(encoding="utf-8") == expected, (
        "docs/errors.md is stale: run python tools/make_error_docs.py"
    )


def test_every_code_is_listed_in_the_docs_with_its_meaning() -> None:
    """Each registry entry appears in a table of docs/errors.md with its meaning."""
    text = (ROOT / "docs/errors.md").read_text(encoding="utf-8")
    for code in REGISTRY.values():
        assert f"| `{code.code}` |" in text, code.code
        assert code.meaning in text, code.code


def test_no_module_spells_a_code_itself() -> None:
    """No module writes a literal ``"code": "..."``, a literal class code or a ``[code]`` in a
    message: each names its registry entry (diagnostic codes in the source layer excepted,
    where every code spelled must be a registered diagnostic)."""
    found = [hit for path, tree in _modules() for hit in _literal_codes(path, tree)]
    assert not found, "spell these with relay_notebook.errors.codes:\n" + "\n".join(found)


def _error_classes() -> list[type[Exception]]:
    out: list[type[Exception]] = []
    todo: list[type[Exception]] = [errors.RelayError, agentworks.errors.AgentworksError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return out


def test_every_error_class_names_its_own_registry_entry() -> None:
    """Each RelayError and AgentworksError class declares its own entry, raised, code unique."""
    seen: dict[str, str] = {}
    for cls in _error_classes():
        entry = cls.__dict__.get("entry")
        assert isinstance(entry, codes.Code), f"{cls.__name__} names no registry entry"
        assert REGISTRY.get(entry.code) is entry and entry.raised, cls.__name__
        assert cls.code == entry.code
        assert entry.code not in seen, f"{cls.__name__} reuses {seen.get(entry.code)}'s code"
        seen[entry.code] = cls.__name__
    assert errors.InvalidRunIdError.exit_code == 2 and errors.RunLockedError.exit_code == 1


def test_every_registry_entry_is_emitted_somewhere() -> None:
    """Each entry is named outside the registry (or, for diagnostics, spelled in the source
    layer): the registry holds no code the kit never emits."""
    named: set[str] = set()
    spelled: set[str] = set()
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                named.add(node.attr)
            elif isinstance(node, ast.alias):
                named.add(node.asname or node.name)
            elif _is_text(node) and SOURCE_LAYER in path.parents:
                spelled.add(node.value)
    names = {
        entry.code: name
        for module in (codes, agentworks.codes)
        for name, entry in vars(module).items()
        if isinstance(entry, codes.Code)
    }
    unused = [
        code
        for code, entry in REGISTRY.items()
        if not (
            names.get(code) in named
            or (DIAGNOSTIC_SECTIONS & set(entry.sections) and code in spelled)
        )
    ]
    assert not unused, f"never emitted: {unused}"


@pytest.mark.parametrize("section", sorted(DIAGNOSTIC_SECTIONS))
def test_the_source_layer_tables_are_read_from_the_registry(section: str) -> None:
    """admission.CODES, lint.CODES and annotations.CODES are the registry's diagnostic codes."""
    module = importlib.import_module(f"relay_notebook.source.{section}")
    assert codes.meanings(section) == module.CODES
    assert module.CODES


def test_annotation_limits_in_the_registry_match_the_parser() -> None:
    """The registry's too-many-nodes/edges meanings name the parser's actual limits."""
    assert str(annotations.MAX_NODES) in REGISTRY["annotation-too-many-nodes"].meaning
    assert str(annotations.MAX_EDGES) in REGISTRY["annotation-too-many-edges"].meaning


def test_a_recorded_code_is_built_by_its_entry() -> None:
    """``Code.record`` is the ``{"code", "message"}`` shape run.json and the preview hold."""
    assert codes.FINISHED.record("Run r-1 succeeded.", extra=1) == {
        "code": "finished",
        "message": "Run r-1 succeeded.",
        "extra": 1,
    }
    assert agentworks.tools.ToolArgumentsError.code == "tool-arguments-invalid"
