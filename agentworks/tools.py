"""Python tools for agents: ``@tool``, input schemas, validation at the call boundary, recovery.

Design note: a tool's JSON schema is what the model sees *and* what is enforced, so it is built
once (inferred from basic annotations, taken from a Pydantic model, or given explicitly), stored
with keys sorted at every level, and every call is checked against it before the body runs.
Inferred schemas use a small subset of JSON Schema checked here; ``jsonschema`` is imported only
for explicit ``schema=`` (its import can take seconds, and every attempt is a fresh process).
Results become plain JSON values at this boundary because the agent journal persists them and a
recovered call must return exactly what the original returned. Sync bodies run in a worker
thread so a blocking service call never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import re
import sys
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar, Union, cast, get_args, get_origin, overload

from pydantic import BaseModel, ValidationError

from agentworks import codes
from agentworks.errors import ToolDefinitionError, ToolError, ToolResultError

__all__ = ["Tool", "ToolArgumentsError", "tool"]

_T = TypeVar("_T")
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
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
_RETRY = "Call it again with arguments matching its parameters schema."
_JSON_HINT = "return dicts, lists, str, numbers, bools or None, or a Pydantic model"


class ToolArgumentsError(ToolError):
    """A tool call's arguments do not match its schema; the body did not run."""

    entry = codes.TOOL_ARGUMENTS_INVALID


class Tool:
    """A Python function exposed to agents, with its JSON schema and boundary validation."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        recover: Callable[..., Any] | None = None,
        localns: Mapping[str, Any] | None = None,
    ) -> None:
        """Analyse ``fn``; ``localns`` resolves string annotations naming function-local types."""
        if not callable(fn):
            raise ToolDefinitionError(f"Cannot make a tool of {type(fn).__name__}: not callable.")
        self.fn = fn
        self.name = _check_name(fn, name)
        self.description = description if description is not None else _first_paragraph(fn)
        self._localns: dict[str, Any] = dict(localns or {})
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise self._bad("it is a generator; return the whole result (a list) instead")
        self.is_async = inspect.iscoroutinefunction(fn)
        try:
            self._signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise self._bad(f"its signature cannot be read ({exc})") from exc
        self._model_param: tuple[str, type[BaseModel]] | None = None
        self._explicit = schema is not None
        self._check: Callable[[dict[str, Any]], list[str]] = lambda _arguments: []
        self.input_schema = (
            self._infer_schema() if schema is None else self._explicit_schema(schema)
        )
        self.output_model = self._output_model()
        self.recover = self._check_recover(recover)
        self._localns = {}  # only needed while analysing; don't keep the caller's objects alive
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, {'async' if self.is_async else 'sync'})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original function as plain Python, without validation."""
        return self.fn(*args, **kwargs)

    def spec(self) -> dict[str, Any]:
        """The provider seam's tool spec: ``{"name", "description", "parameters"}``, a copy."""
        return _sorted(
            {"name": self.name, "description": self.description, "parameters": self.input_schema}
        )

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments``, run the body and return its result as plain JSON values."""
        kwargs = self._prepare(arguments)
        try:
            result = await _call(self.fn, self.is_async, kwargs)
        except Exception as exc:
            raise ToolError(
                f"Tool {self.name!r} raised {type(exc).__name__}: {_clip(str(exc))}"
            ) from exc
        return self._result(result, "returned")

    async def lookup(self, arguments: dict[str, Any]) -> Any:
        """Ask ``recover=`` for the original result of a call cut short; raise if it cannot."""
        if self.recover is None:
            raise ToolError(
                f"Tool {self.name!r} has no recover= lookup, so the outcome of its interrupted "
                "call cannot be established; reconcile the run, or add "
                "@tool(recover=lookup_receipt)."
            )
        kwargs = self._prepare(arguments)
        if self._model_param is None:  # the lookup sees the arguments the body saw
            params = self._signature.parameters.values()
            kwargs = {**{p.name: p.default for p in params if p.default is not p.empty}, **kwargs}
        try:
            result = await _call(self.recover, inspect.iscoroutinefunction(self.recover), kwargs)
        except Exception as exc:
            raise ToolError(
                f"The recover= lookup of tool {self.name!r} could not establish the outcome: "
                f"{type(exc).__name__}: {_clip(str(exc))}"
            ) from exc
        return self._result(result, "recover= lookup returned")

    def _bad(self, why: str) -> ToolDefinitionError:
        return ToolDefinitionError(f"Cannot expose tool {self.name!r}: {why}.")

    def _prepare(self, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError(
                f"Tool {self.name!r} takes a JSON object of arguments, "
                f"got {type(arguments).__name__}."
            )
        args: dict[str, Any] = dict(arguments)
        if self._model_param is not None:
            param, model = self._model_param
            try:
                return {param: model.model_validate(args)}
            except ValidationError as exc:
                problems = _pydantic_problems(exc)
                raise ToolArgumentsError(
                    f"Invalid arguments for tool {self.name!r}: {problems}. {_RETRY}"
                ) from exc
        problems_found = self._check(args)
        if problems_found:
            problems = "; ".join(problems_found)
            raise ToolArgumentsError(
                f"Invalid arguments for tool {self.name!r}: {problems}. {_RETRY}"
            )
        try:
            self._signature.bind(**args)
        except TypeError as exc:
            raise ToolArgumentsError(
                f"Arguments for tool {self.name!r} do not fit its function: {exc}."
            ) from exc
        return args

    def _result(self, result: Any, verb: str) -> Any:
        if self.output_model is not None:
            try:
                result = self.output_model.model_validate(result).model_dump(mode="json")
            except ValidationError as exc:
                raise ToolResultError(
                    f"Tool {self.name!r} {verb} a value that is not a valid "
                    f"{self.output_model.__name__}: {_pydantic_problems(exc)}."
                ) from exc

        def fail(why: str) -> ToolResultError:
            return ToolResultError(f"Tool {self.name!r} {verb} {why}; {_JSON_HINT}.")

        return _json_ready(result, "result", fail)

    # -- definition ---------------------------------------------------------------------------

    def _params(self, *, var_keyword: bool) -> list[inspect.Parameter]:
        params = list(self._signature.parameters.values())
        for p in params:
            if p.kind is p.VAR_POSITIONAL:
                raise self._bad(f"*{p.name} cannot be filled from JSON; use named parameters")
            if p.kind is p.POSITIONAL_ONLY:
                raise self._bad(
                    f"parameter {p.name!r} is positional-only; tools are called by name"
                )
            if p.kind is p.VAR_KEYWORD and not var_keyword:
                raise self._bad(f"**{p.name} has no inferable schema; pass schema={{...}} to @tool")
        return params

    def _infer_schema(self) -> dict[str, Any]:
        params = self._params(var_keyword=False)
        hints = {p.name: self._resolve(p.annotation, f"parameter {p.name!r}") for p in params}
        models = [n for n, h in hints.items() if isinstance(h, type) and issubclass(h, BaseModel)]
        if models:
            if len(params) != 1:
                raise self._bad(
                    f"parameter {models[0]!r} is a Pydantic model, which must be the only "
                    "parameter; move the other parameters into the model"
                )
            self._model_param = (models[0], hints[models[0]])
            schema = hints[models[0]].model_json_schema()
            return _sorted(cast(dict[str, Any], _json_ready(schema, "its schema", self._bad)))
        properties: dict[str, Any] = {}
        for p in params:
            where = f"parameter {p.name!r}"
            properties[p.name] = _annotation_schema(hints[p.name], where, self._bad)
            if p.default is not p.empty:
                default = _json_ready(p.default, f"the default of {where}", self._bad)
                properties[p.name]["default"] = default
        required = [p.name for p in params if p.default is p.empty]
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        schema = _sorted({**schema, **({"required": required} if required else {})})
        self._check = functools.partial(_problems, schema=schema, path=[])
        return schema

    def _resolve(self, annotation: Any, where: str) -> Any:
        if annotation is inspect.Parameter.empty:
            raise self._bad(f"{where} has no type annotation; {_ANNOTATE}")
        if not isinstance(annotation, str):
            return annotation
        target: Any = self.fn
        while isinstance(target, functools.partial):
            target = target.func
        target = inspect.unwrap(target)
        namespace = dict(getattr(target, "__globals__", {}))
        # Precedence: captured variables, then the function's module, then the decorating scope.
        local = {**self._localns, **namespace}
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
            raise self._bad(
                f"the annotation {annotation!r} of {where} cannot be resolved ({exc}); define "
                "the types it uses at module level, or pass schema={...} to @tool"
            ) from exc

    def _explicit_schema(self, schema: Any) -> dict[str, Any]:
        if not isinstance(schema, dict) or schema.get("type") != "object":
            got = schema.get("type") if isinstance(schema, dict) else type(schema).__name__
            raise self._bad(f'schema= must be a JSON Schema with "type": "object", got {got!r}')
        checked = _sorted(cast(dict[str, Any], _json_ready(schema, "schema=", self._bad)))
        try:
            self._check = _schema_checker(checked)
        except ValueError as exc:
            raise self._bad(f"schema= is not a valid JSON Schema: {exc}") from exc
        params = self._params(var_keyword=True)
        names = {p.name for p in params if p.kind is not p.VAR_KEYWORD}
        takes_any = len(names) < len(params)  # a **kwargs parameter
        for prop in checked.get("properties", {}):
            if prop not in names and not takes_any:
                raise self._bad(f"schema= declares {prop!r}, which the function does not accept")
        for p in params:
            if (
                p.name in names
                and p.default is p.empty
                and p.name not in checked.get("required", [])
            ):
                raise self._bad(
                    f"parameter {p.name!r} has no default, but schema= does not list it in "
                    '"required"; add it there or give the parameter a default'
                )
        return checked

    def _output_model(self) -> type[BaseModel] | None:
        ret = self._signature.return_annotation
        if ret is inspect.Signature.empty:
            return None
        resolved = self._resolve(ret, "the return annotation")
        return resolved if isinstance(resolved, type) and issubclass(resolved, BaseModel) else None

    def _check_recover(self, recover: Any) -> Callable[..., Any] | None:
        if recover is None:
            return None
        if not callable(recover):
            raise self._bad(f"recover= must be a function, got {type(recover).__name__}")
        if self._model_param is not None:
            names = {self._model_param[0]}
        else:
            named = self._signature.parameters.values()
            names = {p.name for p in named if p.kind is not p.VAR_KEYWORD}
            names |= set(self.input_schema.get("properties", {}) if self._explicit else ())
        try:
            inspect.signature(recover).bind(**dict.fromkeys(names))
        except ValueError:  # no readable signature (a builtin): trust the author
            pass
        except TypeError as exc:
            raise self._bad(
                f"recover= is called with the tool's keyword arguments {sorted(names)}, but {exc}"
            ) from exc
        return cast(Callable[..., Any], recover)


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    recover: Callable[..., Any] | None = None,
) -> Tool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    recover: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    recover: Callable[..., Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Expose a sync or async function (closures too) to agents: ``@tool`` or ``@tool(...)``.

    Example::

        @tool(recover=lookup_receipt)
        async def create_order(sku: str, qty: int = 1) -> dict[str, str]:
            '''Create an order and return its id.'''
            return {"order_id": await shop.create(sku, qty, key=f"{sku}-{qty}")}
    """

    def wrap(f: Callable[..., Any], depth: int = 1) -> Tool:
        # The decorating scope's names resolve string annotations of function-local types.
        scope = sys._getframe(depth).f_locals
        if not isinstance(f, Tool):
            return Tool(
                f, name=name, description=description, schema=schema, recover=recover, localns=scope
            )
        if (name, description, schema, recover) != (None, None, None, None):
            raise ToolDefinitionError(
                f"Tool {f.name!r} is already a tool; pass the options to its first @tool."
            )
        return f

    return wrap if fn is None else wrap(fn, depth=2)


async def _call(fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any]) -> Any:
    result = fn(**kwargs) if is_async else await asyncio.to_thread(fn, **kwargs)
    return await result if inspect.isawaitable(result) else result


def _annotation_schema(tp: Any, where: str, bad: Callable[[str], Exception]) -> dict[str, Any]:
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
        return {**_annotation_schema(args[0], where, bad), **described}
    if origin is Literal:
        for value in args:
            if value is not None and type(value) not in (str, int, bool):
                raise bad(f"{where} has Literal value {value!r}; use str, int or bool values")
        kinds = {type(v) for v in args}
        typed = {"type": _SCALARS[kinds.pop()]} if len(kinds) == 1 and None not in args else {}
        return {"enum": list(args), **typed}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [_annotation_schema(a, where, bad) for a in args]}
    if tp is list or origin is list:
        return {
            "type": "array",
            **({"items": _annotation_schema(args[0], where, bad)} if args else {}),
        }
    if tp is dict or origin is dict:
        if args and args[0] is not str:
            raise bad(f"{where} is {tp}; JSON object keys are strings, use dict[str, X]")
        values = {"additionalProperties": _annotation_schema(args[1], where, bad)} if args else {}
        return {"type": "object", **values}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        raise bad(
            f"{where} nests the Pydantic model {tp.__name__}; a model must be the tool's only "
            "parameter, or pass schema={...} to @tool"
        )
    raise bad(f"{where} has the unsupported type {getattr(tp, '__name__', str(tp))!r}; {_ANNOTATE}")


def _problems(value: Any, schema: dict[str, Any], path: list[Any]) -> list[str]:
    """Where ``value`` breaks an inferred schema (the subset ``_annotation_schema`` emits)."""
    if "anyOf" in schema:
        if any(not _problems(value, s, path) for s in schema["anyOf"]):
            return []
        near = [s for s in schema["anyOf"] if "type" in s and _is_a(value, s["type"])]
        if len(near) == 1:  # e.g. list[str] | None given a list: report inside the list
            return _problems(value, near[0], path)
    if "enum" in schema and any(type(v) is type(value) and v == value for v in schema["enum"]):
        return []
    kind = schema.get("type")
    if "anyOf" in schema or "enum" in schema or (kind and not _is_a(value, kind)):
        return [f"at {_path(path)}: expected {_expected(schema)}, got {_describe(value)}"]
    if kind == "array" and "items" in schema:
        return [e for i, v in enumerate(value) for e in _problems(v, schema["items"], [*path, i])]
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
            found += _problems(item, props.get(key, extra), [*path, key])
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
    return f"{kind} {_clip(repr(value), 80)}"


def _schema_checker(schema: dict[str, Any]) -> Callable[[dict[str, Any]], list[str]]:
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
        return sorted(f"at {_path(list(e.absolute_path))}: {_clip(e.message)}" for e in errors)

    return check


def _json_ready(
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
        return _json_ready(value.model_dump(mode="json"), where, fail, seen)
    if isinstance(value, (dict, list, tuple)):
        if id(value) in seen:
            raise fail(f"a {type(value).__name__} that contains itself at {where}")
        inner = seen | {id(value)}
        if not isinstance(value, dict):
            return [_json_ready(v, f"{where}[{i}]", fail, inner) for i, v in enumerate(value)]
        for key in value:
            if not isinstance(key, str):
                raise fail(f"a dict key of type {type(key).__name__} ({key!r}) at {where}")
        return {
            str.__str__(k): _json_ready(v, f"{where}[{k!r}]", fail, inner) for k, v in value.items()
        }
    kind = type(value)
    named = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    raise fail(f"a {named} at {where}, which is not JSON")


def _sorted(value: _T) -> _T:
    """``value`` with dict keys sorted at every level, so its JSON text is always the same."""
    if isinstance(value, dict):
        return cast(_T, {k: _sorted(value[k]) for k in sorted(value)})
    if isinstance(value, list):
        return cast(_T, [_sorted(v) for v in value])
    return value


def _check_name(fn: Callable[..., Any], name: str | None) -> str:
    chosen = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(chosen, str) or not NAME_PATTERN.match(chosen):
        raise ToolDefinitionError(
            f"Cannot expose tool {chosen!r}: a tool name is 1-64 letters, digits, '_' or '-' and "
            "does not start with a digit or '-'; pass @tool(name=...)."
        )
    return chosen


def _first_paragraph(fn: Callable[..., Any]) -> str:
    doc = None if isinstance(fn, functools.partial) else inspect.getdoc(fn)
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc else ""


def _pydantic_problems(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    return "; ".join(f"at {_path(list(e['loc']))}: {_clip(e['msg'])}" for e in errors)


def _path(parts: list[Any]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return text.lstrip(".") or "(root)"


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
