"""Quota: a byte budget per wall-clock second, as DLedger's utils Quota counts it.

Samples add up in the slot of the current second; a window of five slots (one per second, reused in turn) keeps the
last few seconds' counts, and a slot last written in another second starts again from the new sample. The leader's
EntryDispatcher samples what it pushes to a follower far behind and, once the second's budget is spent, waits the
rest of that second (``left_now_ms``).
"""

from __future__ import annotations

from broker.common.clock import now_ms

MIN_WINDOW = 5


class Quota:
    __slots__ = ("max", "window", "samples", "seconds")

    def __init__(self, max_per_second: int, window: int = MIN_WINDOW) -> None:
        self.max = max_per_second
        self.window = max(window, MIN_WINDOW)
        self.samples = [0] * self.window
        self.seconds = [-1] * self.window  # the second each slot counts

    def sample(self, value: int, at_ms: int | None = None) -> None:
        second = (now_ms() if at_ms is None else at_ms) // 1000
        slot = second % self.window
        if self.seconds[slot] != second:
            self.seconds[slot], self.samples[slot] = second, value
        else:
            self.samples[slot] += value

    def validate_now(self, at_ms: int | None = None) -> bool:
        """True when this second's samples reached the budget (DLedger's validateNow)."""
        second = (now_ms() if at_ms is None else at_ms) // 1000
        slot = second % self.window
        return self.seconds[slot] == second and self.samples[slot] >= self.max

    @staticmethod
    def left_now_ms(at_ms: int | None = None) -> int:
        """Milliseconds to the next second (DLedger's leftNow)."""
        now = now_ms() if at_ms is None else at_ms
        return (now // 1000 + 1) * 1000 - now
