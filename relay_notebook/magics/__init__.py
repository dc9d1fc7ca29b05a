"""IPython boundary: the ``%%relay`` and ``%relay`` magics (thin: parse, call, display)."""

from relay_notebook.magics.relay import RelayMagics

__all__ = ["RelayMagics"]
