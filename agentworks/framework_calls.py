"""Receipts and tokens of the model requests and MCP calls of agent frameworks' DBOS steps.

Design note: ``framework_step`` is asked once per decorated function, as the child's
instrumented ``DBOS.step`` decorates it: for a framework's step (``agentworks.frameworks``) it
wraps the body so that, each time the body really runs, the call's receipt (messages in, the
answer, the tools offered) is written to ``execution/call-N/receipt.json`` through the run's
redactor and a ``model_call`` ledger event says its kind, model and tokens as the framework
reported them. Any other step is returned as it is: a relay that uses no framework pays nothing
per step. A replayed step runs no body, so writes nothing: the tokens of a reused call are
those its executing attempt recorded. Kept apart from ``agentworks.frameworks`` because it
reads DBOS's context, which the read side must not import.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from agentworks import _runtime
from agentworks.frameworks import FrameworkStep, step_role

__all__ = ["framework_owned", "framework_step"]

#: the modules whose ``DBOS.step`` functions are framework calls
_MODULES = ("pydantic_ai.", "dbos_openai_agents.")


def framework_owned(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is a step of a framework's own (a call, or plumbing such as Pydantic
    AI's MCP ``get_tools``): its arguments are the framework's run context, not the relay's
    values, and DBOS does not save them."""
    return (getattr(func, "__module__", None) or "").startswith(_MODULES)


def framework_step(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` wrapped to record its calls if it is a framework's model request or MCP call
    (see the module's note); else ``func`` itself. Called once, as the step is decorated."""
    module = getattr(func, "__module__", None) or ""
    if not module.startswith(_MODULES):
        return func
    role = step_role(name, module)
    if role is None:
        return func

    @functools.wraps(func)
    async def observed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result: Any = None
        error: str | None = None
        try:
            result = await func(*args, **kwargs)
            return result
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            _record(name, role, func, args, kwargs, result, error, started)

    return observed


def _record(
    name: str,
    role: FrameworkStep,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    result: Any,
    error: str | None,
    started: float,
) -> None:
    rt = _runtime.current("a framework call")
    if role.framework == "pydantic_ai":
        facts = _pydantic_facts(role, func, args, kwargs, result)
    else:
        facts = _openai_facts(args, kwargs, result)
    duration = round((time.perf_counter() - started) * 1000, 2)
    call_dir = rt.next_call_dir(role.owner or facts.get("model"))
    receipt = {
        "step": name,
        "kind": role.kind,
        "framework": role.framework,
        **facts,
        "duration_ms": duration,
        "error": error,
    }
    text = rt.redactor.scrub(json.dumps(receipt, indent=2, sort_keys=True, default=repr))
    (call_dir / "receipt.json").write_text(text + "\n", encoding="utf-8")
    from dbos import DBOS

    rt.emit(
        "model_call",
        step=name,
        workflow_id=DBOS.workflow_id,
        step_id=DBOS.step_id,
        call_kind=role.kind,
        framework=role.framework,
        name=role.owner or role.framework,
        model=facts.get("model"),
        input_tokens=facts.get("input_tokens"),
        output_tokens=facts.get("output_tokens"),
        tools=facts.get("tools") or [],
        tool=facts.get("tool"),
        call_dir=call_dir.name,
        duration_ms=duration,
        error=error,
    )


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data: pydantic models and dataclasses dumped, the rest as text."""
    try:
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value, fallback=repr, serialize_unknown=True)
    except Exception:  # a receipt never fails the call it describes
        return repr(value)


def _arguments(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's arguments by parameter name: ``DBOSAgent``'s model step takes ``(messages,
    model_settings, model_request_parameters)``, ``DBOSDurability``'s ``(model_id, messages,
    model_settings, model_request_parameters, run_context)``."""
    try:
        return dict(inspect.signature(func).bind_partial(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return dict(kwargs)


def _pydantic_facts(
    role: FrameworkStep,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    result: Any,
) -> dict[str, Any]:
    if role.kind == "mcp":
        tool = args[0] if args else kwargs.get("tool_name")
        return {
            "tool": tool,
            "arguments": _jsonable(args[1] if len(args) > 1 else kwargs.get("tool_args")),
            "result": _jsonable(result),
        }
    named = _arguments(func, args, kwargs)
    messages = named.get("messages")
    params = named.get("model_request_parameters")
    tools = [t.name for t in getattr(params, "function_tools", None) or ()]
    usage = getattr(result, "usage", None)
    return {
        "model": getattr(result, "model_name", None),
        "input_tokens": getattr(usage, "input_tokens", None),
        "output_tokens": getattr(usage, "output_tokens", None),
        "tools": tools,
        "messages": _jsonable(messages),
        "response": _jsonable(result),
    }


def _openai_facts(args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """The request is the closure ``DBOSModelWrapper`` hands its step (``call_llm``): its
    captured ``self`` (the wrapper, holding the model) and the ``get_response`` arguments."""
    call_fn = args[0] if args else kwargs.get("call_fn")
    captured: dict[str, Any] = {}
    code = getattr(call_fn, "__code__", None)
    for var, cell in zip(
        getattr(code, "co_freevars", ()), getattr(call_fn, "__closure__", None) or (), strict=False
    ):
        try:
            captured[var] = cell.cell_contents
        except ValueError:
            continue
    request = _openai_request(captured.get("args") or (), captured.get("kwargs") or {})
    inner = getattr(captured.get("self"), "model", None)
    usage = getattr(result, "usage", None)
    return {
        "model": _openai_model_name(inner),
        "input_tokens": getattr(usage, "input_tokens", None),
        "output_tokens": getattr(usage, "output_tokens", None),
        "tools": [str(getattr(t, "name", t)) for t in request.pop("tools", None) or ()],
        **{k: _jsonable(v) for k, v in request.items()},
        "response": _jsonable(getattr(result, "output", result)),
    }


_OPENAI_PARAMS = ("system_instructions", "input", "model_settings", "tools")


def _openai_request(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    request = dict(zip(_OPENAI_PARAMS, args, strict=False))
    request.update({k: v for k, v in kwargs.items() if k in _OPENAI_PARAMS})
    return request


def _openai_model_name(model: Any) -> str | None:
    if model is None:
        return None
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__
