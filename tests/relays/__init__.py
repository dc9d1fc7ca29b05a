"""The relays the tests run, one source file each, and the one way tests read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RELAYS = Path(__file__).parent


def relay_path(name: str) -> Path:
    """The file of the test relay ``name`` (for commands that take a path)."""
    path = RELAYS / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no test relay {name!r}: expected {path}")
    return path


def relay_source(name: str) -> str:
    """The source of the test relay ``name``, exactly as its file holds it."""
    return relay_path(name).read_text(encoding="utf-8")


def relay_script(name: str) -> dict[str, Any]:
    """The scripted model replies (``<name>.json``) that go with the test relay ``name``."""
    script: dict[str, Any] = json.loads((RELAYS / f"{name}.json").read_text(encoding="utf-8"))
    return script


def steps(*names: str) -> str:
    """The source of async ``@DBOS.step()`` functions ``names``, each returning its one argument
    ``x`` as it is, one blank line after each: the steps of a relay under test whose calls
    matter, not what they do."""
    return "".join(f"@DBOS.step()\nasync def {name}(x):\n    return x\n\n" for name in names)
