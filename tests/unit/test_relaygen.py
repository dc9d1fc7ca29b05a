"""The benchmark's relay generator: valid relays with exactly the requested steps."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_relaygen() -> ModuleType:
    """``benchmarks/relaygen.py`` loaded by path (benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("relaygen", BENCHMARKS / "relaygen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("relaygen", module)
    spec.loader.exec_module(module)
    return module


relaygen = load_relaygen()


def steps_of(tree: ast.Module) -> list[str]:
    """Names of module-level async functions decorated ``@DBOS.step()``."""
    return [
        f.name
        for f in tree.body
        if isinstance(f, ast.AsyncFunctionDef)
        and any(ast.unparse(d) == "DBOS.step()" for d in f.decorator_list)
    ]


def called_names(tree: ast.AST) -> list[str]:
    """Every plain function name called in ``tree``, once per call site."""
    return [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]


def reached_from_run(tree: ast.Module) -> set[str]:
    """Functions ``run`` calls, directly or through module-level helpers."""
    functions = {f.name: f for f in tree.body if isinstance(f, ast.AsyncFunctionDef)}
    seen: set[str] = set()
    todo = ["run"]
    while todo:
        for name in called_names(functions[todo.pop()]):
            if name in functions and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


@pytest.mark.parametrize("steps", [1, 3, 40, 200])
def test_generated_relay_parses_with_the_requested_steps(steps: int) -> None:
    """The relay defines exactly ``steps`` distinct steps, each called once, all reached by run."""
    tree = ast.parse(relaygen.generate_relay(steps))
    names = steps_of(tree)
    assert len(names) == len(set(names)) == steps
    calls = called_names(tree)
    assert sorted(c for c in calls if c in names) == sorted(names)
    assert set(names) <= reached_from_run(tree)


def test_generated_relay_has_a_dbos_workflow_entrypoint() -> None:
    """``run(INPUT)`` is an async ``@DBOS.workflow()`` and DBOS is imported from ``dbos``."""
    tree = ast.parse(relaygen.generate_relay(20))
    run = next(f for f in tree.body if isinstance(f, ast.AsyncFunctionDef) and f.name == "run")
    assert [ast.unparse(d) for d in run.decorator_list] == ["DBOS.workflow()"]
    assert [a.arg for a in run.args.args] == ["INPUT"]
    assert any(
        isinstance(s, ast.ImportFrom) and s.module == "dbos" and s.names[0].name == "DBOS"
        for s in tree.body
    )


def test_200_steps_use_every_control_structure_in_about_2000_lines() -> None:
    """The default relay nests branches, loops, try/except, gathers and helpers in ~2,000 lines."""
    text = relaygen.generate_relay()
    tree = ast.parse(text)
    kinds = {type(n) for n in ast.walk(tree)}
    assert {ast.If, ast.For, ast.While, ast.Try} <= kinds
    assert "asyncio.gather(" in text and "async def helper_" in text
    assert 1_800 <= len(text.splitlines()) <= 2_600


def test_same_seed_same_text_other_seed_other_text() -> None:
    """A seed always produces the same relay and a different seed a different one."""
    assert relaygen.generate_relay(50, seed=4) == relaygen.generate_relay(50, seed=4)
    assert relaygen.generate_relay(50, seed=4) != relaygen.generate_relay(50, seed=5)


def test_zero_steps_is_refused() -> None:
    """Asking for no steps raises a ValueError naming the bad count."""
    with pytest.raises(ValueError, match="steps=0"):
        relaygen.generate_relay(0)
