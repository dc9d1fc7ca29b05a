"""Generated relays of any size, for benchmarking the static analysis and the layout.

``generate_relay(200)`` writes a valid relay module (about 2,000 lines) whose ``run`` calls 200
distinct ``@DBOS.step()`` functions through nested if/elif/else, for and while loops,
try/except, ``asyncio.gather`` fan-outs, early returns and module-level helpers. The same
``steps`` and ``seed`` always give the same text.
"""

from __future__ import annotations

import random

__all__ = ["generate_relay"]

_MAX_DEPTH = 4
_INDENT = "    "


def generate_relay(steps: int = 200, seed: int = 0) -> str:
    """The source of a relay with ``steps`` distinct steps, deterministic for ``seed``."""
    if steps < 1:
        raise ValueError(f"a generated relay needs at least one step, got steps={steps}")
    rnd = random.Random(seed)
    lines = [
        f'"""Generated relay: {steps} steps, seed {seed}."""',
        "",
        "import asyncio",
        "",
        "from dbos import DBOS",
        "",
    ]
    for index in range(steps):
        lines.extend(_step(index, rnd))
    gen = _Generator(rnd)
    body: list[str] = []
    gen.block(list(range(steps)), 1, 0, body)
    for helper in gen.helpers:
        lines.extend(helper)
    lines += [
        "",
        "@DBOS.workflow()",
        "async def run(INPUT):",
        '    state = {"value": int(INPUT.get("seed", 0)), "trail": []}',
        *body,
        '    return {"value": state["value"], "trail": state["trail"]}',
    ]
    return "\n".join(lines) + "\n"


def _name(index: int) -> str:
    return f"step_{index:04d}"


def _step(index: int, rnd: random.Random) -> list[str]:
    mul, add, rounds = rnd.choice((31, 37, 41, 43)), rnd.randint(1, 97), rnd.randint(2, 4)
    return [
        "",
        "@DBOS.step()",
        f"async def {_name(index)}(state):",
        '    value = int(state.get("value", 0))',
        f"    for offset in range({rounds}):",
        f"        value = (value * {mul} + {add} + offset) % 10007",
        '    trail = list(state.get("trail", []))[-8:]',
        f'    trail.append("{_name(index)}")',
        '    return {"value": value, "trail": trail}',
    ]


class _Generator:
    """Spends a list of step indices on nested statements; every step is called exactly once."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.helpers: list[list[str]] = []
        self.counter = 0

    def _fresh(self) -> int:
        self.counter += 1
        return self.counter

    def block(self, steps: list[int], indent: int, depth: int, out: list[str]) -> None:
        pad = _INDENT * indent
        i = 0
        while i < len(steps):
            left = len(steps) - i
            roll = self.rnd.random() if depth < _MAX_DEPTH and left >= 3 else 1.0
            if roll < 0.12:
                take = self.rnd.randint(3, min(9, left))
                self._decision(steps[i : i + take], indent, depth, out)
            elif roll < 0.21:
                take = self.rnd.randint(1, min(4, left))
                n = self._fresh()
                out.append(f"{pad}for round_{n} in range({self.rnd.randint(2, 3)}):")
                self.block(steps[i : i + take], indent + 1, depth + 1, out)
            elif roll < 0.28:
                take = self.rnd.randint(1, min(4, left))
                n = self._fresh()
                out.append(f"{pad}guard_{n} = 0")
                out.append(f'{pad}while guard_{n} < 2 and state["value"] % 7 != {n % 7}:')
                self.block(steps[i : i + take], indent + 1, depth + 1, out)
                out.append(f"{pad}{_INDENT}guard_{n} += 1")
            elif roll < 0.35:
                take = self.rnd.randint(2, min(6, left))
                cut = self.rnd.randint(1, take - 1)
                out.append(f"{pad}try:")
                self.block(steps[i : i + cut], indent + 1, depth + 1, out)
                out.append(f"{pad}except ValueError:")
                self.block(steps[i + cut : i + take], indent + 1, depth + 1, out)
            elif roll < 0.43:
                take = self.rnd.randint(2, min(4, left))
                calls = ", ".join(f"{_name(s)}(state)" for s in steps[i : i + take])
                n = self._fresh()
                out.append(f"{pad}results_{n} = await asyncio.gather({calls})")
                out.append(
                    f'{pad}state = {{"value": sum(r["value"] for r in results_{n}) % 10007, '
                    f'"trail": results_{n}[-1]["trail"]}}'
                )
            elif roll < 0.50 and depth < 2:
                take = self.rnd.randint(3, min(8, left))
                name = f"helper_{self._fresh():03d}"
                helper = ["", "", f"async def {name}(state):"]
                self.block(steps[i : i + take], 1, depth + 1, helper)
                helper.append(f"{_INDENT}return state")
                self.helpers.append(helper)
                out.append(f"{pad}state = await {name}(state)")
            else:
                take = 1
                out.append(f"{pad}state = await {_name(steps[i])}(state)")
                if self.rnd.random() < 0.03 and indent > 1:
                    out.append(f'{pad}if state["value"] == {self.rnd.randint(0, 10006)}:')
                    out.append(f'{pad}{_INDENT}return {{"value": state["value"], "early": True}}')
            i += take

    def _decision(self, steps: list[int], indent: int, depth: int, out: list[str]) -> None:
        pad = _INDENT * indent
        first = self.rnd.randint(1, len(steps) - 2)
        second = self.rnd.randint(first + 1, len(steps) - 1)
        out.append(f'{pad}if state["value"] % {self.rnd.randint(2, 9)} == 0:')
        self.block(steps[:first], indent + 1, depth + 1, out)
        out.append(f'{pad}elif state["value"] > {self.rnd.randint(1000, 9000)}:')
        self.block(steps[first:second], indent + 1, depth + 1, out)
        out.append(f"{pad}else:")
        self.block(steps[second:], indent + 1, depth + 1, out)
