"""A tutorial's relays and runs are listed by the REST API behind the side panel.

A copy of tutorial 02 runs in a real kernel in a notebook folder under a Jupyter server's root;
the panel asks that kernel for its workspace and lists it with ``?workspace=``. Ground truth:
what the commands read from the tutorial's workspace folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nbformat
import pytest
from nbclient import NotebookClient

from relay_notebook import commands
from relay_notebook.workspace import Workspace
from tests.integration.test_rest_api import Server, start_server, stop_server

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = "02-crash-and-recover.ipynb"
#: what the side panel asks the kernel (the view comm's "workspace" action answers this)
KERNEL_HOME = "print(get_ipython().magics_manager.registry['RelayMagics'].workspace.home, end='')"


def run_tutorial(folder: Path) -> Path:
    """Execute the tutorial in ``folder`` as Jupyter does (the kernel starts there); the
    workspace its kernel uses."""
    nb = nbformat.read(folder / TUTORIAL, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(KERNEL_HOME))
    NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(folder)}}).execute()
    return Path(nb.cells[-1].outputs[0]["text"])


def listing(server: Server, home: Path) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """What the panel shows of ``home``: the workspace line, the relays and their runs."""
    query = f"?workspace={quote(str(home), safe='')}"
    info = server.call("GET", "/workspace", query=query).body
    relays = [r["name"] for r in server.call("GET", "/relays", query=query).body]
    runs = server.call("GET", "/runs", query=query).body
    return info, relays, runs


@pytest.mark.notebook
def test_the_panel_lists_a_tutorials_relays_and_runs_afresh(tmp_path: Path) -> None:
    """The tutorial's kernel keeps its relays in ``.relay-tutorial-02`` beside the notebook,
    under the server's root: the API lists its relay and every run as the workspace records
    them, while the server's own workspace is empty (so the panel shows the tutorial's at
    once); running the tutorial again starts that workspace afresh, and the listing follows."""
    root = tmp_path / "root"
    folder = root / "notebooks"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / TUTORIAL, folder / TUTORIAL)
    home = run_tutorial(folder)
    assert home == folder.resolve() / ".relay-tutorial-02"
    server = start_server(root)
    try:
        own = server.call("GET", "/workspace").body
        assert own["default"] and own["relays"] == 0
        info, relays, runs = listing(server, home)
        assert info == {
            "home": str(home),
            "label": "notebooks/.relay-tutorial-02",
            "default": False,
            "relays": 1,
        }
        workspace = Workspace(home)
        assert relays == [r.name for r in commands.relays(workspace)] == ["orders"]
        recorded = {(r.run_id, r.status, r.attempts) for r in commands.runs(workspace)}
        assert {(r["run_id"], r["status"], r["attempts"]) for r in runs} == recorded
        assert len(runs) >= 2 and any(r["attempts"] > 1 for r in runs)  # crashed, recovered
        first = {r["run_id"]: r["created_at"] for r in runs}

        run_tutorial(folder)  # again, while the server serves the workspace
        _, relays, runs = listing(server, home)
        assert relays == ["orders"]
        again = {(r.run_id, r.status, r.attempts) for r in commands.runs(Workspace(home))}
        assert {(r["run_id"], r["status"], r["attempts"]) for r in runs} == again == recorded
        assert all(r["created_at"] > first[r["run_id"]] for r in runs)  # new runs, not kept
    finally:
        stop_server(server)
