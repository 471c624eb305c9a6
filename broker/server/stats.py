"""The broker's statistics: BrokerStats, message counts sampled every second for GET_BROKER_RUNTIME_INFO (Java's
StoreStatsService TPS windows and BrokerStats' daily totals), and BrokerStatsManager, the per-topic and per-group
items behind VIEW_BROKER_STATS_DATA (``mqadmin statsAll``)."""

from __future__ import annotations

import collections
import datetime
from dataclasses import dataclass

from broker.common.clock import now_ms
from broker.remoting.admin_bodies import BrokerStatsData, BrokerStatsItem
from broker.store.message_store import MessageStore


class BrokerStats:
    """Message counts sampled every second (Java's StoreStatsService TPS windows and BrokerStats' daily totals).

    Puts are counted from the ConsumeQueues (every stored message gets a unit), so nothing on the put path needs to
    report them; gets are what the pull processor reports through ``record_get``."""

    WINDOWS_S = (10, 60, 600)

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.boot_timestamp = now_ms()
        self._puts_sampled = 0  # puts up to the last sample; put_total adds what came since
        self.get_total = 0
        self._queue_total = self._units()
        self._boot_log_offset = store.max_phy_offset
        self._samples: collections.deque[tuple[int, int, int]] = collections.deque(maxlen=max(self.WINDOWS_S) + 1)
        self._day = datetime.date.today()
        self.morning = (0, 0)  # (puts, gets) at the last midnight, as BrokerStats.record keeps them
        self.yesterday_morning = (0, 0)

    def _units(self) -> int:
        return self.store.sum_max_offset_in_queues()

    def record_get(self, message_count: int) -> None:
        """Messages handed to consumers by a pull (StoreStatsService.getMessageTransferredMsgCount)."""
        self.get_total += message_count

    @property
    def put_total(self) -> int:
        """Messages stored since boot, current to this call (a deleted topic lowers the unit sum; it took no puts)."""
        return self._puts_sampled + max(0, self._units() - self._queue_total)

    def sample(self) -> None:
        units = self._units()
        self._puts_sampled += max(0, units - self._queue_total)
        self._queue_total = units
        self._samples.append((now_ms(), self.put_total, self.get_total))
        today = datetime.date.today()
        if today != self._day:
            self._day, self.yesterday_morning = today, self.morning
            self.morning = (self.put_total, self.get_total)

    def tps(self, which: int) -> str:
        """"10s 60s 600s" rates of puts (``which`` 1) or gets (2); a window without enough samples is empty."""
        parts = []
        for window in self.WINDOWS_S:
            if len(self._samples) <= window:
                parts.append("")
                continue
            last, first = self._samples[-1], self._samples[-1 - window]
            parts.append(repr((last[which] - first[which]) * 1000.0 / max(1, last[0] - first[0])))
        return " ".join(parts)

    def runtime(self) -> str:
        seconds = (now_ms() - self.boot_timestamp) // 1000
        days, rest = divmod(seconds, 86_400)
        return f"[ {days} days, {rest // 3600} hours, {rest % 3600 // 60} minutes, {rest % 60} seconds ]"

    def put_size_total(self) -> int:
        """CommitLog bytes appended since boot (file-end padding included)."""
        return max(0, self.store.max_phy_offset - self._boot_log_offset)


# -- BrokerStatsManager: per-topic and per-group items (mqadmin statsAll, VIEW_BROKER_STATS_DATA) --------------------

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # key: topic; messages stored by sends (value) in send requests (times)
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"  # key: topic; bytes appended
GROUP_GET_NUMS = "GROUP_GET_NUMS"  # key: "topic@group"; messages handed out by pulls
GROUP_GET_SIZE = "GROUP_GET_SIZE"  # key: "topic@group"; their bytes
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"  # key: the cluster name; messages stored by sends (no times, as Java)
BROKER_GET_NUMS = "BROKER_GET_NUMS"  # key: the cluster name; messages handed out by pulls
MINUTE_SAMPLES, HOUR_SAMPLES, DAY_SAMPLES = 7, 7, 25  # StatsItem: 10 s, 10 min and 1 h apart
SECONDS_S, MINUTES_S, HOURS_S = 10.0, 600.0, 3600.0  # StatsItemSet's sampling periods


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    timestamp: int
    times: int
    value: int


class StatsItem:
    """StatsItem: a value and a call count, snapshotted into three windows; a window's figures are its last snapshot
    minus its first. A new item's windows are empty (all zero) until its set samples it, and the first sample of a
    window is preceded by a zero one a period earlier, as in Java."""

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._windows: dict[str, collections.deque[CallSnapshot]] = {
            "minute": collections.deque(maxlen=MINUTE_SAMPLES), "hour": collections.deque(maxlen=HOUR_SAMPLES),
            "day": collections.deque(maxlen=DAY_SAMPLES)}

    def add(self, value: int, times: int) -> None:
        self.value += value
        self.times += times

    def sample(self, window: str, period_s: float) -> None:
        snapshots, now = self._windows[window], now_ms()
        if not snapshots:
            snapshots.append(CallSnapshot(now - int(period_s * 1000), 0, 0))
        snapshots.append(CallSnapshot(now, self.times, self.value))

    def snapshot(self, window: str) -> BrokerStatsItem:
        """computeStatsData: (sum, per second, per call) over the window."""
        snapshots = self._windows[window]
        if not snapshots:
            return BrokerStatsItem()
        first, last = snapshots[0], snapshots[-1]
        total, calls = last.value - first.value, last.times - first.times
        return BrokerStatsItem(total, total * 1000.0 / max(1, last.timestamp - first.timestamp),
                               total / calls if calls > 0 else 0.0)

    def data(self) -> BrokerStatsData:
        return BrokerStatsData(self.snapshot("minute"), self.snapshot("hour"), self.snapshot("day"))


class BrokerStatsManager:
    """BrokerStatsManager's items that rmq feeds: what sends stored per topic, what pulls handed out per topic and
    group, and the broker's totals. The send and pull processors add to them; the controller calls ``sample_*`` every
    10 s, 10 min and hour (StatsItemSet's periods); VIEW_BROKER_STATS_DATA reads one item."""

    STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, BROKER_PUT_NUMS, BROKER_GET_NUMS)

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self._sets: dict[str, dict[str, StatsItem]] = {name: {} for name in self.STATS_NAMES}

    def _add(self, stats_name: str, key: str, value: int, times: int) -> None:
        items = self._sets[stats_name]
        item = items.get(key)
        if item is None:
            item = items[key] = StatsItem()
        item.add(value, times)

    def record_put(self, topic: str, msg_num: int, wrote_bytes: int) -> None:
        """A send stored ``msg_num`` messages (one call; a batch is one call too)."""
        self._add(TOPIC_PUT_NUMS, topic, msg_num, 1)
        self._add(TOPIC_PUT_SIZE, topic, wrote_bytes, 1)
        self._add(BROKER_PUT_NUMS, self.cluster_name, msg_num, 0)

    def record_get(self, group: str, topic: str, msg_num: int, size: int) -> None:
        """A pull handed ``msg_num`` messages of ``topic`` to ``group``."""
        key = f"{topic}@{group}"
        self._add(GROUP_GET_NUMS, key, msg_num, 1)
        self._add(GROUP_GET_SIZE, key, size, 1)
        self._add(BROKER_GET_NUMS, self.cluster_name, msg_num, 0)

    def stats_data(self, stats_name: str, stats_key: str) -> BrokerStatsData | None:
        """The item's minute, hour and day figures; None when no such item exists (yet)."""
        item = self._sets.get(stats_name, {}).get(stats_key)
        return None if item is None else item.data()

    def group_get_tps(self, group: str, topic: str) -> float:
        """tpsGroupGetNums: messages per second that pulls handed ``group`` of ``topic`` over the last minute
        (GET_CONSUME_STATS's consumeTps sums it over the group's topics)."""
        item = self._sets[GROUP_GET_NUMS].get(f"{topic}@{group}")
        return 0.0 if item is None else item.snapshot("minute").tps

    def _sample(self, window: str, period_s: float) -> None:
        for items in self._sets.values():
            for item in items.values():
                item.sample(window, period_s)

    def sample_seconds(self) -> None:
        self._sample("minute", SECONDS_S)

    def sample_minutes(self) -> None:
        self._sample("hour", MINUTES_S)

    def sample_hours(self) -> None:
        self._sample("day", HOURS_S)
