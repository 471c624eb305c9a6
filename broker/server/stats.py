"""BrokerStats: message counts sampled every second, for GET_BROKER_RUNTIME_INFO (Java's StoreStatsService TPS
windows and BrokerStats' daily totals)."""

from __future__ import annotations

import collections
import datetime

from broker.server.consumer_manager import now_ms
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
