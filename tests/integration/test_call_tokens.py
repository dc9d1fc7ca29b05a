"""Each model call's tokens and cost in the run view's node details (``calls[].tokens``).

The run is the OpenAI Agents SDK relay of ``test_openai_agents_relays`` (``DBOSRunner``, an
offline model reporting 40 + 8 and 61 + 12 tokens, priced 2.0 / 8.0 USD per million by the
workspace's ``prices.yaml``). What a person reads on the agent node is checked against the
ledger's ``model_call`` events (what the framework reported) and DBOS's step rows.
"""

from __future__ import annotations

import pytest

from relay_notebook import commands
from relay_notebook.history import overlay_run
from relay_notebook.runner.fork import ForkRequest
from relay_notebook.runner.runs import start_fork
from relay_notebook.workspace import Workspace
from tests.integration.framework_runs import crashed_and_recovered, go, model_calls

pytest.importorskip("dbos_openai_agents")

from tests.integration.test_openai_agents_relays import MODEL_STEP, save


def _node_calls(ws: Workspace, run_id: str) -> list[tuple[str, str | None]]:
    """(step, tokens) of each call on the run view's nodes, in call order."""
    graph = overlay_run(commands.run_flow(ws, run_id).graph, commands.logs(ws, run_id))
    rows = [c for n in graph.nodes for c in n.details.get("calls", [])]
    return [(c["name"], c.get("tokens")) for c in sorted(rows, key=lambda c: c["function_id"])]


def _reported(ws: Workspace, run_id: str) -> list[tuple[int, int]]:
    """(input, output) tokens of each model request as the framework reported them."""
    return [(e["input_tokens"], e["output_tokens"]) for e in model_calls(ws, run_id)]


def test_a_recovered_runs_model_calls_say_what_they_paid_and_did_not(
    workspace: Workspace,
) -> None:
    """Crashed in the tool call and recovered: the first request says it was not paid again
    in attempt 2, the second says what it paid; the tool call has no tokens."""
    save(workspace)
    first, out = crashed_and_recovered(workspace, "during:lookup")
    assert out.status == "succeeded", out.error
    assert _reported(workspace, first.run_id) == [(40, 8), (61, 12)]
    assert _node_calls(workspace, first.run_id) == [
        (
            MODEL_STEP,
            "offline-gpt · 40 in + 8 out tokens, 0.000144 USD; not paid again in attempt 2",
        ),
        ("lookup", None),
        (MODEL_STEP, "offline-gpt · 61 in + 12 out tokens, 0.000218 USD"),
    ]


def test_a_model_call_cut_off_before_its_checkpoint_says_it_was_paid_twice(
    workspace: Workspace,
) -> None:
    """Killed inside the second request, after the model answered: it ran in both attempts."""
    save(workspace)
    first, _ = crashed_and_recovered(workspace, f"during:{MODEL_STEP}#2")
    assert _reported(workspace, first.run_id) == [(40, 8), (61, 12), (61, 12)]
    calls = _node_calls(workspace, first.run_id)
    assert calls[2] == (MODEL_STEP, "offline-gpt · 61 in + 12 out tokens, 0.000218 USD; paid 2×")


def test_a_forks_copied_model_calls_say_they_were_not_paid(workspace: Workspace) -> None:
    """A fork from the tool call: the copied request was paid by the parent, not the fork."""
    save(workspace)
    parent = go(workspace)
    assert parent.status == "succeeded", parent.error
    fork = start_fork(workspace, parent.run_id, ForkRequest("lookup#1")).wait(180)
    assert fork.status == "succeeded", fork.error
    calls = _node_calls(workspace, fork.run_id)
    assert calls[0] == (
        MODEL_STEP,
        f"offline-gpt · 40 in + 8 out tokens, 0.000144 USD; copied from {parent.run_id}, not paid",
    )
    assert calls[2] == (MODEL_STEP, "offline-gpt · 61 in + 12 out tokens, 0.000218 USD")
