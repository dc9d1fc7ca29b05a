"""Files the browser tests put where JupyterLab serves them."""

from __future__ import annotations

from pathlib import Path

import nbformat

__all__ = ["write_notebook"]


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook of code ``cells`` (unexecuted) on the ipykernel kernel, at ``path``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nbformat.write(nb, path)
