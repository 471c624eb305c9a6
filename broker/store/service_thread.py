"""ServiceThread: one daemon thread that runs a service until shutdown (RocketMQ's common ServiceThread).

Rule 1: how the store's background threads start, wait, wake and stop is defined here; each service writes only its
``run`` (or, for a loop of rounds, its ``run_once`` and ``interval``).

A wake-up is remembered until the next wait consumes it, as in Java's ``hasNotified`` flag: a ``wakeup()`` that comes
while the thread is busy makes its next ``wait_for_running`` return at once, so no append goes unnoticed.

Examples:
    >>> class Ticker(ServiceThread):
    ...     name, interval = "Ticker", 0.5
    ...     def run_once(self) -> None:
    ...         print("tick")
    >>> ticker = Ticker()
    >>> ticker.start(); ticker.wakeup()  # doctest: +SKIP
    tick
    >>> ticker.shutdown()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ServiceThread:
    """A service in a daemon thread named ``name``. The default ``run`` calls ``run_once`` after every wake-up or
    ``interval`` seconds, logs what it raises and goes on after ``error_pause`` seconds; a service whose loop looks
    different overrides ``run`` and uses ``wait_for_running`` and ``is_stopped``."""

    name = "ServiceThread"
    interval = 1.0  # seconds between rounds when nobody wakes the thread
    error_pause = 0.0  # seconds to wait after a round that raised (a failing disk should not spin a core)

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    def make_stop(self) -> None:
        """Ask the thread to stop without waiting for it (Java's makeStop)."""
        self._stopped.set()

    def shutdown(self) -> None:
        """Stop the thread and wait until it has ended."""
        self.make_stop()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def is_stopped(self) -> bool:
        return self._stopped.is_set()

    # -- waiting and waking -------------------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """End the current (or the next) ``wait_for_running`` now."""
        if not self._wake.is_set():  # set() takes a lock and notifies: on the put path, that is not free
            self._wake.set()

    def wait_for_running(self, interval: float) -> None:
        """Wait until woken or ``interval`` seconds pass, whichever is first, and consume the wake-up."""
        self._wake.wait(interval)
        self._wake.clear()

    def pause(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless stopped first; True when stopped."""
        return self._stopped.wait(seconds)

    # -- the work -----------------------------------------------------------------------------------------------------

    def run(self) -> None:
        while not self.is_stopped():
            self.wait_for_running(self.interval)
            if self.is_stopped():
                return
            try:
                self.run_once()
            except Exception:  # one failed round must not end the service silently
                log.exception("%s failed", self.name)
                self.pause(self.error_pause)

    def run_once(self) -> None:
        raise NotImplementedError
