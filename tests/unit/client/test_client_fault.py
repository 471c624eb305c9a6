"""MQFaultStrategy / LatencyFaultTolerance: latency buckets, isolation, and queue selection around bad brokers."""

from __future__ import annotations

import random

import pytest

from broker.client.fault import (
    ISOLATION_LATENCY,
    LatencyFaultTolerance,
    MQFaultStrategy,
    compute_not_available_duration,
)
from broker.client.message import MessageQueue
from broker.client.route import SendQueueIndex, TopicPublishInfo


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def info(*brokers: str, queues: int = 2) -> TopicPublishInfo:
    mqs = [MessageQueue("T", b, q) for b in brokers for q in range(queues)]
    return TopicPublishInfo(mqs, send_which_queue=SendQueueIndex(random.Random(7)))


@pytest.mark.parametrize("latency,duration", [
    (0, 0), (49, 0), (50, 0), (100, 0), (549, 0), (550, 2000), (1799, 2000), (1800, 5000), (3000, 6000),
    (5000, 10000), (14999, 10000), (15000, 30000), (ISOLATION_LATENCY, 10000), (10**9, 30000),
])
def test_buckets_are_javas(latency: int, duration: int) -> None:
    assert compute_not_available_duration(latency) == duration


def test_isolation_lasts_its_duration() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(clock=clock)
    strategy.update_fault_item("a", 20, isolation=True, reachable=True)  # isolation: charged 10 s -> out 10 s
    assert not strategy.fault_tolerance.is_available("a")
    clock.now += 9_999
    assert not strategy.fault_tolerance.is_available("a")
    clock.now += 1
    assert strategy.fault_tolerance.is_available("a")


def test_a_fast_send_does_not_shorten_an_isolation() -> None:
    clock = Clock()
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("a", 15000, 30000, True)
    tolerance.update_fault_item("a", 10, 0, True)
    clock.now += 29_000
    assert not tolerance.is_available("a")
    assert tolerance.items["a"].current_latency == 10


def test_selection_skips_isolated_broker_and_last_broker() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(clock=clock)
    publish = info("a", "b", "c")
    strategy.update_fault_item("b", 0, isolation=True, reachable=True)
    picked = {strategy.select_one_message_queue(publish, "a").broker_name for _ in range(50)}
    assert picked == {"c"}


def test_selection_falls_back_when_every_broker_is_isolated() -> None:
    strategy = MQFaultStrategy(clock=Clock())
    publish = info("a", "b")
    for broker in "ab":
        strategy.update_fault_item(broker, 0, isolation=True, reachable=False)
    assert strategy.select_one_message_queue(publish, None) is not None
    assert strategy.select_one_message_queue(publish, "a") is not None


def test_unreachable_but_available_broker_is_second_choice() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(clock=clock)
    publish = info("a", "b")
    strategy.update_fault_item("a", 0, isolation=True, reachable=True)  # isolated, reachable
    strategy.update_fault_item("b", 0, isolation=True, reachable=False)  # isolated, unreachable
    assert {strategy.select_one_message_queue(publish, None).broker_name for _ in range(20)} == {"a"}


def test_round_robin_without_fault_avoidance() -> None:
    strategy = MQFaultStrategy(send_latency_fault_enable=False)
    publish = info("a", "b", queues=1)
    strategy.update_fault_item("a", 0, isolation=True, reachable=False)  # ignored when disabled
    picks = [strategy.select_one_message_queue(publish, None).broker_name for _ in range(6)]
    assert sorted(picks) == ["a", "a", "a", "b", "b", "b"]
    assert picks[0] != picks[1]
    assert strategy.select_one_message_queue(publish, "a").broker_name == "b"


def test_send_queue_index_stays_non_negative_across_overflow() -> None:
    index = SendQueueIndex()
    index._index = 2**31 - 2
    values = [index.increment_and_get() for _ in range(4)]
    assert all(v >= 0 for v in values)
    assert values[:2] == [2**31 - 1, 0]  # Java: MAX_VALUE, then MIN_VALUE & 0x7FFFFFFF
