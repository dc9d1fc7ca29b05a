"""Profile: where a queued run's CPU goes, by the part each process plays in its attempt.

Run ``python benchmarks/profile_attempt.py [--runs N]`` as root on a machine with ``perf``
(Debian's ``linux-perf``). It starts what ``bench_workers.py``'s row 4 measures: a private
PostgreSQL server (fsync on), one ``relay worker`` (concurrency 2) whose attempts fork from its
warm parent, and the one-step relay; one run is queued and awaited first (the queue's first
pickup, and the warm parent's first fork), then N more (default 24) are queued at once and
awaited while ``perf record -a`` samples every CPU at 999 Hz. A sample is about a millisecond
of one CPU, so each process's samples, divided by N, are its CPU per queued run.

The kit names an attempt's processes by their part (``runner.namespaces.name_process``), and
so does ``perf``: the warm parent ``relay-warm`` (its forks), the attempt's group leader
``relay-leader`` (its sessions opened ahead, the sandbox's mounts and namespaces), the network
helper ``relay-net`` and pasta, the sandbox's init ``relay-init``, and the relay's process
``relay-child`` (DBOS's launch, the workflow, the ledger; its threads too). The worker is
``python``, this script ``relay-profile``. Each part is split into the time its processes
spent in the kernel (forks, page faults, exits, sockets) and in user space. Beside the table:
the PostgreSQL sessions each run opened (the server's own count, ``pg_stat_database``), which
cost the server a backend process each.

``bench_workers.py`` is the benchmark (its row 4 is judged against 150 ms); this is the
profile behind it, as ``profile_step.py`` is behind the step rate. It reports, it does not
assert: the exit status is 0 whatever the numbers, and without ``perf`` or root it says so.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from bench_workers import (  # noqa: E402
    CONCURRENCY,
    LEASE_S,
    WARM_MARKER,
    Processes,
    _expect,
    become_subreaper,
)
from runner_sources import RELAYS  # noqa: E402

from relay_notebook import commands  # noqa: E402
from relay_notebook.runner.backend import Backend, connect, resolve_backend  # noqa: E402
from relay_notebook.testing import postgres_server  # noqa: E402
from relay_notebook.workspace import Workspace  # noqa: E402

HZ = 999  # perf's sampling frequency: a sample is about 1/HZ s of one CPU
#: each process name perf reports, as the part it plays (in the order printed)
PARTS = {
    "relay-warm": "warm parent's forks",
    "relay-leader": "leader: sessions ahead, sandbox",
    "relay-net": "network helper",
    "pasta": "pasta",
    "relay-init": "sandbox's init",
    "relay-child": "relay's process: DBOS, workflow",
    "relay-netns": "spare network's holder",
    "python": "worker, the supervisor",
    "relay-profile": "caller: enqueue, wait",
    "postgres": "PostgreSQL server",
}
PASTA_NAMES = {"pasta", "passt", "passt.avx2"}
IDLE = {"swapper"}


def _perf_parts(data: Path) -> dict[str, tuple[int, int]]:
    """Samples by part: (user, kernel); processes of no part are summed as ``other``."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "-g", "none",
         "--sort", "comm,dso", "-F", "sample,comm,dso"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    parts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for line in report.splitlines():
        fields = line.split()
        if line.startswith("#") or len(fields) < 3 or not fields[0].isdigit():
            continue
        samples, comm, dso = int(fields[0]), fields[1], fields[-1]
        if comm in IDLE:
            continue
        part = "pasta" if comm in PASTA_NAMES else comm if comm in PARTS else "other"
        parts[part][1 if dso == "[kernel.kallsyms]" else 0] += samples
    return {part: (u, k) for part, (u, k) in parts.items()}


def _sessions(url: str) -> int:
    with connect(Backend(url), dbname="postgres") as conn:
        return int(conn.execute("SELECT sum(sessions) FROM pg_stat_database").fetchone()[0])


def _cannot_sample(root: Path) -> None:
    said = (root / "perf.log").read_text(errors="replace").strip()[-500:]
    print(f"profile_attempt: perf record could not sample here: {said or 'no data'}")


def profile(runs: int, root: Path, keep: Path | None = None, stacks: bool = False) -> None:
    with postgres_server(fsync=True) as server:
        url = server.database_url()
        ws = Workspace(root / "home")
        ws.save_draft("one", RELAYS["one"])
        backend = resolve_backend(url)
        argv = [
            sys.executable, "-m", "relay_notebook.cli", "--home", str(ws.home),
            "--database-url", url, "worker", "--id", "profile-w1",
            "--concurrency", str(CONCURRENCY), "--lease", f"{LEASE_S:g}",
        ]  # fmt: skip
        env = {**os.environ, "RELAY_WARM_START": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
        procs = Processes(root)
        try:
            procs.start(argv, "worker", env)
            procs.wait_ready("serving")
            procs.wait_ready(WARM_MARKER, refusal="are spawned")
            first = commands.enqueue(ws, "one", run_input={"x": 0}, backend=backend)
            _expect(first.wait(timeout=600), {"value": 1}, f"queued run {first.run_id}")
            data = root / "perf.data"
            sessions0 = _sessions(url)
            perf_log = open(root / "perf.log", "wb")  # noqa: SIM115 - closed below
            perf = subprocess.Popen(
                ["perf", "record", "-a", *(["-g"] if stacks else []), "-F", str(HZ),
                 "-o", str(data), "--", "sleep", "3600"],
                stdout=subprocess.DEVNULL, stderr=perf_log,
            )  # fmt: skip
            time.sleep(0.5)  # perf is sampling (or has given up: said below)
            if perf.poll() is not None:
                perf_log.close()
                _cannot_sample(root)
                return
            t0 = time.perf_counter()
            queued = [
                commands.enqueue(ws, "one", run_input={"x": i}, backend=backend)
                for i in range(1, runs + 1)
            ]
            for i, q in enumerate(queued, start=1):
                _expect(q.wait(timeout=600), {"value": i + 1}, f"queued run {q.run_id}")
            wall = time.perf_counter() - t0
            perf.send_signal(signal.SIGINT)
            perf.wait(60)
            perf_log.close()
            sessions = _sessions(url) - sessions0 - 1  # (less our own count's session)
        finally:
            procs.stop_all()
        if not data.is_file() or data.stat().st_size == 0:
            _cannot_sample(root)
            return
        report(_perf_parts(data), runs, wall, sessions)
        if keep is not None:
            shutil.copyfile(data, keep)
            print(f"(the samples are kept in {keep}: perf report -i {keep} --comm relay-leader)")


def report(parts: dict[str, tuple[int, int]], runs: int, wall: float, sessions: int) -> None:
    def ms(samples: int) -> float:
        return samples / HZ * 1000 / runs

    print(
        f"profile_attempt: {runs} queued one-step runs on PostgreSQL, one warm worker "
        f"(concurrency {CONCURRENCY}), {runs / wall:.2f} runs/s while sampled; "
        f"CPU ms per queued run by part (perf record -a, {HZ} Hz)\n"
    )
    print(f"{'part (process name)':<46} {'user':>7} {'kernel':>7} {'total':>7}")
    print("-" * 70)
    total = [0, 0]
    attempt = [0, 0]
    for part in [*PARTS, "other"]:
        user, kernel = parts.get(part, (0, 0))
        if user + kernel == 0:
            continue
        total[0] += user
        total[1] += kernel
        if part.startswith("relay-") or part == "pasta":
            attempt[0] += user
            attempt[1] += kernel
        name = PARTS.get(part, "other: kernel threads, the rest")
        name = f"{name} ({part})" if part in PARTS else name
        print(f"{name:<46} {ms(user):>7.1f} {ms(kernel):>7.1f} {ms(user + kernel):>7.1f}")
    print("-" * 70)
    print(
        f"{'the attempt: warm parent, leader ... relay':<46} {ms(attempt[0]):>7.1f} "
        f"{ms(attempt[1]):>7.1f} {ms(sum(attempt)):>7.1f}"
    )
    print(f"{'all':<46} {ms(total[0]):>7.1f} {ms(total[1]):>7.1f} {ms(sum(total)):>7.1f}")
    print(
        f"\nPostgreSQL sessions opened per queued run: {sessions / runs:.2f} (each a backend "
        "process the server starts, and the catalog it reads again)"
    )
    print(
        "(bench_workers.py's row 4 counts the same processes from /proc: its target is 150 ms "
        "per queued run; a sampled profile is close to it, not equal)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="queued runs sampled (default 24)")
    parser.add_argument("--keep", type=Path, help="keep perf's samples in this file")
    parser.add_argument("-g", dest="stacks", action="store_true", help="record call stacks")
    args = parser.parse_args(argv)
    if shutil.which("perf") is None or os.geteuid() != 0:
        print("profile_attempt: needs perf (Debian's linux-perf) and root to sample every CPU")
        return 0
    ctypes.CDLL(None).prctl(15, b"relay-profile", 0, 0, 0)  # PR_SET_NAME: the caller's part
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    become_subreaper()
    with tempfile.TemporaryDirectory(prefix="profile-attempt-") as tmp:
        profile(max(1, args.runs), Path(tmp), args.keep, args.stacks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
