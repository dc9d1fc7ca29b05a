"""Diagnostics: one problem found in a relay's source, with its line and stable code (the static
analysis reports them; an ``AdmissionError`` carries them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]

__all__ = ["Diagnostic", "Severity"]


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem: where (1-based ``line``, 0-based ``col``), what to change, and a stable code.

    ``message`` is a full sentence in the user's terms that ends with what to do next.
    ``file`` names the source file within the relay (``relay.py`` for the entrypoint).
    """

    line: int
    col: int
    code: str
    message: str
    severity: Severity = "error"
    file: str = "relay.py"

    def format(self, line_offset: int = 0) -> str:
        """One line: ``relay.py:12:4: error: <message> [code]``; ``line_offset`` shifts lines."""
        return (
            f"{self.file}:{self.line + line_offset}:{self.col}: {self.severity}: "
            f"{self.message} [{self.code}]"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping with every field."""
        return asdict(self)
