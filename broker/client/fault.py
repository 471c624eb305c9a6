"""Latency fault tolerance for sends (client/latency/{MQFaultStrategy,LatencyFaultToleranceImpl}.java).

Every send reports its broker and latency. A slow or failed broker is left out of queue selection for a while: the
latency falls into a bucket of ``LATENCY_MAX`` and the matching ``NOT_AVAILABLE_DURATION`` says for how long (a
transport failure or a broker error counts as 10 s of latency: 30 s out). When every broker is out, selection falls
back to reachable brokers, then to plain round robin, so a send is always attempted.

Java 5.x turns this off by default (``sendLatencyEnable``); our producer turns it on (``send_latency_fault_enable``),
the 4.x-era behaviour people expect from a client that should route around a dead broker. Detection (probing
isolated brokers in the background) is not implemented: ``start_detector_enable`` stays false, as Java's default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from broker.client.message import MessageQueue
from broker.client.route import TopicPublishInfo
from broker.common.clock import now_ms

log = logging.getLogger(__name__)

LATENCY_MAX = (50, 100, 550, 1800, 3000, 5000, 15000)  # ms, lower bound of each bucket
NOT_AVAILABLE_DURATION = (0, 0, 2000, 5000, 6000, 10000, 30000)  # ms out of selection, per bucket
ISOLATION_LATENCY = 10_000  # the latency charged for a failure


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: int = 0
    start_timestamp: int = 0  # available again from this time (ms)
    reachable: bool = True

    def is_available(self, now_ms: int) -> bool:
        return now_ms >= self.start_timestamp


class LatencyFaultTolerance:
    """Brokers by name with their last latency and when they are usable again (LatencyFaultToleranceImpl)."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self.items: dict[str, FaultItem] = {}

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int,
                          reachable: bool) -> None:
        item = self.items.get(name)
        if item is None:
            item = self.items[name] = FaultItem(name)
        item.current_latency = current_latency
        now = self._clock()
        # FaultItem.updateNotAvailableDuration: only ever pushes the end of the isolation later
        if not_available_duration > 0 and now + not_available_duration > item.start_timestamp:
            item.start_timestamp = now + not_available_duration
            log.info("%s will be isolated for %s ms", name, not_available_duration)
        item.reachable = reachable
        if not reachable:
            log.info("%s is unreachable, it will not be used until it's reachable", name)

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self._clock())

    def is_reachable(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.reachable

    def remove(self, name: str) -> None:
        self.items.pop(name, None)


def compute_not_available_duration(latency: int) -> int:
    """The isolation time of the highest latency bucket ``latency`` reaches."""
    for bound, duration in zip(reversed(LATENCY_MAX), reversed(NOT_AVAILABLE_DURATION), strict=True):
        if latency >= bound:
            return duration
    return 0


class MQFaultStrategy:
    """Queue selection for one send attempt, avoiding the broker of the previous attempt and isolated brokers.

    Examples:
        >>> strategy = MQFaultStrategy()
        >>> strategy.update_fault_item("broker-a", 20, isolation=True, reachable=True)
        >>> strategy.fault_tolerance.is_available("broker-a")
        False
    """

    def __init__(self, send_latency_fault_enable: bool = True, clock: Callable[[], int] = now_ms) -> None:
        self.send_latency_fault_enable = send_latency_fault_enable
        self.fault_tolerance = LatencyFaultTolerance(clock)

    def _available(self, mq: MessageQueue) -> bool:
        return self.fault_tolerance.is_available(mq.broker_name)

    def _reachable(self, mq: MessageQueue) -> bool:
        return self.fault_tolerance.is_reachable(mq.broker_name)

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None,
                                 reset_index: bool = False) -> MessageQueue | None:
        def not_last_broker(mq: MessageQueue) -> bool:
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            if reset_index:
                info.send_which_queue.reset()
            mq = (info.select_one_message_queue(self._available, not_last_broker)
                  or info.select_one_message_queue(self._reachable, not_last_broker))
            return mq or info.select_one_message_queue()
        return info.select_one_message_queue(not_last_broker) or info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency: int, *, isolation: bool,
                          reachable: bool) -> None:
        if self.send_latency_fault_enable:
            duration = compute_not_available_duration(ISOLATION_LATENCY if isolation else current_latency)
            self.fault_tolerance.update_fault_item(broker_name, current_latency, duration, reachable)
