"""Benchmark: the flow graph against the ``ast.parse`` floor, and the layout, on a generated relay.

Run ``python benchmarks/bench_analysis.py [--steps 200] [--repeats 21]``. Measurements are
interleaved (parse, build, layout in each round) so machine noise hits them alike; the table
reports best and median of the rounds, the ratio to ``ast.parse`` and the targets (flow graph
at most 2x the parse, layout at most 50 ms). Benchmarks report, they do not assert: the exit
status is 0 whatever the numbers.

``--lines 100000`` adds the analysis at scale, side by side in one run: ``ast.parse`` of a
generated source of that many lines against ``relay check`` (``check_draft``) and ``relay
graph`` (``graph_of_draft``: flow graph and layout), in time (interleaved rounds) and in peak
memory (``tracemalloc``, a pass of its own), each against the targets (5x the parse's time, 5x
the AST's memory); then a listing (``relay relays``) with that draft in the workspace, cold
(nothing cached) and cached, against the 0.5 s target.
"""

from __future__ import annotations

import argparse
import ast
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
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
#: relay check and relay graph of a huge source, in time and memory, against ast.parse's
SCALE_RATIO_TARGET = 5.0
#: a listing with such a draft present, its analysis cached
LISTING_TARGET_S = 0.5


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
    parser.add_argument(
        "--lines", type=int, default=0, help="also measure a source of this many lines (100000)"
    )
    parser.add_argument("--scale-repeats", type=int, default=3, help="timed rounds at scale")
    args = parser.parse_args(argv)
    if args.lines:
        return _at_scale(args.lines, args.seed, args.scale_repeats)

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


def _steps_for(lines: int, seed: int) -> int:
    """Steps that make a generated relay of about ``lines`` lines (10.7 lines a step)."""
    steps = max(1, round(lines / 10.7))
    for _ in range(8):
        got = len(generate_relay(steps, seed=seed).splitlines())
        if abs(got - lines) <= lines // 100:
            break
        steps = max(1, round(steps * lines / got))
    return steps


def _peak_mb(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / 2**20, result


def _ast_mb(text: str) -> tuple[float, float]:
    """``ast.parse``'s peak, and what the parsed tree alone holds, in MiB."""
    gc.collect()
    tracemalloc.start()
    try:
        tree = ast.parse(text)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del tree
    return peak / 2**20, held / 2**20


def _parse_paused(text: str) -> ast.Module:
    gc.disable()
    try:
        return ast.parse(text)
    finally:
        gc.enable()


def _at_scale(lines: int, seed: int, repeats: int) -> int:
    """The scale rows: check and graph of a huge source against ast.parse; a listing."""
    from relay_notebook import commands
    from relay_notebook.workspace import Workspace

    text = generate_relay(_steps_for(lines, seed), seed=seed)
    count = len(text.splitlines())
    with tempfile.TemporaryDirectory() as home:
        workspace = Workspace(home)
        draft = workspace.save_draft("huge", text)
        cases: dict[str, Callable[[], object]] = {
            "ast.parse(text)": lambda: ast.parse(text),
            "relay check (check_draft)": lambda: commands.check_draft(draft),
            "relay graph (graph_of_draft)": lambda: commands.graph_of_draft(draft),
            "ast.parse, collector paused": lambda: _parse_paused(text),
        }
        runs: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):
            for name, fn in cases.items():
                runs[name].append(_timed(fn) / 1000)
        parse_peak, ast_held = _ast_mb(text)
        peaks = {name: _peak_mb(fn)[0] for name, fn in list(cases.items())[1:3]}
        graph = commands.graph_of_draft(draft)
        cold = _timed(lambda: commands.relays(workspace)) / 1000
        cached = [_timed(lambda: commands.relays(workspace)) / 1000 for _ in range(5)]

    floor = statistics.median(runs["ast.parse(text)"])
    print(
        f"relay at scale: {count:,} lines, {len(text) / 1e6:.1f} MB (seed {seed}); flow graph "
        f"{len(graph.nodes):,} nodes, {len(graph.edges):,} edges; {repeats} interleaved rounds, "
        f"Python {sys.version.split()[0]}"
    )
    print()
    print(f"{'operation':<30} {'median s':>9} {'x parse':>8} {'peak MiB':>9} {'x AST':>7}  target")
    print("-" * 92)
    print(
        f"{'ast.parse(text)':<30} {floor:>9.2f} {1:>7.2f}x {parse_peak:>9.1f} "
        f"{parse_peak / ast_held:>6.2f}x  (the AST holds {ast_held:.1f} MiB)"
    )
    for name in list(cases)[1:3]:
        seconds = statistics.median(runs[name])
        ratio, memory = seconds / floor, peaks[name] / ast_held
        met = ratio <= SCALE_RATIO_TARGET and memory <= SCALE_RATIO_TARGET
        print(
            f"{name:<30} {seconds:>9.2f} {ratio:>7.2f}x {peaks[name]:>9.1f} {memory:>6.2f}x  "
            f"<= {SCALE_RATIO_TARGET:g}x parse and AST: {'met' if met else 'MISSED'}"
        )
    paused = statistics.median(runs["ast.parse, collector paused"])
    print(
        f"{'ast.parse, collector paused':<30} {paused:>9.2f} {paused / floor:>7.2f}x {'':>9} "
        f"{'':>7}  (how the analysis parses: an AST has no cycles to collect)"
    )
    best = min(cached)
    print(
        f"{'relay relays, cold':<30} {cold:>9.2f} {cold / floor:>7.2f}x {'':>9} {'':>7}  "
        "(analyses the draft once)"
    )
    print(
        f"{'relay relays, cached':<30} {best:>9.3f} {best / floor:>7.2f}x {'':>9} {'':>7}  "
        f"<= {LISTING_TARGET_S:g} s: {'met' if best <= LISTING_TARGET_S else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
