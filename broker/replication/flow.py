"""FlowMonitor: the bytes an HA connection moved in the last whole second (RocketMQ's ha/FlowMonitor), which
GET_BROKER_HA_STATUS reports as transferredByteInSecond and ``mqadmin haStatus`` prints as #TransferSpeed(KB/s).

Java runs a thread per monitor that, every second, publishes the count and starts it again. Here the seconds are
counted lazily: each add or read first closes the seconds that have passed since the monitor started, so a master
with many slaves runs no extra threads and a read between two adds sees the same figure Java's thread would have
published (the count of the last second that ended, 0 when nothing moved in it). Flow control (Java's
haFlowControlEnable) is not implemented, so there is no ``canTransferMaxByteNum``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class FlowMonitor:
    """Bytes counted from any thread by ``add``; ``transferred_byte_in_second`` is what the last whole second held.

    Examples:
        >>> now = [0.0]
        >>> flow = FlowMonitor(clock=lambda: now[0])
        >>> flow.add(1000); flow.add(24)
        >>> flow.transferred_byte_in_second()  # the first second is not over yet
        0
        >>> now[0] = 1.5
        >>> flow.transferred_byte_in_second()
        1024
        >>> now[0] = 3.2  # a whole second with nothing in it
        >>> flow.transferred_byte_in_second()
        0
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._start = clock()
        self._second = 0  # the second being counted, from the monitor's start
        self._counting = 0  # bytes so far in that second (Java's transferredByte)
        self._last = 0  # bytes of the second before it (Java's transferredByteInSecond)

    def _roll(self) -> None:
        """Close the seconds that ended since the last call (the caller holds the lock)."""
        second = int(self._clock() - self._start)
        if second == self._second:
            return
        self._last = self._counting if second == self._second + 1 else 0
        self._second, self._counting = second, 0

    def add(self, count: int) -> None:
        """Java's addByteCountTransferred."""
        with self._lock:
            self._roll()
            self._counting += count

    def transferred_byte_in_second(self) -> int:
        with self._lock:
            self._roll()
            return self._last
