"""``%relay runs`` on a real shell lists each run's model-call tokens and cost as ``relay runs``
does, in a column shown only when some run made model calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from IPython.utils.capture import capture_output

from relay_notebook.views.mime import RunsView
from relay_notebook.workspace import Workspace
from tests.integration.test_openai_agents_relays import save  # skips without the SDK
from tests.magics.relay_magic import magic

PLAIN = """\
from dbos import DBOS


@DBOS.workflow()
async def run(INPUT):
    return {"echo": INPUT}
"""
#: what the OpenAI Agents relay's two model calls paid (40+8 and 61+12 tokens at 2 and 8 USD
#: per million), and what the recovery did not pay (the first request, reused)
SHOP_COST = "tokens 101+20 cost 0.000362 USD (not paid: 48 tokens, 0.000144 USD)"


def cli_runs(home: Path, relay: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "relay_notebook.cli", "--home", str(home), "runs", relay],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def test_the_runs_table_shows_what_model_calls_paid_as_the_cli_does(ip: Any) -> None:
    """Without model calls there is no cost column; after an agent run crashed in its tool
    call and recovered, its row says the tokens and cost paid and not paid, as `relay runs`
    prints them, and the plain run's cell is empty."""
    home = Path(os.environ["RELAY_HOME"])
    magic(ip, "echo --no-graph", PLAIN)
    with capture_output():
        ip.run_line_magic("relay", "run echo --input '{\"a\": 1}' --wait")
    plain = ip.run_line_magic("relay", "runs echo")
    assert isinstance(plain, RunsView)
    assert "tokens" not in plain.text() and "model calls" not in plain.html()
    assert plain.text().split()[:2] == ["echo-1", "succeeded"]

    save(Workspace(home))  # the relay, its SHOP_TOKEN and the workspace's prices.yaml
    with capture_output():
        ip.run_line_magic(
            "relay", 'run shop --input \'{"prompt": "Find A-1"}\' --crash during:lookup --wait'
        )
        ip.run_line_magic("relay", "recover shop-1 --wait")
    table = ip.run_line_magic("relay", "runs")
    assert isinstance(table, RunsView)
    lines = dict(line.split(maxsplit=1) for line in table.text().splitlines())
    assert lines["shop-1"].endswith(f"reused 1  {SHOP_COST}"), lines
    assert "tokens" not in lines["echo-1"]
    [cli_line] = cli_runs(home, "shop").splitlines()
    assert cli_line.startswith("shop-1") and cli_line.endswith(f"  {SHOP_COST}")
    page = table.html()
    assert "<th>duration</th><th>model calls</th></tr>" in page
    assert page.count("<tr><td") == 2 and f"<td>{SHOP_COST}</td></tr>" in page
    assert page.count("<td></td></tr>") == 1  # echo-1: no model calls, an empty cell
    bundle = table._repr_mimebundle_()
    assert bundle["text/plain"] == table.text() and bundle["text/html"] == page
