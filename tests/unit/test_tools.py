"""@tool: inferred and explicit schemas, Pydantic boundaries, invocation, results, recovery."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel

from agentworks.errors import ToolDefinitionError, ToolError, ToolResultError
from agentworks.tools import Tool, ToolArgumentsError, tool

ROOT = Path(__file__).resolve().parents[2]


def run(coro: Any) -> Any:
    """Run one coroutine to completion on a fresh event loop."""
    return asyncio.run(coro)


class Item(BaseModel):
    """One line of an order."""

    sku: str
    qty: int = 1


class Order(BaseModel):
    """An order to place."""

    items: list[Item]
    due: datetime.date


class Receipt(BaseModel):
    """What the order service answers."""

    order_id: str
    placed: datetime.date


class Point:
    """A class that is neither JSON nor a Pydantic model."""


def params(t: Tool) -> dict[str, Any]:
    """The parameter schemas of an inferred tool, by name."""
    props: dict[str, Any] = t.input_schema["properties"]
    return props


# -- inference ---------------------------------------------------------------------------------


def test_scalar_annotations_become_required_typed_properties() -> None:
    """str, int, float and bool parameters map to the JSON types, all required, no extras."""

    @tool
    def f(s: str, i: int, x: float, b: bool) -> None:
        pass

    assert f.input_schema == {
        "additionalProperties": False,
        "properties": {
            "b": {"type": "boolean"},
            "i": {"type": "integer"},
            "s": {"type": "string"},
            "x": {"type": "number"},
        },
        "required": ["s", "i", "x", "b"],
        "type": "object",
    }


def test_optional_list_dict_literal_any_and_annotated() -> None:
    """X | None, Optional, list, dict[str, X], Literal, Any and Annotated notes are inferred."""

    @tool
    def f(
        a: int | None,
        b: Optional[str],  # noqa: UP045 - the typing spelling is supported too
        c: list[int],
        d: dict[str, float],
        e: Literal["low", "high"],
        g: Any,
        h: Annotated[str, "The city to look up"],
        i: list,  # type: ignore[type-arg]
        j: dict,  # type: ignore[type-arg]
        k: Literal[1, "x", None],
    ) -> None:
        pass

    assert params(f) == {
        "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "b": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "c": {"items": {"type": "integer"}, "type": "array"},
        "d": {"additionalProperties": {"type": "number"}, "type": "object"},
        "e": {"enum": ["low", "high"], "type": "string"},
        "g": {},
        "h": {"description": "The city to look up", "type": "string"},
        "i": {"type": "array"},
        "j": {"type": "object"},
        "k": {"enum": [1, "x", None]},
    }


def test_defaults_are_optional_and_shown_in_the_schema() -> None:
    """A parameter with a default is not required and its JSON default appears in the schema."""

    @tool
    def f(city: str, days: int = 3, tags: list[str] = ("a",), note: str | None = None) -> None:  # type: ignore[assignment]
        pass

    assert f.input_schema["required"] == ["city"]
    assert params(f)["days"] == {"default": 3, "type": "integer"}
    assert params(f)["tags"]["default"] == ["a"]
    assert params(f)["note"]["default"] is None


def test_no_parameters_gives_an_empty_closed_object() -> None:
    """A tool without parameters takes an empty object and nothing else."""

    @tool
    def now() -> str:
        return "12:00"

    assert now.input_schema == {"additionalProperties": False, "properties": {}, "type": "object"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(x): pass", "parameter 'x' has no type annotation"),
        ("def f(x: Point): pass", "unsupported type 'Point'"),
        ("def f(x: set[int]): pass", "unsupported type"),
        ("def f(x: tuple[int, int]): pass", "unsupported type"),
        ("def f(x: dict[int, str]): pass", "use dict[str, X]"),
        ("def f(*xs: int): pass", "*xs"),
        ("def f(**kw: int): pass", "**kw"),
        ("def f(x: int, /): pass", "positional-only"),
        ("def f(x: 'Missing'): pass", "cannot be resolved"),
        ("def f(x: Literal[1.5]): pass", "Literal value 1.5"),
        ("def f(x: list[Item]): pass", "Pydantic model Item"),
        ("def f(o: Order, n: int): pass", "must be the only parameter"),
        ("def f(x: int = {1}): pass", "the default of parameter 'x'"),
        ("def f(x: int) -> 'Nowhere': pass", "the return annotation"),
        ("def f():\n    yield 1", "generator"),
    ],
)
def test_bad_definitions_are_refused_with_guidance(source: str, expected: str) -> None:
    """Functions whose schema cannot be inferred fail at decoration, saying what to do."""
    namespace: dict[str, Any] = {
        "Point": Point,
        "Literal": Literal,
        "Item": Item,
        "Order": Order,
    }
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError, match="Cannot expose tool 'f'") as info:
        tool(namespace["f"])
    assert expected in str(info.value)
    assert info.value.code == "tool-definition"


def test_unannotated_parameter_error_suggests_annotations_or_schema() -> None:
    """The missing-annotation message lists the supported annotations and schema=."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def f(x):  # type: ignore[no-untyped-def]
            pass

    assert "annotate it with str, int" in str(info.value)
    assert "schema={...}" in str(info.value)


# -- explicit schema ---------------------------------------------------------------------------


def test_explicit_schema_overrides_inference_and_validates_arguments() -> None:
    """schema= replaces inference (custom types allowed) and invocations are checked against it."""
    schema = {
        "type": "object",
        "properties": {"where": {"type": "object", "required": ["x", "y"]}},
        "required": ["where"],
    }

    @tool(schema=schema)
    def locate(where: Point) -> str:
        return f"{where['x']},{where['y']}"  # type: ignore[index]

    assert locate.spec()["parameters"] == {
        "properties": {"where": {"required": ["x", "y"], "type": "object"}},
        "required": ["where"],
        "type": "object",
    }
    assert run(locate.invoke({"where": {"x": 1, "y": 2}})) == "1,2"
    with pytest.raises(ToolError, match=r"at where: 'y' is a required property"):
        run(locate.invoke({"where": {"x": 1}}))


def test_explicit_integer_rejects_floats_and_booleans() -> None:
    """An explicit "integer" accepts only JSON integers, as inferred int parameters do."""

    @tool(schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    def square(n: int) -> int:
        return n * n

    assert run(square.invoke({"n": 3})) == 9
    for bad in (2.0, True):
        with pytest.raises(ToolError, match=r"at n: .* is not of type 'integer'"):
            run(square.invoke({"n": bad}))


def test_explicit_schema_with_kwargs_receives_every_argument() -> None:
    """A **kwargs function with schema= gets the validated arguments as keywords."""

    @tool(schema={"type": "object", "properties": {"a": {"type": "string"}}})
    def echo(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    assert run(echo.invoke({"a": "x", "b": 2})) == {"a": "x", "b": 2}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "array"}, '"type": "object", got \'array\''),
        ([], "got 'list'"),
        ({"type": "object", "properties": {"x": {"type": 42}}}, "not a valid JSON Schema"),
        ({"type": "object", "properties": {"y": {}}}, "declares 'y'"),
        ({"type": "object", "properties": {"x": {}}}, 'does not list it in "required"'),
    ],
)
def test_bad_explicit_schemas_are_refused(schema: Any, expected: str) -> None:
    """A schema that is not an object schema, is invalid or does not fit the function fails."""

    def f(x: Point) -> None:
        pass

    with pytest.raises(ToolDefinitionError) as info:
        tool(f, schema=schema)
    assert expected in str(info.value)


# -- Pydantic ----------------------------------------------------------------------------------


def test_pydantic_input_model_gives_the_schema_and_is_validated() -> None:
    """A single model parameter: its JSON schema is the input schema and arguments become it."""
    seen: list[Order] = []

    @tool
    def place(order: Order) -> int:
        seen.append(order)
        return len(order.items)

    assert place.input_schema == json.loads(json.dumps(Order.model_json_schema(), sort_keys=True))
    assert run(place.invoke({"items": [{"sku": "A"}], "due": "2026-01-02"})) == 1
    assert seen == [Order(items=[Item(sku="A")], due=datetime.date(2026, 1, 2))]


def test_pydantic_input_errors_name_the_field_path() -> None:
    """Invalid model arguments fail with each field's path and message, readable by a model."""

    @tool
    def place(order: Order) -> int:
        return 0

    with pytest.raises(ToolArgumentsError) as info:
        run(place.invoke({"items": [{"sku": "A", "qty": "many"}]}))
    message = str(info.value)
    assert "Invalid arguments for tool 'place'" in message
    assert "at items[0].qty: Input should be a valid integer" in message
    assert "at due: Field required" in message


def test_pydantic_output_model_is_validated_and_dumped_as_json() -> None:
    """A model return annotation validates the result (instance or dict) and dumps it to JSON."""

    @tool
    async def place(sku: str) -> Receipt:
        return Receipt(order_id=f"o-{sku}", placed=datetime.date(2026, 3, 4))

    @tool
    def from_dict(sku: str) -> Receipt:
        return {"order_id": sku, "placed": "2026-03-04"}  # type: ignore[return-value]

    assert place.output_model is Receipt
    assert run(place.invoke({"sku": "A"})) == {"order_id": "o-A", "placed": "2026-03-04"}
    assert run(from_dict.invoke({"sku": "B"})) == {"order_id": "B", "placed": "2026-03-04"}


def test_result_not_matching_the_output_model_fails() -> None:
    """A result that does not fit the output model raises ToolResultError naming the model."""

    @tool
    def place(sku: str) -> Receipt:
        return {"order_id": sku}  # type: ignore[return-value]

    with pytest.raises(ToolResultError, match=r"not a valid Receipt: at placed: Field required"):
        run(place.invoke({"sku": "A"}))


def test_model_instances_inside_plain_results_are_dumped() -> None:
    """Models nested in a dict or list result are dumped with JSON types."""

    @tool
    def both() -> dict[str, Any]:
        return {"r": [Receipt(order_id="x", placed=datetime.date(2026, 1, 1))]}

    assert run(both.invoke({})) == {"r": [{"order_id": "x", "placed": "2026-01-01"}]}


# -- names, descriptions, decorator forms ------------------------------------------------------


def test_decorator_forms_and_direct_calls_all_make_tools() -> None:
    """@tool, @tool(), @tool(name=...) and tool(fn, ...) all return a Tool."""

    @tool
    def a() -> int:
        return 1

    @tool()
    def b() -> int:
        return 2

    @tool(name="renamed", description="Says three.")
    def c() -> int:
        return 3

    d = tool(lambda: 4, name="four")
    assert [t.name for t in (a, b, c, d)] == ["a", "b", "renamed", "four"]
    assert c.spec() == {
        "description": "Says three.",
        "name": "renamed",
        "parameters": {"additionalProperties": False, "properties": {}, "type": "object"},
    }
    assert tool(a) is a


def test_description_is_the_docstrings_first_paragraph() -> None:
    """The docstring's first paragraph, on one line, is the description; none gives ''."""

    @tool
    def f() -> None:
        """Look up the weather
        for a city.

        Details the model does not need.
        """

    @tool
    def g() -> None:
        pass

    assert f.description == "Look up the weather for a city."
    assert g.description == ""


@pytest.mark.parametrize("name", ["1abc", "a b", "", "-x", "x" * 65, "café", "<lambda>"])
def test_invalid_tool_names_are_refused(name: str) -> None:
    """Names outside [A-Za-z_][A-Za-z0-9_-]{0,63} fail and point to name=."""
    with pytest.raises(ToolDefinitionError, match=r"pass @tool\(name=\.\.\.\)"):
        tool(lambda: None, name=name if name != "<lambda>" else None)


@pytest.mark.parametrize("name", ["_x", "a-b", "A9", "x" * 64])
def test_valid_tool_names_are_kept(name: str) -> None:
    """Names matching the rule, up to 64 characters, are used as given."""
    assert tool(lambda: None, name=name).name == name


def test_options_on_an_existing_tool_are_refused() -> None:
    """Wrapping a Tool again with options fails instead of silently ignoring them."""

    @tool
    def f() -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="already a tool"):
        tool(f, name="g")


# -- calling -----------------------------------------------------------------------------------


def test_closures_capture_their_variables_sync_and_async() -> None:
    """Tools defined inside a function see and update the variables they capture."""

    def make() -> tuple[Tool, Tool, list[str]]:
        log: list[str] = []
        prefix = "hello"

        @tool
        def greet(who: str) -> str:
            log.append(who)
            return f"{prefix} {who}"

        @tool
        async def count() -> int:
            return len(log)

        return greet, count, log

    greet, count, log = make()
    assert run(greet.invoke({"who": "ada"})) == "hello ada"
    assert run(count.invoke({})) == 1
    assert log == ["ada"]
    assert count.is_async and not greet.is_async


def test_closures_may_use_types_defined_in_the_enclosing_function() -> None:
    """String annotations naming a model or alias local to the enclosing function resolve."""

    def make() -> Tool:
        class Query(BaseModel):
            text: str

        Level = Literal["a", "b"]

        @tool
        def search(q: Query) -> str:
            return q.text

        @tool
        def level(x: Level) -> str:
            return str(x)

        assert params(level)["x"] == {"enum": ["a", "b"], "type": "string"}
        return search

    assert run(make().invoke({"text": "hi"})) == "hi"


def test_annotations_resolve_in_the_functions_own_module_first() -> None:
    """A name in the function's module wins over the same name where tool() is called."""
    module: dict[str, Any] = {"Literal": Literal}
    exec("from __future__ import annotations\nKind = Literal['a']\ndef f(k: Kind): pass", module)
    Kind = Literal["z"]  # noqa: F841 - the decorating scope's different Kind must be ignored
    assert params(tool(module["f"]))["k"] == {"enum": ["a"], "type": "string"}


def test_sync_tools_run_off_the_event_loop() -> None:
    """A blocking sync tool does not stall the loop: a coroutine can run while it waits."""
    released = threading.Event()

    @tool
    def wait_for_release() -> bool:
        return released.wait(timeout=10)

    async def release() -> None:
        released.set()

    async def both() -> list[Any]:
        return list(await asyncio.gather(wait_for_release.invoke({}), release()))

    assert run(both()) == [True, None]


def test_direct_python_calls_reach_the_original_function() -> None:
    """Calling the tool object calls the function itself, positional arguments included."""

    @tool
    def add(a: int, b: int = 1) -> int:
        return a + b

    @tool
    async def double(a: int) -> int:
        return 2 * a

    assert add(2, 3) == 5
    assert run(double(4)) == 8
    assert str(inspect.signature(add)) == "(a: 'int', b: 'int' = 1) -> 'int'"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "at (root): 'city' is required"),
        ({"city": 5}, "at city: expected string, got integer 5"),
        ({"city": "x", "days": 2.5}, "at days: expected integer, got number 2.5"),
        ({"city": "x", "days": True}, "at days: expected integer, got boolean True"),
        ({"city": "x", "days": 2.0}, "at days: expected integer, got number 2.0"),
        ({"city": "x", "unit": "k"}, "at unit: expected one of 'c', 'f', got string 'k'"),
        (
            {"city": "x", "zone": 1},
            "unexpected 'zone', expected only ['city', 'days', 'limits', 'tags', 'unit']",
        ),
        ({"city": "x", "tags": ["a", 1]}, "at tags[1]: expected string, got integer 1"),
        ({"city": "x", "limits": {"a": "b"}}, "at limits.a: expected integer, got string 'b'"),
        ({"city": "x", "tags": "a"}, "at tags: expected array or null, got string 'a'"),
    ],
)
def test_invalid_arguments_fail_before_the_body_runs(
    arguments: dict[str, Any], expected: str
) -> None:
    """Arguments not matching the inferred schema raise ToolError and the body never runs."""
    calls: list[str] = []

    @tool
    def weather(
        city: str,
        days: int = 1,
        unit: Literal["c", "f"] = "c",
        tags: list[str] | None = None,
        limits: dict[str, int] | None = None,
    ) -> str:
        calls.append(city)
        return "sunny"

    with pytest.raises(ToolArgumentsError) as info:
        run(weather.invoke(arguments))
    assert info.value.code == "tool-arguments-invalid"
    assert "Invalid arguments for tool 'weather'" in str(info.value)
    assert expected in str(info.value)
    assert calls == []


def test_arguments_must_be_an_object() -> None:
    """A non-object argument value fails with the type received."""

    @tool
    def f() -> None:
        pass

    with pytest.raises(ToolArgumentsError, match="takes a JSON object of arguments, got list"):
        run(f.invoke([]))  # type: ignore[arg-type]


def test_exceptions_from_the_body_are_chained_in_tool_error() -> None:
    """A raising body gives ToolError naming the tool; the original exception is its cause."""

    @tool
    async def fail(why: str) -> None:
        raise LookupError(why)

    with pytest.raises(ToolError) as info:
        run(fail.invoke({"why": "no such order"}))
    assert str(info.value) == "Tool 'fail' raised LookupError: no such order [tool-error]"
    assert isinstance(info.value.__cause__, LookupError)
    assert type(info.value) is ToolError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({1, 2}, "returned a set at result, which is not JSON"),
        (Point(), f"returned a {__name__}.Point at result"),
        ({"a": [1, float("nan")]}, "non-finite float nan at result['a'][1]"),
        ({"a": float("inf")}, "non-finite float inf"),
        ({1: "x"}, "a dict key of type int (1) at result"),
        ({"when": datetime.date(2026, 1, 1)}, "a datetime.date at result['when']"),
        (b"bytes", "a bytes at result"),
    ],
)
def test_non_json_results_fail_naming_tool_and_type(value: Any, expected: str) -> None:
    """Results JSON cannot hold raise ToolResultError with the tool, type, place and a hint."""

    @tool
    def give() -> Any:
        return value

    with pytest.raises(ToolResultError) as info:
        run(give.invoke({}))
    assert str(info.value).startswith("Tool 'give' returned ")
    assert expected in str(info.value)
    assert "return dicts, lists, str, numbers, bools or None, or a Pydantic model" in str(
        info.value
    )


def test_self_containing_results_fail_clearly() -> None:
    """A list that contains itself is refused instead of recursing forever."""
    loop: list[Any] = []
    loop.append(loop)

    @tool
    def give() -> Any:
        return loop

    with pytest.raises(ToolResultError, match=r"contains itself at result\[0\]"):
        run(give.invoke({}))


def test_json_results_come_back_as_plain_json_values() -> None:
    """Tuples become lists and everything else JSON passes through unchanged."""

    @tool
    def give() -> Any:
        return {"t": (1, 2), "n": None, "f": 1.5, "b": False, "s": "x", "l": [{"k": []}]}

    result = run(give.invoke({}))
    assert result == {"t": [1, 2], "n": None, "f": 1.5, "b": False, "s": "x", "l": [{"k": []}]}
    assert json.loads(json.dumps(result)) == result


# -- deterministic schemas ---------------------------------------------------------------------


SPEC_SCRIPT = """
import json
from typing import Literal
from pydantic import BaseModel
from agentworks.tools import tool

class Item(BaseModel):
    sku: str
    qty: int = 1

class Order(BaseModel):
    items: list[Item]
    notes: dict[str, str] = {}

def place(order: Order) -> None:
    '''Place an order.'''

def search(z: str, a: list[int] | None = None, m: Literal["x", "y"] = "x") -> None:
    '''Search.'''

print(json.dumps([tool(place).spec(), tool(search).spec()], sort_keys=True))
print(json.dumps([tool(place).spec(), tool(search).spec()]))
"""


def test_specs_are_byte_identical_across_processes(tmp_path: Path) -> None:
    """Two interpreters with different hash seeds print the same spec bytes, keys pre-sorted."""
    script = tmp_path / "specs.py"
    script.write_text(SPEC_SCRIPT, encoding="utf-8")
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, check=True
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    sorted_line, as_built_line = outputs[0].splitlines()
    assert sorted_line == as_built_line
    assert "0x" not in sorted_line


def test_spec_returns_a_copy_in_the_provider_format() -> None:
    """spec() has name, description and parameters, and editing it leaves the tool intact."""

    @tool
    def f(x: int) -> None:
        """Do f."""

    spec = f.spec()
    assert set(spec) == {"name", "description", "parameters"}
    spec["parameters"]["properties"]["x"]["type"] = "string"
    assert f.spec()["parameters"]["properties"]["x"] == {"type": "integer"}


# -- recover lookups ---------------------------------------------------------------------------


def test_sync_recover_lookup_gets_the_original_arguments_with_defaults() -> None:
    """lookup() calls a sync recover= with the tool's keyword arguments, defaults filled in."""
    asked: list[dict[str, Any]] = []

    def receipt(sku: str, qty: int) -> dict[str, Any]:
        asked.append({"sku": sku, "qty": qty})
        return {"order_id": f"{sku}-{qty}"}

    @tool(recover=receipt)
    def place(sku: str, qty: int = 1) -> dict[str, Any]:
        raise AssertionError("the body must not run during a lookup")

    assert place.recover is receipt
    assert run(place.lookup({"sku": "A"})) == {"order_id": "A-1"}
    assert asked == [{"sku": "A", "qty": 1}]


def test_async_recover_lookup_with_pydantic_models() -> None:
    """An async recover= gets the same validated model as the tool, its result is dumped."""

    async def receipt(order: Order) -> Receipt:
        return Receipt(order_id=order.items[0].sku, placed=order.due)

    @tool(recover=receipt)
    async def place(order: Order) -> Receipt:
        raise AssertionError("the body must not run during a lookup")

    result = run(place.lookup({"items": [{"sku": "Z"}], "due": "2026-05-06"}))
    assert result == {"order_id": "Z", "placed": "2026-05-06"}


def test_sync_recover_returning_an_awaitable_is_awaited() -> None:
    """A sync recover= that hands back a coroutine (a lambda over an async lookup) works."""

    async def receipt(sku: str) -> dict[str, str]:
        return {"order_id": sku}

    @tool(recover=lambda sku: receipt(sku))
    def place(sku: str) -> None:
        pass

    assert run(place.lookup({"sku": "Q"})) == {"order_id": "Q"}


def test_lookup_without_recover_fails_with_guidance() -> None:
    """lookup() on a tool without recover= raises ToolError saying what to add."""

    @tool
    def place(sku: str) -> None:
        pass

    assert place.recover is None
    with pytest.raises(ToolError, match=r"has no recover= lookup.*@tool\(recover=lookup_receipt\)"):
        run(place.lookup({"sku": "A"}))


def test_a_failing_lookup_is_chained_in_tool_error() -> None:
    """A recover= that cannot establish the outcome raises; the cause is kept."""

    def receipt(sku: str) -> dict[str, Any]:
        raise KeyError(sku)

    @tool(recover=receipt)
    def place(sku: str) -> None:
        pass

    with pytest.raises(ToolError, match="could not establish the outcome: KeyError") as info:
        run(place.lookup({"sku": "A"}))
    assert isinstance(info.value.__cause__, KeyError)


def test_a_lookup_returning_non_json_fails() -> None:
    """A recover= result is held to the same JSON rule as the tool's own result."""

    @tool(recover=lambda sku: {sku})
    def place(sku: str) -> None:
        pass

    with pytest.raises(ToolResultError, match="recover= lookup returned a set"):
        run(place.lookup({"sku": "A"}))


@pytest.mark.parametrize(
    ("recover", "expected"),
    [
        (lambda sku: None, "'qty'"),
        (lambda sku, qty, extra: None, "'extra'"),
        (42, "recover= must be a function, got int"),
    ],
)
def test_recover_must_accept_the_tools_arguments(recover: Any, expected: str) -> None:
    """A recover= that cannot be called with the tool's keyword arguments fails at decoration."""

    def place(sku: str, qty: int = 1) -> None:
        pass

    with pytest.raises(ToolDefinitionError) as info:
        tool(place, recover=recover)
    assert expected in str(info.value)


def test_importing_tools_does_not_import_jsonschema() -> None:
    """Defining inferred tools leaves jsonschema unimported, keeping each attempt's start fast."""
    code = (
        "import sys\n"
        "from agentworks.tools import tool\n"
        "def f(x: int, y: list[str] | None = None) -> int:\n"
        "    return x\n"
        "tool(f)\n"
        "print('jsonschema' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "False"
