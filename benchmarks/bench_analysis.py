"""Benchmark: the flow graph against the ``ast.parse`` floor, and the layout, on a generated relay.

Run ``python benchmarks/bench_analysis.py [--steps 200] [--repeats 21]``. Measurements are
interleaved (parse, build, layout in each round) so machine noise hits them alike; the table
reports best and median of the rounds, the ratio to ``ast.parse`` and the targets (flow graph
at most 2x the parse, layout at most 50 ms). Benchmarks report, they do not assert: the exit
status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import ast
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from relaygen import generate_relay  # noqa: E402

from relay_notebook.source.flow import build_flow_graph  # noqa: E402
from relay_notebook.source.layout import compute_layout, layout_graph  # noqa: E402
from relay_notebook.views.svg import render_svg  # noqa: E402

PARSE_RATIO_TARGET = 2.0
LAYOUT_TARGET_MS = 50.0


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> int:
    """Print the comparison table; always exit 0."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps in the generated relay")
    parser.add_argument("--seed", type=int, default=0, help="generator seed")
    parser.add_argument("--repeats", type=int, default=21, help="timed rounds")
    args = parser.parse_args(argv)

    text = generate_relay(args.steps, seed=args.seed)
    graph = build_flow_graph(text, relay="generated")
    layout = compute_layout(graph)
    cases: dict[str, Callable[[], object]] = {
        "ast.parse(text)": lambda: ast.parse(text),
        "build_flow_graph(text)": lambda: build_flow_graph(text, relay="generated"),
        "layout_graph(graph)": lambda: layout_graph(graph),
        "render_svg(laid out)": lambda: render_svg(graph),
    }
    for fn in cases.values():
        fn()
    runs: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, fn in cases.items():
            runs[name].append(_timed(fn))

    best = {name: min(ts) for name, ts in runs.items()}
    median = {name: statistics.median(ts) for name, ts in runs.items()}
    floor = median["ast.parse(text)"]
    lines = len(text.splitlines())
    print(
        f"relay: {args.steps} steps, {lines} lines (seed {args.seed}); "
        f"flow graph: {len(graph.nodes)} nodes, {len(graph.edges)} edges, "
        f"{layout.layers} layers, {layout.crossings} crossings; "
        f"{args.repeats} rounds, Python {sys.version.split()[0]}"
    )
    print()
    print(f"{'operation':<24} {'best ms':>9} {'median ms':>10} {'x parse':>8}  target")
    print("-" * 70)
    targets = {
        "build_flow_graph(text)": (median["build_flow_graph(text)"] / floor, PARSE_RATIO_TARGET),
        "layout_graph(graph)": (median["layout_graph(graph)"], LAYOUT_TARGET_MS),
    }
    for name in cases:
        verdict = ""
        if name in targets:
            value, limit = targets[name]
            bound = f"<= {limit:g}x parse" if name.startswith("build") else f"<= {limit:g} ms"
            verdict = f"{bound}: {'met' if value <= limit else 'MISSED'}"
        print(
            f"{name:<24} {best[name]:>9.2f} {median[name]:>10.2f} "
            f"{median[name] / floor:>7.2f}x  {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
