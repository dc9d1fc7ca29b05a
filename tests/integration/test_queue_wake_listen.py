"""A worker's listening session (``runner.queue_wake.listen``) on a real PostgreSQL server."""

from __future__ import annotations

import threading
from pathlib import Path

from relay_notebook.runner.backend import connect, prepare_database, resolve_backend
from relay_notebook.runner.queue_wake import CHANNEL, PollWhen, listen
from tests.polling import wait_until


def test_a_lost_listening_session_is_said_in_one_line_and_opened_again(
    database_url: str, tmp_path: Path
) -> None:
    """The server ends the session (as a restart would): the worker says so once, in one line
    (the driver's message spans several), and listens again."""
    backend = resolve_backend(database_url)
    prepare_database(backend, tmp_path / "home")
    wake = PollWhen(lambda: True)
    lines: list[str] = []
    listening = threading.Event()
    args = (backend, wake, lines.append, listening)
    threading.Thread(target=listen, args=args, daemon=True).start()
    try:
        assert listening.wait(10)
        with connect(backend) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query = %s AND pid <> pg_backend_pid()",
                (f"LISTEN {CHANNEL}",),
            ).fetchall()
        assert ended == [(True,)]
        wait_until(lambda: len(lines) >= 2, what=lambda: f"two lines, got {lines}")
    finally:
        wake.set()
    lost, back = lines[:2]
    assert lost.startswith("worker: not woken by queued runs until PostgreSQL answers again: ")
    assert "server closed the connection" in lost and "\n" not in lost, lost
    assert back == "worker: woken by queued runs again"
