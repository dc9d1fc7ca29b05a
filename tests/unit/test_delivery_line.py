"""What a sender reads after ``relay send``: one line per case, naming what happens next."""

from __future__ import annotations

from relay_notebook.commands.waiting import delivery_line
from relay_notebook.runner.messages import Delivery


def _line(status: str, *, duplicate: bool = False) -> str:
    return delivery_line(Delivery("refund-1", "approval", "k1", duplicate, status, None))


def test_each_state_says_what_happens_to_the_message() -> None:
    head = "message on topic 'approval' to run refund-1"
    assert _line("running") == f"{head} delivered; the run's live attempt receives it"
    assert _line("waiting").startswith(f"{head} delivered; the run still waits")
    assert _line("interrupted") == (
        f"{head} delivered; the run is interrupted: it reads it once recovered "
        "(relay recover refund-1)"
    )
    assert _line("succeeded", duplicate=True) == (
        f"{head} was delivered before (same idempotency key): not delivered again; the run "
        "has succeeded"
    )
    assert "recover" not in _line("failed", duplicate=True)
