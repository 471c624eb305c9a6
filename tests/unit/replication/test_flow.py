"""FlowMonitor: the bytes of the last whole second, as Java's once-a-second thread would have published them."""

from __future__ import annotations

import threading

from broker.replication.flow import FlowMonitor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reports_the_last_whole_second_only() -> None:
    clock = Clock()
    flow = FlowMonitor(clock)
    flow.add(500)
    clock.now += 0.9
    flow.add(12)
    assert flow.transferred_byte_in_second() == 0  # the first second is still being counted
    clock.now += 0.2  # 1.1 s: the first second ended with 512 bytes
    flow.add(7)
    assert flow.transferred_byte_in_second() == 512
    clock.now += 0.8  # 1.9 s: still inside the second second
    assert flow.transferred_byte_in_second() == 512
    clock.now += 0.2  # 2.1 s: the second second held 7
    assert flow.transferred_byte_in_second() == 7


def test_a_quiet_second_reports_zero_even_after_a_busy_one() -> None:
    clock = Clock()
    flow = FlowMonitor(clock)
    flow.add(4096)
    clock.now += 2.5  # the busy second ended, then a whole second with nothing
    assert flow.transferred_byte_in_second() == 0
    flow.add(1)
    clock.now += 1.0
    assert flow.transferred_byte_in_second() == 1


def test_adds_from_many_threads_are_all_counted() -> None:
    clock = Clock()
    flow = FlowMonitor(clock)

    def add() -> None:
        for _ in range(10_000):
            flow.add(3)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    clock.now += 1.0
    assert flow.transferred_byte_in_second() == 4 * 10_000 * 3
