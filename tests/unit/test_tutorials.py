"""The tutorials open as Jupyter saves them and keep their relays where the panel sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.layout import layout_graph
from tests.relays import relay_source

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_tutorial_has_the_kernelspec_jupyter_writes(path: Path) -> None:
    """Each tutorial names the ipykernel kernelspec exactly, so opening it marks nothing
    modified."""
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"] == {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_tutorial_keeps_its_relays_beside_it_made_afresh(path: Path) -> None:
    """A tutorial's first code cell points RELAY_HOME at its own hidden folder beside it
    (under the Jupyter server's root, so the side panel can show it), emptied first."""
    nb = nbformat.read(path, as_version=4)
    first = next(c.source for c in nb.cells if c.cell_type == "code")
    home = f".relay-tutorial-{path.name[:2]}"
    assert f'os.environ["RELAY_HOME"] = os.path.abspath("{home}")' in first
    assert 'shutil.rmtree(os.environ["RELAY_HOME"], ignore_errors=True)' in first
    assert first.index("RELAY_HOME") < first.index("%load_ext relay_notebook")
    assert "tempfile" not in first


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


def test_graph_documents_write_whole_numbers_as_integers() -> None:
    """Laid-out coordinates that are whole numbers are ints, so JupyterLab saving 68.0 as 68
    does not change a stored output."""
    graph = layout_graph(build_flow_graph(relay_source("order"), relay="order"))
    doc = json.loads(json.dumps(graph.to_dict()))
    assert doc["layout"]["width"] > 0
    assert [f for f in _floats(doc) if f.is_integer()] == []
