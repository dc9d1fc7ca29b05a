"""The worker pool on a real PostgreSQL: queued runs, a SIGKILLed worker, recovery elsewhere."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from relay_notebook import commands
from relay_notebook.cli import main as cli_main
from relay_notebook.history import read_run_log
from relay_notebook.record.folders import find_run
from relay_notebook.record.ledger import read_events
from relay_notebook.runner.backend import Backend, prepare_database, resolve_backend
from relay_notebook.runner.dbos_engines import SESSIONS_AHEAD
from relay_notebook.runner.locks import take_run_lock
from relay_notebook.workspace import Workspace
from tests.polling import wait_until

# Each step notes its body in effects.log (in the run's execution folder) and takes a little
# while, so a worker can be killed in the middle of the run.
STEADY = textwrap.dedent(
    """
    import asyncio, os
    from dbos import DBOS

    @DBOS.step()
    async def work(i, pause):
        fd = os.open("effects.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"work {i}\\n".encode())
        os.close(fd)
        await asyncio.sleep(pause)
        return i * i

    @DBOS.workflow()
    async def run(INPUT):
        total = 0
        for i in range(INPUT["n"]):
            total += await work(i, INPUT.get("pause", 0.2))
        return {"total": total}
    """
)
# a step that takes its process down every time: only the attempt budget ends the run
DOOMED = textwrap.dedent(
    """
    import os
    from dbos import DBOS

    @DBOS.step()
    async def fall():
        os._exit(9)

    @DBOS.workflow()
    async def run(INPUT):
        await fall()
        return {}
    """
)
LEASE_S = 1.5
StartWorker = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def pool(
    workspace: Workspace, database_url: str, tmp_path: Path
) -> Iterator[tuple[Workspace, Backend, StartWorker]]:
    """The workspace, its PostgreSQL backend, and a way to start ``relay worker`` processes."""
    backend = resolve_backend(database_url)
    started: list[subprocess.Popen[bytes]] = []

    def start(executor_id: str, concurrency: int = 2, lease: float = LEASE_S, *more: str) -> Any:
        log = open(tmp_path / f"{executor_id}.log", "wb")  # noqa: SIM115 - kept by the process
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "relay_notebook.cli", "--home", str(workspace.home),
                "--database-url", database_url, "worker", "--id", executor_id,
                "--concurrency", str(concurrency), "--lease", str(lease), *more,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        proc.executor_id = executor_id  # type: ignore[attr-defined]
        started.append(proc)
        return proc

    with _failing_fast(started, tmp_path):
        yield workspace, backend, start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


class WorkerFailed(AssertionError):
    """A worker the test started exited with an error while the test went on."""


@contextlib.contextmanager
def _failing_fast(started: list[subprocess.Popen[bytes]], logs: Path) -> Iterator[None]:
    """While the test runs, a worker that exited with an error status (one that failed to
    start, say) fails it with the worker's log at the test's next sleep (every wait here polls
    with ``time.sleep``: ``wait_until``, a queued run's ``wait``), instead of leaving it to wait
    out its timeouts for runs no worker will take. A worker the test kills or stops exits on a
    signal or with 0, which is not an error."""
    main = threading.main_thread()
    real_sleep = time.sleep

    def failure() -> str | None:
        for proc in started:
            code = proc.poll()
            if code is not None and code > 0:
                name = proc.executor_id  # type: ignore[attr-defined]
                tail = (logs / f"{name}.log").read_text(errors="replace")[-2000:]
                return f"worker {name} exited {code}:\n{tail}"
        return None

    def sleep(seconds: float) -> None:
        if threading.current_thread() is main and (failed := failure()) is not None:
            raise WorkerFailed(failed)
        real_sleep(seconds)

    time.sleep = sleep  # type: ignore[assignment]
    try:
        yield
    finally:
        time.sleep = real_sleep  # type: ignore[assignment]


def _steps_done(ws: Workspace, run_id: str, attempt: int) -> int:
    folder = find_run(ws, run_id)
    if not folder.events.exists():
        return 0
    return sum(
        1
        for e in read_events(folder.events)
        if e.get("kind") == "step_end" and e.get("attempt") == attempt
    )


def _attempt_spans(ws: Workspace, queued: list[Any]) -> list[tuple[float, float, str]]:
    """Each attempt of the queued runs: (started_at, ended_at, executor id), in start order."""
    return sorted(
        (a["started_at"], a["ended_at"], a["executor_id"])
        for q in queued
        for a in find_run(ws, q.run_id).read_meta()["attempts"]
    )


def _most_at_once(spans: list[tuple[float, float, str]]) -> int:
    return max(sum(1 for s, e, _ in spans if s <= t < e) for t, _, _ in spans)


def test_a_killed_workers_runs_are_recovered_by_the_others(pool: Any) -> None:
    """Three workers; SIGKILL the one running two relays mid-run; the other two finish both
    from their checkpoints after its lease expires; no checkpointed step runs twice."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    victim = start("w-a", concurrency=2)
    runs = [
        commands.enqueue(ws, "steady", run_input={"n": 20, "pause": 0.25}, backend=backend)
        for _ in range(2)
    ]
    # both runs of one release on the victim, so their recoveries overlap elsewhere
    for q in runs:
        wait_until(lambda q=q: _steps_done(ws, q.run_id, 1) >= 3, what=f"{q.run_id} underway")
    start("w-b")
    start("w-c")
    time.sleep(1.5)  # the two new workers are up and heartbeating
    victim.send_signal(signal.SIGKILL)
    killed_at = time.time() * 1000
    victim.wait()

    for q in runs:
        outcome = q.wait(timeout=90)
        assert outcome.status == "succeeded", outcome
        assert outcome.result == {"total": sum(i * i for i in range(20))}
        meta = find_run(ws, q.run_id).read_meta()
        first, second = meta["attempts"]
        assert first["executor_id"] == "w-a" and first["status"] == "interrupted"
        assert first["lost"] is True
        assert second["status"] == "succeeded" and second["executor_id"] in {"w-b", "w-c"}
        # the pool waited for the lease to run out before taking the run over
        assert second["started_at"] - killed_at >= (LEASE_S - 0.5) * 1000
        steps = read_run_log(ws, q.run_id).steps
        reused = [s for s in steps if s.reused_in]
        assert len(reused) >= 3 and all(list(s.executed_in) == [1] for s in reused)
        effects = Counter(
            (find_run(ws, q.run_id).execution / "effects.log").read_text().splitlines()
        )
        assert set(effects) == {f"work {i}" for i in range(20)}
        for s in reused:  # a completed step's body ran once, in the attempt that was killed
            assert effects[f"work {s.function_id - 1}"] == 1
        # at most the step in flight at the kill ran twice (at-least-once for unfinished steps)
        assert sum(n - 1 for n in effects.values()) <= 1


def test_the_pool_recovers_a_crashed_attempt_and_respects_concurrency(pool: Any) -> None:
    """--crash on a queued run: the worker recovers it at once; one worker runs two at a time."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    start("solo", concurrency=2)
    crashed = commands.enqueue(
        ws, "steady", run_input={"n": 3, "pause": 0.05}, crash="after:work#2", backend=backend
    )
    others = [
        commands.enqueue(ws, "steady", run_input={"n": 2, "pause": 0.4}, backend=backend)
        for _ in range(4)
    ]
    outcome = crashed.wait(timeout=60)
    assert outcome.status == "succeeded" and outcome.attempt == 2, outcome.error
    assert outcome.reused == [1, 2] and outcome.executed == [3]
    for q in others:
        assert q.wait(timeout=60).status == "succeeded"
    assert _most_at_once(_attempt_spans(ws, others)) == 2


def test_the_pool_has_one_concurrency_and_every_worker_says_which(
    pool: Any, tmp_path: Path
) -> None:
    """DBOS keeps one worker_concurrency per queue: a worker started with another
    ``--concurrency`` changes it for the live workers and says so; each of them says it runs
    that many now, ``relay workers`` shows it, and it is what they run."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    start("w-a", concurrency=1)
    wait_until(lambda: "serving" in (tmp_path / "w-a.log").read_text(), what="w-a serving")
    newcomer = start("w-b", concurrency=3)
    wait_until(lambda: "serving" in (tmp_path / "w-b.log").read_text(), what="w-b serving")
    assert (
        "w-b: concurrency 3 now applies to w-a too (it was 1)" in (tmp_path / "w-b.log").read_text()
    )
    said = "w-a: now runs 3 at once, the concurrency a worker started since set for the pool"
    wait_until(lambda: said in (tmp_path / "w-a.log").read_text(), what="w-a to follow")

    def listed() -> dict[str, int]:
        return {w.executor_id: w.concurrency for w in commands.workers(backend) if w.alive}

    wait_until(lambda: listed() == {"w-a": 3, "w-b": 3}, what="both leases to show 3")
    newcomer.send_signal(signal.SIGTERM)  # gives its lease up: w-a alone takes the runs
    newcomer.wait()
    queued = [
        commands.enqueue(ws, "steady", run_input={"n": 2, "pause": 0.5}, backend=backend)
        for _ in range(3)
    ]
    for q in queued:
        assert q.wait(timeout=60).status == "succeeded"
    spans = _attempt_spans(ws, queued)
    assert [who for _, _, who in spans] == ["w-a"] * 3  # what it said: three at once, on w-a
    assert _most_at_once(spans) == 3


def test_a_worker_takes_runs_when_queued_and_when_a_slot_frees_not_at_its_poll(
    pool: Any, tmp_path: Path
) -> None:
    """A worker polls the queue once a minute here (``--poll 60``), yet takes each run at once:
    one queued before it started, one queued while it waits (the enqueue's notification wakes
    it), and, one at a time, three queued together (each run's end wakes it). Each would
    otherwise wait for a poll, and the last of the three for the third one."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    early = commands.enqueue(ws, "steady", run_input={"n": 1, "pause": 0.01}, backend=backend)
    start("w-a", 1, LEASE_S, "--poll", "60")
    log = tmp_path / "w-a.log"
    wait_until(lambda: "serving" in log.read_text(), what="w-a serving")
    assert "(concurrency 1, lease 1.5 s, poll 60 s)" in log.read_text()
    first = time.monotonic()
    assert early.wait(timeout=30).status == "succeeded"
    queued = commands.enqueue(ws, "steady", run_input={"n": 1, "pause": 0.01}, backend=backend)
    assert queued.wait(timeout=30).status == "succeeded"
    together = [
        commands.enqueue(ws, "steady", run_input={"n": 1, "pause": 0.2}, backend=backend)
        for _ in range(3)
    ]
    for q in together:
        assert q.wait(timeout=30).status == "succeeded"
    assert time.monotonic() - first < 60  # no run waited for the worker's first regular poll
    spans = _attempt_spans(ws, together)
    assert len(spans) == 3  # one at a time (--concurrency 1): each began after the last ended
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))


def test_a_worker_whose_queue_was_deleted_registers_it_again(pool: Any, tmp_path: Path) -> None:
    """``DBOSClient.delete_queue`` ends DBOS's queue loop in every worker; a worker says so,
    registers the queue again on its next beat and takes the runs queued since."""
    import dbos

    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    start("w-a")
    log = tmp_path / "w-a.log"
    wait_until(lambda: "serving" in log.read_text(), what="w-a serving")
    client = dbos.DBOSClient(system_database_url=backend.dbos_url)
    try:
        client.delete_queue("relay-runs")
        said = "w-a: queue relay-runs was deleted; registered again"
        wait_until(lambda: said in log.read_text(), what="w-a to register it again")
    finally:
        client.destroy()
    queued = commands.enqueue(ws, "steady", run_input={"n": 1, "pause": 0.01}, backend=backend)
    assert queued.wait(timeout=60).status == "succeeded"
    assert "lease check failed" not in log.read_text()  # its lease was renewed throughout


def test_a_worker_forks_its_attempts_from_its_warm_parent(
    pool: Any, tmp_path: Path, warm_start: bool
) -> None:
    """`relay worker` says when its warm parent is ready; from then on each queued run's
    attempt is forked from it and confined by Landlock."""
    if not warm_start:
        pytest.skip("the suite runs with warm start off (RELAY_WARM_START=0)")
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    start("warm")
    log = tmp_path / "warm.log"
    wait_until(lambda: "attempts fork from warm parent" in log.read_text(), what="a warm worker")
    queued = [
        commands.enqueue(ws, "steady", run_input={"n": 2, "pause": 0.01}, backend=backend)
        for _ in range(3)
    ]
    for q in queued:
        assert q.wait(timeout=60).status == "succeeded"
        (attempt,) = find_run(ws, q.run_id).read_meta()["attempts"]
        assert attempt["executor_id"] == "warm" and attempt["confined"]
        assert attempt["confinement"]["mechanism"] == "landlock"
        # its PostgreSQL sessions opened before the sandbox's network (runner.dbos_engines),
        # on the engine its warm parent rehearsed DBOS on as it started (DBOS's statements
        # compiled there once, not in each attempt)
        assert attempt["confinement"]["database_sessions_ahead"] == SESSIONS_AHEAD
        assert attempt["confinement"]["database_engine"] == "rehearsed"
    # the rehearsal left none of its workflows in the database
    with psycopg.connect(backend.libpq_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE name = 'relay_rehearsal_workflow'"
        ).fetchone()
    assert left == (0,)


def test_the_attempt_budget_ends_a_run_that_always_crashes(pool: Any) -> None:
    """A run whose process dies every time is tried three times by the pool, then rejected."""
    ws, backend, start = pool
    ws.save_draft("doomed", DOOMED)
    start("w-a")
    outcome = commands.enqueue(ws, "doomed", backend=backend).wait(timeout=60)
    assert outcome.status == "rejected"
    assert outcome.error is not None and outcome.error["code"] == "attempt-budget-exhausted"
    attempts = find_run(ws, "doomed-1").read_meta()["attempts"]
    assert [a["status"] for a in attempts] == ["interrupted"] * 3


def test_a_queued_run_whose_draft_changed_is_not_started(pool: Any) -> None:
    """Bindings hold across the queue: a draft edited before a worker took the run is refused."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    queued = commands.enqueue(ws, "steady", run_input={"n": 1}, backend=backend)
    ws.save_draft("steady", STEADY.replace("i * i", "i + i"))
    start("w-a")
    outcome = queued.wait(timeout=60)
    assert outcome.status == "rejected"
    assert outcome.error is not None and outcome.error["code"] == "binding-changed"
    meta = find_run(ws, queued.run_id).read_meta()
    assert meta["attempts"] == [] and meta["status"] == "rejected"
    assert meta["error"]["code"] == "binding-changed"


def test_a_worker_waits_while_another_executor_holds_the_run(pool: Any) -> None:
    """Single executor across machines: while the run's lock is held, no worker starts it."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    queued = commands.enqueue(ws, "steady", run_input={"n": 1}, backend=backend)
    lock = take_run_lock(find_run(ws, queued.run_id), backend)
    try:
        start("w-a")

        def taken() -> bool:  # the worker dequeued the invocation and is trying the lock
            with psycopg.connect(str(backend.url)) as conn:
                row = conn.execute(
                    "SELECT status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s",
                    (queued.invocation_id,),
                ).fetchone()
            return row == ("PENDING", "w-a")

        wait_until(taken, what="w-a to take the invocation")
        time.sleep(2.5)  # past the lock's grace: the worker is waiting, not running
        assert find_run(ws, queued.run_id).read_meta()["attempts"] == []
    finally:
        lock.release()
    assert queued.wait(timeout=60).status == "succeeded"


def test_cli_queue_and_workers(pool: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``relay run --queue --json`` waits for the pool; ``relay workers`` lists the leases (a
    lease that expired over an hour ago is forgotten)."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    prepare_database(backend, ws.home)
    with psycopg.connect(backend.url) as conn:
        conn.execute(
            "INSERT INTO relay_kit.worker_leases (executor_id, host, pid, concurrency, "
            "expires_at) VALUES ('w-old', 'gone', 1, 2, now() - interval '2 hours')"
        )
    start("w-cli")
    home, url = str(ws.home), backend.url
    argv = ["--home", home, "--database-url", url, "run", "steady", "--queue", "--json"]
    assert cli_main([*argv, "--input", '{"n": 2}']) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "succeeded" and doc["result"] == {"total": 1}
    assert cli_main(["--home", home, "--database-url", url, "workers", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [w["executor_id"] for w in listed] == ["w-cli"] and listed[0]["alive"]


def test_queue_without_postgres_says_how_to_set_it(
    workspace: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--queue`` on the SQLite default is a usage error naming RELAY_DATABASE_URL."""
    monkeypatch.delenv("RELAY_DATABASE_URL", raising=False)
    workspace.save_draft("steady", STEADY)
    code = cli_main(["--home", str(workspace.home), "run", "steady", "--queue"])
    err = capsys.readouterr().err
    assert code == 2 and "RELAY_DATABASE_URL" in err and "[queue-needs-postgresql]" in err
    assert not os.path.exists(workspace.relay_dir("steady") / "runs" / "iteration-1-hook")


def test_a_fork_is_handed_to_the_pool(pool: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``relay fork RUN --from work#2 --set work#1=100 --queue``: the fork waits on the workers'
    queue and a worker runs it; the copied call's body does not run again, its edited output
    is the one used, and the attempt is the worker's."""
    ws, backend, start = pool
    ws.save_draft("steady", STEADY)
    start("w-fork")
    parent = commands.enqueue(ws, "steady", run_input={"n": 3, "pause": 0}, backend=backend)
    assert parent.wait(timeout=60).result == {"total": 5}
    argv = ["--home", str(ws.home), "--database-url", backend.url, "fork", parent.run_id]
    capsys.readouterr()
    code = cli_main([*argv, "--from", "work#2", "--set", "work#1=100", "--queue", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["status"] == "succeeded" and doc["result"] == {"total": 105}
    fork = find_run(ws, doc["run_id"])
    meta = fork.read_meta()
    assert meta["fork"]["parent"] == parent.run_id
    assert [a["executor_id"] for a in meta["attempts"]] == ["w-fork"]
    effects = (fork.path / "execution" / "effects.log").read_text().split("\n")
    assert "work 0" not in effects and {"work 1", "work 2"} <= set(effects)
    steps = read_run_log(ws, doc["run_id"]).steps
    assert [s.copied_from for s in steps][:1] == [parent.run_id]


def test_a_wait_that_loses_the_server_says_so_and_how_to_wait_again(workspace: Workspace) -> None:
    """A queued run's wait whose PostgreSQL server goes away ends with one coded line that
    names the server (not its password) and the command to wait again; nothing is lost."""
    from relay_notebook.errors import DatabaseUnavailableError
    from relay_notebook.testing import postgres_server

    with postgres_server() as server:
        backend = resolve_backend(server.database_url())
        workspace.save_draft("steady", STEADY)
        queued = commands.enqueue(workspace, "steady", run_input={"n": 1}, backend=backend)
        with pytest.raises(TimeoutError):  # no worker: it stays queued
            queued.wait(timeout=0.3)
        server.stop()
        with pytest.raises(DatabaseUnavailableError) as caught:
            queued.wait(timeout=30)
    message = str(caught.value)
    lost = f"Lost PostgreSQL at {backend.display} while waiting for run {queued.run_id}: "
    assert message.startswith(lost), message
    assert message.endswith(f"wait again with: relay wait {queued.run_id} [database-unavailable]")
    assert "Connection refused" in message and "?. " not in message
    assert find_run(workspace, queued.run_id).read_meta()["status"] == "queued"
