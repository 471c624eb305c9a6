"""ConfigManager: a table kept in one JSON file (RocketMQ's common ConfigManager), for the broker's topics,
subscription groups, consumer offsets and delay offsets and the NameServer's KV config.

Rule 1: how such a file is written (crash-safe, one writer at a time) and read back (falling back to what an
interrupted write left) is decided here, on top of ``broker.common.persist``; a manager only says what its file holds.

A subclass gives ``encode`` (the file's text), ``decode`` (the parsed file -> a value, without side effects: a file
that does not decode is set aside and its backup tried) and ``restore`` (that value into the tables).

Examples:
    >>> class Counter(ConfigManager[int]):
    ...     count = 0
    ...     def encode(self) -> str: return encode_json({"count": self.count})
    ...     def decode(self, data: Any) -> int: return int(data["count"])
    ...     def restore(self, loaded: int) -> None: self.count = loaded
    >>> counter = Counter("/tmp/counter.json")  # doctest: +SKIP
    >>> counter.count = 3; counter.persist()  # doctest: +SKIP
    >>> again = Counter("/tmp/counter.json"); again.load(), again.count  # doctest: +SKIP
    (True, 3)
"""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

from broker.common.persist import load_json, write_atomic

T = TypeVar("T")


class ConfigManager(Generic[T]):
    """``load`` and ``persist`` of one JSON file at ``path``; subclasses give ``encode``, ``decode`` and ``restore``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._persist_lock = threading.Lock()

    def config_file_path(self) -> str:
        return self.path

    def encode(self) -> str:
        """The file's text."""
        raise NotImplementedError

    def decode(self, data: Any) -> T:
        """The file's parsed JSON as the value ``restore`` takes; raises (ValueError, KeyError...) when it is not."""
        raise NotImplementedError

    def restore(self, loaded: T) -> None:
        """Put what ``decode`` read into the tables."""
        raise NotImplementedError

    def load(self) -> bool:
        """Read the file (or, after an interrupted write, its complete .tmp or its .bak) into the tables. False when
        there is none; MetadataCorrupt when it and its backups are unreadable."""
        loaded = load_json(self.config_file_path(), self.decode)
        if loaded is None:
            return False
        self.restore(loaded)
        return True

    def persist(self) -> None:
        """Write the file now; raises OSError. The text is taken inside the lock, so the last writer writes the
        latest."""
        with self._persist_lock:
            write_atomic(self.config_file_path(), self.encode())
