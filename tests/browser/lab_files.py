"""Files the browser tests put where JupyterLab serves them, and notebooks opened from there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat

__all__ = [
    "notebook_run",
    "open_notebook",
    "open_panel",
    "reopen_notebook",
    "run_all",
    "run_view",
    "write_notebook",
]

ARTIFACTS = Path(__file__).parent / "artifacts"


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


def open_notebook(context: Any, lab: Any, name: str, *, kernel_idle: bool = True) -> Any:
    """A new page of ``context`` showing notebook ``name`` in ``lab``, once its cells show and
    (with ``kernel_idle``) its kernel is idle."""
    page = context.new_page()
    page.goto(lab.lab_url(name))
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    if kernel_idle:
        page.wait_for_function(
            "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel"
            "?.status === 'idle'"
        )
    return page


def reopen_notebook(context: Any, lab: Any, name: str, *, kernel_idle: bool = True) -> Any:
    """Notebook ``name`` opened again on a new page after every kernel session of ``lab`` is
    shut down, so that it starts on a new kernel."""
    for session in lab.api("GET", "api/sessions"):
        lab.api("DELETE", f"api/sessions/{session['id']}")
    return open_notebook(context, lab, name, kernel_idle=kernel_idle)


def run_view(page: Any, cell: int) -> Any:
    """The run view (graph output with a header) in notebook cell ``cell`` (0-based)."""
    return page.locator(".jp-Notebook .jp-Cell").nth(cell).locator(".jp-RelayGraphOutput").first


def run_all(page: Any) -> None:
    """Start every cell of the notebook ``page`` shows (run all), without waiting for them."""
    # don't return the command's promise: it settles only when every cell has run
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def open_panel(context: Any, lab: Any, relay: str) -> tuple[Any, Any]:
    """A new page of ``context`` showing ``lab`` (its layout reset) with the Relays panel open on
    ``relay``: the page and the panel."""
    page = context.new_page()
    page.goto(f"{lab.url}lab?token={lab.token}&reset")
    page.locator('.jp-SideBar .lm-TabBar-tab[data-id="relay-panel"]').click()
    panel = page.locator("#relay-panel")
    panel.locator(f'li[data-relay="{relay}"]').click()
    return page, panel


@contextlib.contextmanager
def notebook_run(context: Any, lab: Any, name: str, cells: list[str], until: str) -> Iterator[Any]:
    """Notebook ``name`` of ``cells`` written into ``lab``, opened and run all: its page once
    ``until`` shows (else a full screenshot, ``artifacts/NAME_setup_failed.png``), closed on
    leaving."""
    write_notebook(lab.root / name, cells)
    page = open_notebook(context, lab, name)
    run_all(page)
    try:
        page.wait_for_selector(until, timeout=120_000)
    except Exception:
        failed = ARTIFACTS / f"{Path(name).stem}_setup_failed.png"
        page.screenshot(path=str(failed), full_page=True)
        raise
    try:
        yield page
    finally:
        page.close()
