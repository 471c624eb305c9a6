"""ServiceThread: the store's background threads start, wake, survive a failed round and stop."""

from __future__ import annotations

import threading
import time

from broker.store.service_thread import ServiceThread


class Rounds(ServiceThread):
    name = "Rounds"
    interval = 60.0  # only a wake-up runs a round within the test

    def __init__(self, fail_first: bool = False) -> None:
        super().__init__()
        self.rounds = 0
        self.fail_first = fail_first
        self.ran = threading.Event()

    def run_once(self) -> None:
        self.rounds += 1
        self.ran.set()
        if self.fail_first and self.rounds == 1:
            raise OSError("disk gone")


def test_a_wakeup_runs_a_round_and_shutdown_joins() -> None:
    service = Rounds()
    service.start()
    service.wakeup()
    assert service.ran.wait(5)
    service.shutdown()
    assert service.is_stopped() and "Rounds" not in {t.name for t in threading.enumerate()}
    assert service.rounds == 1  # the wake-up that shutdown sends runs no round


def test_a_wakeup_before_the_wait_is_not_lost() -> None:
    service = Rounds()
    service.wakeup()
    started = time.monotonic()
    service.wait_for_running(5)
    assert time.monotonic() - started < 1
    started = time.monotonic()
    service.wait_for_running(0.05)  # consumed: the next wait waits
    assert time.monotonic() - started >= 0.04


def test_a_failed_round_is_logged_and_the_service_goes_on(caplog) -> None:
    service = Rounds(fail_first=True)
    service.start()
    try:
        service.wakeup()
        assert service.ran.wait(5)
        service.ran.clear()
        deadline = time.monotonic() + 5
        while service.rounds < 2 and time.monotonic() < deadline:
            service.wakeup()
            service.ran.wait(0.1)
        assert service.rounds >= 2
    finally:
        service.shutdown()
    assert "Rounds failed" in caplog.text


def test_pause_ends_at_shutdown() -> None:
    service = Rounds()
    service.make_stop()
    assert service.pause(5) is True
