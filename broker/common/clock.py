"""Milliseconds, the unit of RocketMQ's timestamps and timeouts: the wall clock (Java's currentTimeMillis, what goes
into stored records and on the wire) and a monotonic one (intervals a clock step must not stretch or cut)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds: only differences mean something."""
    return time.monotonic_ns() // 1_000_000
