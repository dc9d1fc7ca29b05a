"""Python tools for agents: ``@tool``, input schemas, validation at the call boundary, recovery.

Design note: a tool's JSON schema is what the model sees *and* what is enforced, so it is built
once (inferred from basic annotations, taken from a Pydantic model, or given explicitly), stored
with keys sorted at every level, and every call is checked against it before the body runs
(``agentworks.tool_schema`` builds and checks schemas).
Results become plain JSON values at this boundary because the agent journal persists them and a
recovered call must return exactly what the original returned. Sync bodies run in a worker
thread so a blocking service call never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast, overload

from pydantic import BaseModel, ValidationError

from agentworks import codes
from agentworks.errors import ToolDefinitionError, ToolError, ToolResultError
from agentworks.tool_schema import (
    annotation_schema,
    clip,
    json_ready,
    pydantic_problems,
    resolve_annotation,
    schema_checker,
    schema_problems,
    sorted_keys,
)

__all__ = ["Tool", "ToolArgumentsError", "tool"]

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
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
        return sorted_keys(
            {"name": self.name, "description": self.description, "parameters": self.input_schema}
        )

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Validate ``arguments``, run the body and return its result as plain JSON values."""
        kwargs = self._prepare(arguments)
        try:
            result = await _call(self.fn, self.is_async, kwargs)
        except Exception as exc:
            raise ToolError(
                f"Tool {self.name!r} raised {type(exc).__name__}: {clip(str(exc))}"
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
                f"{type(exc).__name__}: {clip(str(exc))}"
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
                problems = pydantic_problems(exc)
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
                    f"{self.output_model.__name__}: {pydantic_problems(exc)}."
                ) from exc

        def fail(why: str) -> ToolResultError:
            return ToolResultError(f"Tool {self.name!r} {verb} {why}; {_JSON_HINT}.")

        return json_ready(result, "result", fail)

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
            return sorted_keys(cast(dict[str, Any], json_ready(schema, "its schema", self._bad)))
        properties: dict[str, Any] = {}
        for p in params:
            where = f"parameter {p.name!r}"
            properties[p.name] = annotation_schema(hints[p.name], where, self._bad)
            if p.default is not p.empty:
                default = json_ready(p.default, f"the default of {where}", self._bad)
                properties[p.name]["default"] = default
        required = [p.name for p in params if p.default is p.empty]
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        schema = sorted_keys({**schema, **({"required": required} if required else {})})
        self._check = functools.partial(schema_problems, schema=schema, path=[])
        return schema

    def _resolve(self, annotation: Any, where: str) -> Any:
        return resolve_annotation(self.fn, annotation, where, self._localns, self._bad)

    def _explicit_schema(self, schema: Any) -> dict[str, Any]:
        if not isinstance(schema, dict) or schema.get("type") != "object":
            got = schema.get("type") if isinstance(schema, dict) else type(schema).__name__
            raise self._bad(f'schema= must be a JSON Schema with "type": "object", got {got!r}')
        checked = sorted_keys(cast(dict[str, Any], json_ready(schema, "schema=", self._bad)))
        try:
            self._check = schema_checker(checked)
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
