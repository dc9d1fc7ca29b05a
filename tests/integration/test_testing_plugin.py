"""The pytest plugin as a relay author uses it: a separate project in a temporary folder, its
own test file using the fixtures, run by pytest in a subprocess (the installed kit registers the
plugin; nothing of this repository's conftest is loaded there)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

RELAY = textwrap.dedent(
    """
    from dbos import DBOS
    from agentworks import agent


    @DBOS.step()
    def fetch(order_id):
        return {"id": order_id, "total": 42}


    @DBOS.workflow()
    async def run(INPUT):
        order = fetch(INPUT["order_id"])
        summary = await agent(name="clerk", user_message=f"summarise {order}", replay_safe=True)
        return {"order": order, "summary": summary}
    """
)
USER_TESTS = textwrap.dedent(
    """
    from pathlib import Path

    RELAY = Path(__file__).parent / "order_relay.py"
    SCRIPT = {"clerk": [{"content": "order 7: 42"}, {"content": "order 7: 42"}] * 10}


    def test_crash_and_recover(relay_harness):
        relay_harness.save("order", RELAY, script=SCRIPT)
        first = relay_harness.run("order", {"order_id": 7}, crash="after:fetch")
        assert first.status == "interrupted"
        done = relay_harness.recover(first.run_id)
        assert done.status == "succeeded"
        assert done.result == {"order": {"id": 7, "total": 42}, "summary": "order 7: 42"}
        assert done.reused == [1]
        assert relay_harness.executions(first.run_id)["fetch#1"] == 1


    def test_crash_each(relay_harness):
        relay_harness.save("order", RELAY, script=SCRIPT)
        report = relay_harness.crash_each("order", {"order_id": 7})
        assert report.ok, report.differing
        assert [p.point for p in report.points][:2] == ["after:fetch#1", "during:fetch#1"]


    def test_workspace_is_empty(relay_workspace):
        assert not (relay_workspace.home / "order").exists()
    """
)


def test_a_separate_project_uses_the_plugin(tmp_path: Path) -> None:
    project = tmp_path / "my_project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "order_relay.py").write_text(RELAY)
    (project / "tests" / "test_order.py").write_text(USER_TESTS)
    (project / "pyproject.toml").write_text('[project]\nname = "my-project"\nversion = "0"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout
