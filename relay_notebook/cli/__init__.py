"""The ``relay`` command line: the same commands as the ``%relay`` magics, for terminals and CI.

Owns the entry (``entry.main``, the ``relay`` script and ``python -m relay_notebook.cli``), the
parser (``parser``: every command's words, shared with the magics so the two never drift) and
the rendering of each command's result as terminal lines or JSON (``rendering``).

May import: ``commands`` and ``views``; the exceptions are listed with their reasons in the
layers contract of ``pyproject.toml``.
"""

from relay_notebook._lazy import TYPE_CHECKING, lazy_attributes

if TYPE_CHECKING:
    from relay_notebook.cli.entry import main

__all__ = ["main"]

# the entry loads on first use: the magics import the parser without the command line's imports
__getattr__, __dir__ = lazy_attributes(__name__, {"main": "relay_notebook.cli.entry"})
