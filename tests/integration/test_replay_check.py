"""The replay check on real recorded runs: DBOS replays changed code in a sandbox copy."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from relay_notebook import commands
from relay_notebook.cli import main as cli_main
from relay_notebook.runner.replay import replay_check
from relay_notebook.workspace import Workspace
from tests.relays import relay_source

# Each body notes itself in effects.log (the run's execution folder, or the sandbox's cwd).
SHOP = relay_source("noting_shop")
ITEMS = {"items": ["a", "b"]}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """shop-1 succeeded (price, pack, price, pack, ship); shop-2 crashed after pack#1."""
    ws = Workspace(tmp_path_factory.mktemp("replay") / "relays")
    ws.save_draft("shop", SHOP)
    assert commands.run(ws, "shop", run_input=ITEMS).wait(120).status == "succeeded"
    crashed = commands.run(ws, "shop", run_input=ITEMS, crash="after:pack#1").wait(120)
    assert crashed.status == "interrupted"
    return ws


def _check(ws: Workspace, source: str) -> dict[str, object]:
    ws.save_draft("shop", source)
    return {r.run_id: r for r in replay_check(ws, "shop")}


def _fingerprint(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_change_inside_a_step_body_replays(recorded: Workspace) -> None:
    """Bodies are never re-run on replay: a new body is compatible with every history, and
    the interrupted run would go on with pack... past its history (not run here)."""
    found = _check(recorded, SHOP.replace("return 10", "return 11"))
    assert found["shop-1"].verdict == "compatible" and found["shop-1"].outcome == "replayed"
    second = found["shop-2"]
    assert (second.verdict, second.outcome, second.call) == ("compatible", "past-history", "price")
    assert second.recorded == ["price#1", "pack#1"]


def test_a_renamed_step_is_reported_at_its_call_with_a_patch_hint(recorded: Workspace) -> None:
    """Renaming pack: both runs recorded pack#1 where the new code calls wrap (its line and
    node named), with the DBOS.patch way to keep old runs on the old path."""
    source = SHOP.replace("def pack(", "def wrap(").replace(
        "        pack(sku)", "        wrap(sku)"
    )
    found = _check(recorded, source)
    for run_id in ("shop-1", "shop-2"):
        report = found[run_id]
        assert report.verdict == "incompatible" and report.outcome == "diverged"
        assert report.expected == "pack#1" and report.call == "wrap" and report.line == 33
        assert report.node == "step-wrap"
        assert report.message == "recorded pack#1, the new code calls wrap at line 33"
        assert 'DBOS.patch_async("use-wrap")' in (report.hint or "")


def test_reordered_steps_diverge_at_the_first_call(recorded: Workspace) -> None:
    """pack before price: the first recorded call is price#1."""
    source = SHOP.replace(
        "        total += price(sku)\n        pack(sku)",
        "        pack(sku)\n        total += price(sku)",
    )
    found = _check(recorded, source)
    assert found["shop-1"].outcome == "diverged" and found["shop-1"].expected == "price#1"
    assert found["shop-1"].call == "pack" and found["shop-1"].replayed == 0


def test_a_step_inserted_in_the_loop_diverges(recorded: Workspace) -> None:
    """A ship() inside the loop meets the recorded price#2 of the finished run."""
    source = SHOP.replace("        pack(sku)\n", "        pack(sku)\n        ship(0)\n")
    found = _check(recorded, source)
    assert found["shop-1"].outcome == "diverged" and found["shop-1"].expected == "price#2"
    assert found["shop-1"].call == "ship"


def test_a_removed_branch_ends_a_history_early(recorded: Workspace) -> None:
    """Without the ship branch the finished run's history has a call the new code never makes:
    reported (a note: DBOS never replays a finished run)."""
    source = SHOP.replace("    if total > 15:\n        return ship(total)\n", "")
    found = _check(recorded, source)
    first = found["shop-1"]
    assert (first.outcome, first.missing, first.verdict) == ("ends-early", ["ship#1"], "compatible")


def test_a_patch_guarded_insertion_replays(recorded: Workspace) -> None:
    """The same insertion behind DBOS.patch: old histories take the old path."""
    source = SHOP.replace(
        "        pack(sku)\n",
        '        pack(sku)\n        if await DBOS.patch_async("ship-each"):\n            ship(0)\n',
    )
    found = _check(recorded, source)
    assert found["shop-1"].verdict == "compatible"
    assert found["shop-2"].verdict == "compatible"


def test_the_sandbox_leaves_the_runs_untouched_and_runs_no_new_body(recorded: Workspace) -> None:
    """Every file of both runs is byte-identical after a check (the interrupted run's effects
    still end at pack a: the call past its history, price#2, was stopped before its body)."""
    runs = recorded.relay_dir("shop") / "runs"
    before = _fingerprint(runs)
    found = _check(recorded, SHOP.replace("return 10", "return 12"))
    assert found["shop-2"].outcome == "past-history" and found["shop-2"].call == "price"
    assert _fingerprint(runs) == before
    effects = [p.read_text().splitlines() for p in sorted(runs.rglob("effects.log"))]
    assert ["price a", "pack a"] in effects


def test_the_cli_exits_1_on_an_incompatible_run(
    recorded: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    """``relay check shop --replay shop-2 --json`` reports per run and fails CI on divergence."""
    recorded.save_draft(
        "shop", SHOP.replace("def pack(", "def wrap(").replace("pack(sku)", "wrap(sku)")
    )
    argv = ["--home", str(recorded.home), "check", "shop", "--replay", "shop-2", "--json"]
    assert cli_main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["compatible"] is False and [r["run_id"] for r in doc["runs"]] == ["shop-2"]
    # shop-1 finished: it differs too, but recovery never replays it, so CI passes
    assert cli_main([*argv[:-2], "shop-1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "shop: the draft replays 0 of 1 recorded runs; 1 finished run differs: recovery never "
        "replays a finished run, a fork from before the difference would"
    )
    assert cli_main(argv[:-1]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "shop: the draft replays 0 of 1 recorded runs; 1 unfinished run would fail to recover "
        "on it (shop-2)"
    )
    recorded.save_draft("shop", SHOP)
    assert cli_main(argv[:-1]) == 0
    assert "shop: the draft replays 1 of 1 recorded runs" in capsys.readouterr().out
    recorded.save_draft("other", SHOP)
    assert cli_main(["--home", str(recorded.home), "check", "other", "--replay", "shop-2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "relay: error: Run shop-2 is a run of shop, not of other; replay it with: relay check "
        "shop --replay shop-2 [run-not-found]"
    ]


def test_publishing_warns_when_an_in_flight_run_would_not_replay(workspace: Workspace) -> None:
    """v1 has an interrupted run; publishing v2 with pack renamed warns, naming the run and
    the command that shows why; a compatible v3 (a body change) publishes without a warning."""
    from relay_notebook.views import wording as surfaces

    workspace.save_draft("shop", SHOP)
    assert commands.publish(workspace, "shop").release.ref == "v1"
    stuck = commands.run(
        workspace, "shop", run_input=ITEMS, release="v1", crash="after:pack#1"
    ).wait(120)
    assert stuck.status == "interrupted"
    workspace.save_draft(
        "shop", SHOP.replace("def pack(", "def wrap(").replace("pack(sku)", "wrap(sku)")
    )
    renamed = commands.publish(workspace, "shop")
    assert [r.run_id for r in renamed.stranded] == [stuck.run_id]
    line = surfaces.published_line(renamed, "terminal")
    assert f"warning: in-flight run {stuck.run_id} (interrupted) would not replay on v2" in line
    assert f"relay check shop --replay {stuck.run_id}" in line
    workspace.save_draft("shop", SHOP.replace("return 10", "return 11"))
    body_only = commands.publish(workspace, "shop")
    assert body_only.release.ref == "v3" and body_only.stranded == []


def test_a_run_on_postgresql_is_replayed_from_a_copy(tmp_path: Path, database_url: str) -> None:
    """A run whose history is in the shared PostgreSQL database: its rows are copied into the
    sandbox's SQLite store; the rename is found, the body change replays, and the shared
    database's rows are unchanged by the checks."""
    import psycopg

    ws = Workspace(tmp_path / "relays", database_url=database_url)
    ws.save_draft("shop", SHOP)
    crashed = commands.run(ws, "shop", run_input=ITEMS, crash="after:pack#1").wait(120)
    assert crashed.status == "interrupted"

    def rows() -> list[tuple[object, ...]]:
        with psycopg.connect(database_url) as conn:
            return conn.execute(
                "SELECT workflow_uuid, status, function_id, function_name "
                "FROM dbos.workflow_status "
                "JOIN dbos.operation_outputs USING (workflow_uuid) ORDER BY 1, 3"
            ).fetchall()

    before = rows()
    renamed = _check(ws, SHOP.replace("def pack(", "def wrap(").replace("pack(sku)", "wrap(sku)"))
    report = renamed[crashed.run_id]
    assert (report.outcome, report.expected, report.call) == ("diverged", "pack#1", "wrap")
    body = _check(ws, SHOP.replace("return 10", "return 11"))[crashed.run_id]
    assert (body.verdict, body.outcome, body.call) == ("compatible", "past-history", "price")
    assert rows() == before


def test_the_replayed_code_is_confined_to_its_sandbox(workspace: Workspace) -> None:
    """The replay imports the relay's module, so its top-level code runs: like an attempt, it
    may write only in its sandbox (a file it tries to create in the workspace is not made)."""
    marker = workspace.home / "written-by-the-relay"
    prologue = f"try:\n    open({str(marker)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
    workspace.save_draft("shop", prologue + SHOP)
    assert commands.run(workspace, "shop", run_input=ITEMS).wait(120).status == "succeeded"
    assert not marker.exists()  # the attempt was confined
    [report] = replay_check(workspace, "shop")
    assert report.verdict == "compatible" and report.outcome == "replayed"
    assert not marker.exists()
