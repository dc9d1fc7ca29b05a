"""The house's shape in numbers: what issue #27 measures before and after a redesign.

Run it from the checkout: `python tools/house_stats.py`. It reads the package's sources as text
(no import), so it works on a broken tree too. It prints:

- top-level modules: `.py` files directly in `relay_notebook/` (the face and the error registry
  should be all that is left there);
- floors: the longest chain of module-level imports between the package's modules, counted after
  folding each cycle into one node; and the same between its parts (each top-level module or
  subpackage one node: a clean stack of eight layers has about eight floors);
- cycles: groups of modules that import each other, function-local imports included (a local
  import that dodges a cycle is still a cycle);
- `Any`: how often the word stands in the package, and `dict[str, Any]` in history, views and
  the server (the read side);
- the functions with more than eight parameters, by layer.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "relay_notebook"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, name: str, known: set[str], *, local: bool) -> set[str]:
    """The package's modules that `path` imports (at module level, or anywhere with `local`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = ast.walk(tree) if local else iter(_module_level(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """Statements run on import: the body, and the bodies of its if/try blocks."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                stack.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                stack.extend(handler.body)
    return out


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                item = stack.pop()
                on_stack.discard(item)
                group.add(item)
                if item == node:
                    break
            groups.append(group)

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def floors(graph: dict[str, set[str]]) -> int:
    groups = strongly_connected(graph)
    group_of = {m: i for i, g in enumerate(groups) for m in g}
    edges: dict[int, set[int]] = defaultdict(set)
    for src, targets in graph.items():
        for dst in targets:
            if group_of[src] != group_of[dst]:
                edges[group_of[src]].add(group_of[dst])
    depth: dict[int, int] = {}

    def height(group: int) -> int:
        if group not in depth:
            depth[group] = 1 + max((height(n) for n in edges[group]), default=0)
        return depth[group]

    return max(height(i) for i in range(len(groups)))


def units(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between the package's parts: each top-level module or subpackage."""

    def unit(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = defaultdict(set)
    for src, targets in graph.items():
        out[unit(src)]
        for dst in targets:
            if unit(dst) != unit(src):
                out[unit(src)].add(unit(dst))
    for targets in list(out.values()):
        for dst in targets:
            out[dst]
    return out


def wide_functions(found: dict[str, Path], limit: int = 8) -> dict[str, list[str]]:
    wide: dict[str, list[str]] = defaultdict(list)
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
                params = [p for p in params if p.arg not in ("self", "cls")]
                if len(params) > limit:
                    layer = name.split(".")[1] if name.count(".") else "(top)"
                    wide[layer].append(f"{name}.{node.name} ({len(params)})")
    return wide


def main() -> None:
    found = modules()
    known = set(found)
    top = [n for n, p in found.items() if p.parent == PACKAGE and p.name != "__init__.py"]
    static = {n: imports(p, n, known, local=False) for n, p in found.items()}
    every = {n: imports(p, n, known, local=True) for n, p in found.items()}
    cycles = [sorted(g) for g in strongly_connected(every) if len(g) > 1]
    text = {n: p.read_text(encoding="utf-8") for n, p in found.items()}
    any_count = sum(len(re.findall(r"\bAny\b", t)) for t in text.values())
    read_side = ("relay_notebook.history", "relay_notebook.views", "relay_notebook.server")
    dict_any = sum(t.count("dict[str, Any]") for n, t in text.items() if n.startswith(read_side))
    print(f"top-level modules: {len(top)} ({', '.join(sorted(m.split('.')[1] for m in top))})")
    print(f"floors (module-level imports, cycles folded): {floors(static)}")
    print(
        "floors between the package's parts (top-level modules and packages): "
        f"{floors(units(static))}; with function-local imports: {floors(units(every))}"
    )
    print(f"cycles (function-local imports included): {len(cycles)}")
    for group in cycles:
        print(f"  {' <-> '.join(group)}")
    print(f"Any in the package: {any_count}")
    print(f"dict[str, Any] in history, views and server: {dict_any}")
    wide = wide_functions(found)
    print(f"functions over 8 parameters: {sum(len(v) for v in wide.values())}")
    for layer, names in sorted(wide.items()):
        print(f"  {layer}: {', '.join(sorted(names))}")


if __name__ == "__main__":
    main()
