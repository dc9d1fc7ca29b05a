"""The extension's drawing code and views/svg.py paint the same picture of the same graph.

Both are rasterized by the same headless Chromium: the Python SVG as an image, and the SVG that
``drawGraph`` (extension/lib/draw.js, the module the MIME renderer and the side panel share)
builds in the page. A saved notebook viewed with and without the extension looks the same.
"""

from __future__ import annotations

import functools
import http.server
import itertools
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import Edge, FlowGraph, Node
from relay_notebook.source.layout import layout_graph
from relay_notebook.views.svg import render_svg

REPO = Path(__file__).parents[2]
ARTIFACTS = Path(__file__).parent / "artifacts"
EXTENSION = REPO / "extension"
JLPM = shutil.which("jlpm", path=str(Path(sys.executable).parent)) or shutil.which("jlpm")

COMPARE = """async graphs => {
  const {drawGraph} = await import('/lib/draw.js');
  const load = src => new Promise((ok, bad) => {
    const im = new Image();
    im.onload = () => ok(im);
    im.onerror = () => bad(new Error('cannot load an SVG as an image'));
    im.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(src);
  });
  const pixels = async (src, w, h) => {
    const canvas = document.createElement('canvas');
    canvas.width = w;
    canvas.height = h;
    const ctx = canvas.getContext('2d');
    ctx.drawImage(await load(src), 0, 0);
    return ctx.getImageData(0, 0, w, h).data;
  };
  const out = {};
  for (const [name, {doc, svg}] of Object.entries(graphs)) {
    const drawn = drawGraph(doc);
    const mine = new XMLSerializer().serializeToString(drawn.svg);
    const w = drawn.width, h = drawn.height;
    const a = await pixels(svg, w, h), b = await pixels(mine, w, h);
    let differ = 0, inked = 0;
    for (let i = 0; i < a.length; i += 4) {
      let d = 0;
      for (let c = 0; c < 3; c++) d += Math.abs(a[i + c] - b[i + c]);
      if (d > 60) differ++;
      if (a[i] + a[i + 1] + a[i + 2] < 600) inked++;
    }
    out[name] = {pixels: w * h, differ, inked, nodes: drawn.nodes.size};
  }
  return out;
}"""


def _every_kind() -> FlowGraph:
    """One node of each type and each run status, with a reused badge and labelled edges."""
    kinds = [
        ("input", "input", None),
        ("step", "fetch_orders", "succeeded"),
        ("workflow", "child_flow", "reused"),
        ("agent", "triage", "running"),
        ("mcp", "orders.lookup", "failed"),
        ("tool", "compute_total", "pending"),
        ("vault", "API_KEY", "skipped"),
        ("admit", "admit refund", "not_reached"),
        ("decision", 'total > INPUT["limit"]', None),
        ("loop", "for order in orders", None),
        ("parallel", "gather", None),
        ("try", "try", None),
        ("unresolved", "helpers.dispatch()", None),
        ("script", "legacy script", None),
        ("wait", "wait for approval", "waiting"),
        ("output", "output", None),
    ]
    nodes = []
    for i, (kind, label, status) in enumerate(kinds):
        details: dict[str, Any] = {"status": status} if status else {}
        if status == "reused" or kind == "step":
            details["reused"] = True
        nodes.append(Node(f"n{i}", kind, label, line=i + 1, details=details))
    # a datasource transaction: a step whose caption says TRANSACTION
    nodes.insert(2, Node("tx", "step", "greet", line=40, details={"transaction": "ds"}))
    edges = [Edge(a.id, b.id) for a, b in itertools.pairwise(nodes)]
    edges.append(Edge("n8", "n14", "else"))
    edges.append(Edge("n9", "n9"))
    edges.append(Edge("n11", "n9", "retry the loop"))
    return layout_graph(FlowGraph(nodes=nodes, edges=edges, relay="every-kind"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output clean: requests are not news."""


@pytest.fixture(scope="module")
def served_lib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """extension/lib, freshly compiled, served over loopback HTTP (ES modules need http)."""
    if JLPM is None or not (EXTENSION / "node_modules").is_dir():
        pytest.skip("the extension's node_modules are missing: run 'make setup'")
    done = subprocess.run(
        [JLPM, "build:lib"], cwd=EXTENSION, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    root = tmp_path_factory.mktemp("served")
    shutil.copytree(EXTENSION / "lib", root / "lib")
    (root / "index.html").write_text("<!doctype html><html><body></body></html>")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


def test_extension_draws_what_the_python_svg_draws(browser_context: Any, served_lib: str) -> None:
    """Flow graphs and a graph with every node type and status rasterize to the same pixels."""
    source = (REPO / "tests" / "relays" / "invoice.py").read_text(encoding="utf-8")
    graphs = {
        "invoice": layout_graph(build_flow_graph(source, relay="invoice")),
        "every-kind": _every_kind(),
    }
    payload = {
        name: {"doc": graph.to_dict(), "svg": render_svg(graph)} for name, graph in graphs.items()
    }
    page = browser_context.new_page()
    page.goto(served_lib + "index.html")
    result = page.evaluate(COMPARE, payload)
    page.evaluate(
        """async doc => {
          const {drawGraph} = await import('/lib/draw.js');
          document.body.appendChild(drawGraph(doc).svg);
        }""",
        payload["every-kind"]["doc"],
    )
    page.locator("svg.relay-graph").screenshot(path=str(ARTIFACTS / "every_node_kind.png"))
    page.close()
    print("\n" + json.dumps(result, indent=1))
    for name, graph in graphs.items():
        seen = result[name]
        assert seen["nodes"] == len(graph.nodes)
        assert seen["inked"] > seen["pixels"] // 100, f"{name}: the Python SVG drew almost nothing"
        assert seen["differ"] <= seen["pixels"] // 1000, f"{name}: {seen}"
