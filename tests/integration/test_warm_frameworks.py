"""The warm parent imports the agent frameworks a relay imports, once, before forking its attempt.

A relay that imports Pydantic AI or the OpenAI Agents SDK paid their import (about 2.5 s of CPU)
in every attempt, since the warm parent loads DBOS but not them. Asked for an attempt of such a
relay, the parent imports the framework first (``runner.warm.frameworks_to_preload``); that
attempt and the later ones fork with it loaded. The relays here look at ``sys.modules`` before
their own imports, so what the attempt inherited is read off the run's result; the parent is
checked to hold no thread (a fork after a thread started would copy a lock mid-use).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relay_notebook import commands
from relay_notebook.runner.warm import frameworks_to_preload, restart_warm_parent
from relay_notebook.workspace import Manifest, Workspace

pytest.importorskip("pydantic_ai")
pytest.importorskip("dbos_openai_agents")

LOOK = """\
import sys

SEEN = sorted(m for m in ("pydantic_ai", "agents", "dbos_openai_agents") if m in sys.modules)
{imports}
from dbos import DBOS


@DBOS.workflow()
async def run(INPUT):
    return {{"inherited": SEEN}}
"""


def _inherited(ws: Workspace, name: str, imports: str) -> list[str]:
    ws.save_draft(name, LOOK.format(imports=imports), Manifest())
    out = commands.run(ws, name, run_input={}).wait(180)
    assert out.status == "succeeded", out.error
    return list(out.result["inherited"])


def test_an_attempt_forks_with_the_frameworks_its_relay_imports(
    workspace: Workspace, warm_start: bool
) -> None:
    """A fresh parent: a relay without a framework inherits none; a Pydantic AI relay's first
    attempt already inherits Pydantic AI; an Agents SDK relay then inherits both. The parent
    holds one thread throughout."""
    if not warm_start:
        pytest.skip("warm start is off (RELAY_WARM_START=0): every attempt is spawned")
    restart_warm_parent().kill()  # this process's parent may have preloaded for another test
    parent = restart_warm_parent()
    assert parent.wait_ready(120), "the warm parent did not start"
    assert _inherited(workspace, "plain", "import json") == []
    assert _inherited(workspace, "pyd", "from pydantic_ai import Agent") == ["pydantic_ai"]
    both = _inherited(workspace, "oai", "from dbos_openai_agents import DBOSRunner")
    assert both == ["agents", "pydantic_ai"]  # not the DBOS integration: see the next test
    threads = os.listdir(f"/proc/{parent.pid}/task")
    assert len(threads) == 1, f"the warm parent started threads: {threads}"


def test_only_the_frameworks_a_relay_imports_are_asked_for(tmp_path: Path) -> None:
    """Imports at any indentation, in the relay's helper files too; a mention in a string or
    comment that is not an import line asks for nothing; other modules never."""
    (tmp_path / "relay.py").write_text(
        "import os\nif True:\n    from pydantic_ai import Agent\n# import agents, maybe later\n"
    )
    (tmp_path / "helpers.py").write_text("from dbos_openai_agents import DBOSRunner\n")
    assert frameworks_to_preload(tmp_path) == ["agents", "pydantic_ai"]
    (tmp_path / "helpers.py").write_text("import subprocess\nTEXT = 'import agents'\n")
    assert frameworks_to_preload(tmp_path) == ["pydantic_ai"]


def test_no_preloaded_module_applies_dbos_decorators_as_it_is_imported() -> None:
    """A module the parent preloads must not call ``DBOS.step``/``workflow`` at import: those
    calls would miss the attempt's instrumentation (the Agents SDK's model-call step would be
    recorded as a plain step, without its receipt). Checked in a fresh interpreter with DBOS's
    decorators replaced by ones that note each use."""
    import subprocess
    import sys

    from relay_notebook.runner.warm_launch import FRAMEWORK_MODULES

    modules = sorted({m for names in FRAMEWORK_MODULES.values() for m in names})
    probe = (
        "import importlib, sys\n"
        "from dbos import DBOS\n"
        "used = []\n"
        "for name in ('step', 'workflow', 'dbos_class'):\n"
        "    real = getattr(DBOS, name)\n"
        "    def noted(*a, _name=name, _real=real, **k):\n"
        "        used.append(_name)\n"
        "        return _real(*a, **k)\n"
        "    setattr(DBOS, name, staticmethod(noted))\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print(used)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"{modules} applied DBOS decorators: {out.stdout}"
