"""Crash injection specs: ``after:STEP[#N]`` and ``during:STEP[#N]``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from relay_notebook.errors import InvalidCrashSpecError

__all__ = ["CRASH_EXIT_CODE", "CrashSpec", "parse_crash_spec"]

#: the child's exit status when it kills itself on purpose
CRASH_EXIT_CODE = 86

# STEP is a step name, or a platform call: agent:NAME, mcp:SERVER.TOOL, step:NAME (ctx.step)
_SPEC = re.compile(
    # an MCP call's name may hold a resource's URI or a prompt's name: mcp:docs.resource:x://y
    r"(?P<when>after|during):(?P<step>mcp:[A-Za-z_][\w.<>:/-]*|(?:(?:agent|step):)?[A-Za-z_]"
    r"[\w.<>-]*)(?:#(?P<n>[0-9]{1,9}))?"
)


@dataclass(frozen=True)
class CrashSpec:
    """Exit the child ``after`` STEP's checkpoint is saved, or ``during`` its body."""

    when: Literal["after", "during"]
    step: str
    occurrence: int = 1

    def __str__(self) -> str:
        suffix = f"#{self.occurrence}" if self.occurrence != 1 else ""
        return f"{self.when}:{self.step}{suffix}"

    def to_dict(self) -> dict[str, Any]:
        return {"when": self.when, "step": self.step, "occurrence": self.occurrence}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrashSpec:
        return cls(data["when"], data["step"], int(data["occurrence"]))


def parse_crash_spec(text: str) -> CrashSpec:
    """Parse ``--crash``; a clear error shows the accepted forms."""
    m = _SPEC.fullmatch(text.strip())
    if not m or (m["n"] is not None and int(m["n"]) < 1):
        shown = ascii(text if len(text) <= 60 else text[:59] + "…")
        raise InvalidCrashSpecError(
            f"Invalid --crash {shown}: expected after:STEP or during:STEP, optionally with #N "
            f"for the N-th call (1 ≤ N < 10⁹), e.g. --crash after:extract_invoice or "
            f"--crash during:charge#2."
        )
    when: Literal["after", "during"] = "after" if m["when"] == "after" else "during"
    return CrashSpec(when, m["step"], int(m["n"] or 1))
