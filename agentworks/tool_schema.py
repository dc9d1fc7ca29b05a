"""Tool schemas: inferred from annotations, arguments checked against them, values made JSON.

Design note: inferred schemas use a small subset of JSON Schema (what ``annotation_schema``
emits), checked here by ``schema_problems``; ``jsonschema`` is imported only for an explicit
``schema=`` (its import can take seconds, and every attempt is a fresh process).
"""

from __future__ import annotations

import functools
import inspect
import math
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar, Union, cast, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = [
    "annotation_schema",
    "clip",
    "json_ready",
    "pydantic_problems",
    "resolve_annotation",
    "schema_checker",
    "schema_problems",
    "sorted_keys",
]

_T = TypeVar("_T")
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ANNOTATE = (
    "annotate it with str, int, float, bool, X | None, list[X], dict[str, X], Literal[...] "
    "or Any, take a single Pydantic model, or pass schema={...} to @tool"
)
_JSON_TYPES: dict[str, type] = {
    "null": type(None),
    "boolean": bool,
    "integer": int,
    "number": float,
    "string": str,
    "array": list,
    "object": dict,
}


def resolve_annotation(
    fn: Callable[..., Any],
    annotation: Any,
    where: str,
    localns: Mapping[str, Any],
    bad: Callable[[str], Exception],
) -> Any:
    """``fn``'s ``annotation`` as a type; a string is evaluated where ``fn`` was written."""
    if annotation is inspect.Parameter.empty:
        raise bad(f"{where} has no type annotation; {_ANNOTATE}")
    if not isinstance(annotation, str):
        return annotation
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = inspect.unwrap(target)
    namespace = dict(getattr(target, "__globals__", {}))
    # Precedence: captured variables, then the function's module, then the decorating scope.
    local = {**localns, **namespace}
    code = getattr(target, "__code__", None)
    for var, cell in zip(
        getattr(code, "co_freevars", ()),
        getattr(target, "__closure__", None) or (),
        strict=False,
    ):
        try:
            local[var] = cell.cell_contents
        except ValueError:  # a free variable not bound yet
            continue
    try:
        resolved = eval(annotation, namespace, local)
        # A quoted annotation under `from __future__ import annotations` is a string twice.
        return eval(resolved, namespace, local) if isinstance(resolved, str) else resolved
    except Exception as exc:
        raise bad(
            f"the annotation {annotation!r} of {where} cannot be resolved ({exc}); define "
            "the types it uses at module level, or pass schema={...} to @tool"
        ) from exc


def annotation_schema(tp: Any, where: str, bad: Callable[[str], Exception]) -> dict[str, Any]:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if origin is Annotated:
        notes = [m for m in tp.__metadata__ if isinstance(m, str)]
        described = {"description": notes[0]} if notes else {}
        return {**annotation_schema(args[0], where, bad), **described}
    if origin is Literal:
        for value in args:
            if value is not None and type(value) not in (str, int, bool):
                raise bad(f"{where} has Literal value {value!r}; use str, int or bool values")
        kinds = {type(v) for v in args}
        typed = {"type": _SCALARS[kinds.pop()]} if len(kinds) == 1 and None not in args else {}
        return {"enum": list(args), **typed}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [annotation_schema(a, where, bad) for a in args]}
    if tp is list or origin is list:
        return {
            "type": "array",
            **({"items": annotation_schema(args[0], where, bad)} if args else {}),
        }
    if tp is dict or origin is dict:
        if args and args[0] is not str:
            raise bad(f"{where} is {tp}; JSON object keys are strings, use dict[str, X]")
        values = {"additionalProperties": annotation_schema(args[1], where, bad)} if args else {}
        return {"type": "object", **values}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        raise bad(
            f"{where} nests the Pydantic model {tp.__name__}; a model must be the tool's only "
            "parameter, or pass schema={...} to @tool"
        )
    raise bad(f"{where} has the unsupported type {getattr(tp, '__name__', str(tp))!r}; {_ANNOTATE}")


def schema_problems(value: Any, schema: dict[str, Any], path: list[Any]) -> list[str]:
    """Where ``value`` breaks an inferred schema (the subset ``annotation_schema`` emits)."""
    if "anyOf" in schema:
        if any(not schema_problems(value, s, path) for s in schema["anyOf"]):
            return []
        near = [s for s in schema["anyOf"] if "type" in s and _is_a(value, s["type"])]
        if len(near) == 1:  # e.g. list[str] | None given a list: report inside the list
            return schema_problems(value, near[0], path)
    if "enum" in schema and any(type(v) is type(value) and v == value for v in schema["enum"]):
        return []
    kind = schema.get("type")
    if "anyOf" in schema or "enum" in schema or (kind and not _is_a(value, kind)):
        return [f"at {_path(path)}: expected {_expected(schema)}, got {_describe(value)}"]
    if kind == "array" and "items" in schema:
        return [
            e for i, v in enumerate(value) for e in schema_problems(v, schema["items"], [*path, i])
        ]
    if kind != "object":
        return []
    props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
    found = [
        f"at {_path(path)}: {name!r} is required"
        for name in schema.get("required", [])
        if name not in value
    ]
    for key, item in value.items():
        if key in props or isinstance(extra, dict):
            found += schema_problems(item, props.get(key, extra), [*path, key])
        elif extra is False:
            found.append(f"at {_path(path)}: unexpected {key!r}, expected only {sorted(props)}")
    return found


def _is_a(value: Any, kind: str) -> bool:
    if kind == "number":
        return type(value) in (int, float)
    return type(value) is _JSON_TYPES[kind]


def _expected(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_expected(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    return str(schema.get("type", "any value"))


def _describe(value: Any) -> str:
    kind = next((k for k, t in _JSON_TYPES.items() if type(value) is t), type(value).__name__)
    return f"{kind} {clip(repr(value), 80)}"


def schema_checker(schema: dict[str, Any]) -> Callable[[dict[str, Any]], list[str]]:
    """A full JSON Schema check for ``schema=``; raises ValueError if the schema is invalid."""
    from jsonschema import validators  # deferred: see the module's design note
    from jsonschema.exceptions import SchemaError

    base = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        base.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(exc.message) from exc
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _checker, v: isinstance(v, int) and not isinstance(v, bool)
    )
    validator = validators.extend(base, type_checker=checker)(schema)  # type: ignore[no-untyped-call]

    def check(arguments: dict[str, Any]) -> list[str]:
        errors = validator.iter_errors(arguments)
        return sorted(f"at {_path(list(e.absolute_path))}: {clip(e.message)}" for e in errors)

    return check


def json_ready(
    value: Any, where: str, fail: Callable[[str], Exception], seen: frozenset[int] = frozenset()
) -> Any:
    """``value`` as plain JSON values (tuples become lists, models are dumped) or ``fail``."""
    if value is None or type(value) in (str, int, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise fail(f"the non-finite float {value!r} at {where}, which JSON cannot hold")
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, BaseModel):
        return json_ready(value.model_dump(mode="json"), where, fail, seen)
    if isinstance(value, (dict, list, tuple)):
        if id(value) in seen:
            raise fail(f"a {type(value).__name__} that contains itself at {where}")
        inner = seen | {id(value)}
        if not isinstance(value, dict):
            return [json_ready(v, f"{where}[{i}]", fail, inner) for i, v in enumerate(value)]
        for key in value:
            if not isinstance(key, str):
                raise fail(f"a dict key of type {type(key).__name__} ({key!r}) at {where}")
        return {
            str.__str__(k): json_ready(v, f"{where}[{k!r}]", fail, inner) for k, v in value.items()
        }
    kind = type(value)
    named = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    raise fail(f"a {named} at {where}, which is not JSON")


def sorted_keys(value: _T) -> _T:
    """``value`` with dict keys sorted at every level, so its JSON text is always the same."""
    if isinstance(value, dict):
        return cast(_T, {k: sorted_keys(value[k]) for k in sorted(value)})
    if isinstance(value, list):
        return cast(_T, [sorted_keys(v) for v in value])
    return value


def pydantic_problems(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    return "; ".join(f"at {_path(list(e['loc']))}: {clip(e['msg'])}" for e in errors)


def _path(parts: list[Any]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return text.lstrip(".") or "(root)"


def clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
