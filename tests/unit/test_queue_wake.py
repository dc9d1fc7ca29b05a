"""``PollWhen``: the event a worker's DBOS queue loop waits on between polls."""

from __future__ import annotations

import threading

from relay_notebook.runner.queue_wake import PollWhen

LONG = 60.0  # a poll interval no test waits out


def _waiter(wake: PollWhen, timeout: float = LONG) -> tuple[threading.Thread, list[bool]]:
    answers: list[bool] = []
    thread = threading.Thread(target=lambda: answers.append(wake.wait(timeout)), daemon=True)
    thread.start()
    return thread, answers


def test_a_wait_without_a_wish_lasts_the_interval_and_does_not_stop_the_loop() -> None:
    wake = PollWhen(lambda: True)
    assert wake.wait(0.01) is False and not wake.is_set()


def test_a_wish_ends_the_wait_at_once_when_there_is_room() -> None:
    wake = PollWhen(lambda: True)
    thread, answers = _waiter(wake)
    wake.soon()
    thread.join(10)
    assert answers == [False] and not wake.is_set()  # polled early, not stopped


def test_a_wish_waits_for_room_then_ends_the_wait() -> None:
    room = threading.Event()
    wake = PollWhen(room.is_set)
    thread, answers = _waiter(wake)
    wake.soon()
    thread.join(0.2)
    assert thread.is_alive() and answers == []  # DBOS is still recording the ended run
    room.set()
    thread.join(10)
    assert answers == [False]


def test_a_wish_is_forgotten_when_the_interval_runs_out() -> None:
    room = threading.Event()
    wake = PollWhen(room.is_set)
    wake.soon()
    assert wake.wait(0.05) is False  # no room: the regular poll came first
    room.set()
    thread, answers = _waiter(wake, 0.3)
    thread.join(0.1)
    assert thread.is_alive()  # the old wish does not end the next wait
    thread.join(10)
    assert answers == [False]


def test_woken_polls_keep_their_gap_however_often_a_wish_comes() -> None:
    wake = PollWhen(lambda: True, gap_s=0.5)
    wake.soon()
    assert wake.wait(LONG) is False  # the first wish ends the wait at once
    wake.soon()  # a flood of notifications right after that poll
    thread, answers = _waiter(wake)
    thread.join(0.2)
    assert thread.is_alive() and answers == []  # not before the gap has passed
    thread.join(10)
    assert answers == [False]


def test_set_stops_the_loop() -> None:
    wake = PollWhen(lambda: False)
    thread, answers = _waiter(wake)
    wake.set()
    thread.join(10)
    assert answers == [True] and wake.is_set()
    assert wake.wait(LONG) is True
