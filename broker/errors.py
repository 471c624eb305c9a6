"""The one error tree of rmq. Expected outcomes (a full queue, an offset out of range, a flush timeout) are status
values, not exceptions; what is raised here means something is wrong with an input, a file or a peer."""

from __future__ import annotations


class RmqError(Exception):
    """Root of every error rmq raises on purpose."""


class ConfigError(RmqError, ValueError):
    """A bad configuration key or value; the message names both."""


# -- store ------------------------------------------------------------------------------------------------------------


class StoreError(RmqError):
    pass


class CorruptRecord(StoreError):
    """Bytes at a CommitLog position are not a whole, well-formed record."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"no valid record at offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class StoreFull(StoreError):
    pass


class IllegalName(RmqError, ValueError):
    """A topic or group name that RocketMQ's rules reject."""
