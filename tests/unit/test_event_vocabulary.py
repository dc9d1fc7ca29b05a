"""The ledger's vocabulary: every event the kit writes is a documented kind with its own fields."""

from __future__ import annotations

import ast
import re
import types
import typing
from pathlib import Path

import pytest

from relay_notebook.record import ledger_events as vocabulary
from relay_notebook.record.ledger import EventWriter, read_events
from relay_notebook.record.ledger_events import (
    EVENT_KINDS,
    FIELDS,
    EventFields,
    StepInfo,
    StepReused,
)

ROOT = Path(__file__).resolve().parents[2]
#: where events are written: the runner, the record, and agentworks through its runtime
WRITERS = [
    ROOT / "agentworks",
    ROOT / "relay_notebook" / "runner",
    ROOT / "relay_notebook" / "record",
]

#: the fields unpacked into ``emit`` calls, by the name the writers give them
UNPACKED = {
    "info": set(StepInfo.__annotations__),
    "fields": set(StepReused.__annotations__),
    "raised": {"raised"},  # agentworks.platform: a replayed error's ``**raised`` keyword
    "members": set(StepInfo.__annotations__),  # ``info`` encoded, for ``emit_members``
}


def _members(hint: object) -> set[object]:
    """The types a field may hold (the members of a union, or the one type)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set(typing.get_args(hint))
    return {hint}


def test_every_kind_has_its_fields_and_every_field_one_type() -> None:
    """Each kind's fields are fields of ``Event``, of a type ``Event`` allows for them."""
    assert set(FIELDS) == set(EVENT_KINDS)
    shared = typing.get_type_hints(EventFields)
    assert set(shared) == set().union(*FIELDS.values())
    for kind, fields in vocabulary._KINDS.items():
        for name, hint in typing.get_type_hints(fields).items():
            assert _members(hint) <= _members(shared[name]), f"{kind}.{name}: {hint}"


def test_a_field_not_of_its_kind_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """``emit`` names the kind and the field it does not have, and writes no line."""
    path = tmp_path / "dbos_events.jsonl"
    writer = EventWriter(path, run_id="r-1", attempt=1)
    with pytest.raises(ValueError, match="'step_end' has no field 'detail'"):
        writer.emit("step_end", step="load", detail="x")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="'retry' is not a kind of ledger event"):
        writer.emit("retry", step="load")  # type: ignore[arg-type]
    writer.emit("step_end", step="load", duration_ms=1.5)
    writer.close()
    assert [(e["seq"], e["kind"], e.get("step")) for e in read_events(path)] == [
        (1, "step_end", "load")
    ]


def _member_names(where: str, members: ast.expr) -> set[str]:
    """The fields an ``emit_members(KIND, MEMBERS)`` call writes: encoded fields named as
    ``UNPACKED`` names them, and the members an f-string adds after them (``,"name":VALUE``)."""
    parts = members.values if isinstance(members, ast.JoinedStr) else [members]
    names: set[str] = set()
    value_next = False  # the part after ``"name":`` is that member's value
    for part in parts:
        if isinstance(part, ast.Constant):
            names |= set(re.findall(r'"(\w+)":', str(part.value)))
            value_next = str(part.value).endswith(":")
            continue
        encoded = part.value if isinstance(part, ast.FormattedValue) else part
        if not value_next:
            assert isinstance(encoded, ast.Name), f"{where}: members of unknown fields"
            assert encoded.id in UNPACKED, f"{where}: members of unknown fields"
            names |= UNPACKED[encoded.id]
        value_next = False
    return names


def _emit_calls(path: Path) -> list[tuple[str, ast.Call, int]]:
    """Every ``….emit(KIND, …)``, ``emit(KIND, …)``, ``….emit_members(KIND, …)`` and
    ``record_event(_, _, KIND, …)`` call."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in ("emit", "emit_members"):
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node, 0))
        elif name == "record_event":
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node, 2))
    return found


def test_every_emit_call_of_the_runner_and_agentworks_is_in_the_vocabulary() -> None:
    """Read from the source: each event written names a kind and only fields of that kind."""
    checked: dict[str, int] = {}
    for folder in WRITERS:
        for path in sorted(folder.rglob("*.py")):
            for where, call, at in _emit_calls(path):
                if len(call.args) <= at:
                    continue  # not an event: ``logging.Handler.emit(record)`` and the like
                kind_arg = call.args[at]
                if isinstance(kind_arg, ast.Call) and getattr(kind_arg.func, "id", "") == "cast":
                    kind_arg = kind_arg.args[1]  # cast(EventKind, kind)
                if isinstance(kind_arg, ast.Name) and kind_arg.id == "kind":
                    continue  # forwards its own caller's kind (``record_event``, the runtime)
                assert isinstance(kind_arg, ast.Constant), f"{where}: the kind is not a literal"
                kind = kind_arg.value
                assert kind in FIELDS, f"{where}: {kind!r} is not in record.events"
                if getattr(call.func, "attr", None) == "emit_members":
                    names = _member_names(where, call.args[1])
                    assert names <= FIELDS[kind], f"{where}: {kind} has no {names - FIELDS[kind]}"
                for keyword in call.keywords:
                    if keyword.arg is None:  # **info: a step's own fields, typed as the kind's
                        assert isinstance(keyword.value, ast.Name), where
                        unpacked = UNPACKED.get(keyword.value.id)
                        assert unpacked is not None, f"{where}: unpacks an untyped dict"
                        names = unpacked
                    else:
                        names = {keyword.arg}
                    assert names <= FIELDS[kind], f"{where}: {kind} has no {names - FIELDS[kind]}"
                checked[kind] = checked.get(kind, 0) + 1
    # the scan found the writers it is meant to check (a rename would otherwise pass silently)
    assert set(checked) == set(EVENT_KINDS)
