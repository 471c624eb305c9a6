"""Long polling: pulls that found nothing wait here until a message arrives for their queue or their suspend time
passes, then run once more and are answered (Java's PullRequestHoldService, ManyPullRequest, PullRequest and
NotifyMessageArrivingListener).

Arrivals are reported once per dispatch step (``MessageStore.add_arrival_listener``), on the dispatch thread or
on the thread that reads the dispatch process's reports. That thread only records them and, once per burst, hops to
the event loop; everything else runs on the loop, so the table of held requests needs no lock. A held request wakes
when:

- a message with a newer queue offset arrives for its topic@queue and passes its filter's tagsCode check;
- its suspend time is over (a timer per request, so the answer is on time, not up to 5 s late as in Java);
- the periodic ``check_hold_requests`` (Java's 5 s loop, shortPollingTimeMills with long polling off) finds a newer
  message: the backstop when arrival notifications are off.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.remoting.command import RemotingCommand
from broker.remoting.connection import RemotingConnection

if TYPE_CHECKING:
    from broker.server.consumer_manager import SubscriptionData
    from broker.store.dispatch import Arrivals
    from broker.store.get_message import MessageFilter
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]  # (topic, queueId): Java's "topic@queueId"


@dataclass(slots=True, eq=False)
class PullRequest:
    """A held PULL_MESSAGE request and what deciding its wake-up needs."""

    request: RemotingCommand
    connection: RemotingConnection
    timeout_millis: int
    suspend_timestamp: float  # time.monotonic() when it was held
    pull_from_this_offset: int
    subscription_data: SubscriptionData
    message_filter: MessageFilter
    timer: asyncio.TimerHandle | None = None

    @property
    def deadline(self) -> float:
        return self.suspend_timestamp + self.timeout_millis / 1000


Wakeup = Callable[[PullRequest], None]


class PullRequestHoldService:
    """Held pull requests by topic@queue. ``wakeup(pull_request)`` runs the request again and answers it.

    Examples:
        >>> hold = PullRequestHoldService(store, processor.execute_request_when_wakeup, loop)  # doctest: +SKIP
        >>> store.add_arrival_listener(hold.on_message_arriving)  # doctest: +SKIP
    """

    def __init__(self, store: MessageStore, wakeup: Wakeup, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self._wakeup = wakeup
        self._loop = loop
        self._table: dict[QueueKey, list[PullRequest]] = {}
        self._arrivals: list[tuple[QueueKey, int, list[int]]] = []  # filled by the dispatch thread
        self._arrival_lock = threading.Lock()
        self._drain_scheduled = False

    @property
    def held_count(self) -> int:
        return sum(len(requests) for requests in self._table.values())

    def suspend_pull_request(self, topic: str, queue_id: int, pull_request: PullRequest) -> None:
        """Hold ``pull_request`` until a message arrives or ``timeout_millis`` passes."""
        key = (topic, queue_id)
        self._table.setdefault(key, []).append(pull_request)
        pull_request.timer = self._loop.call_later(max(pull_request.timeout_millis, 0) / 1000, self._expire, key,
                                                   pull_request)
        # A message dispatched after the pull read the queue and before it was held here notified nobody.
        max_offset = self.store.max_offset_in_queue(topic, queue_id)
        if max_offset > pull_request.pull_from_this_offset:
            self._loop.call_soon(self.notify_message_arriving, topic, queue_id, max_offset, None)

    # -- arrivals -----------------------------------------------------------------------------------------------------

    def on_message_arriving(self, arrivals: Arrivals) -> None:
        """An arrival listener of the store's dispatch (``MessageStore.add_arrival_listener``): runs on the thread that
        dispatched or, with dispatch in its own process, on the thread that reads its reports, so it only records
        the arrivals and hops to the loop."""
        waited = [(key, max_offset, codes) for key, (max_offset, codes) in arrivals.items()
                  if key in self._table]  # a dict lookup is atomic under the GIL
        if not waited:
            return
        with self._arrival_lock:
            self._arrivals.extend(waited)
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain_arrivals)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            log.debug("messages arrived on %s after the event loop closed", [key for key, _, _ in waited])

    def _drain_arrivals(self) -> None:
        with self._arrival_lock:
            arrivals, self._arrivals = self._arrivals, []
            self._drain_scheduled = False
        grouped: dict[QueueKey, tuple[int, list[int]]] = {}
        for key, max_offset, tags_codes in arrivals:
            known = grouped.get(key)
            if known is None:
                grouped[key] = (max_offset, list(tags_codes))
            else:
                known[1].extend(tags_codes)
                grouped[key] = (max(known[0], max_offset), known[1])
        for (topic, queue_id), (max_offset, codes) in grouped.items():
            self.notify_message_arriving(topic, queue_id, max_offset, codes)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_codes: Sequence[int] | None) -> None:
        """Wake the requests on topic@queue that a message beyond their offset satisfies (``tags_codes`` None: any
        message does) or whose time is up; keep the others."""
        requests = self._table.pop((topic, queue_id), None)
        if not requests:
            return
        now = time.monotonic()
        keep: list[PullRequest] = []
        for pull_request in requests:
            newest = max_offset
            if newest <= pull_request.pull_from_this_offset:
                newest = self.store.max_offset_in_queue(topic, queue_id)
            if newest > pull_request.pull_from_this_offset and self._matches(pull_request, tags_codes):
                self._wake(pull_request)
            elif now >= pull_request.deadline:
                self._wake(pull_request)
            else:
                keep.append(pull_request)
        if keep:
            self._table.setdefault((topic, queue_id), []).extend(keep)

    @staticmethod
    def _matches(pull_request: PullRequest, tags_codes: Sequence[int] | None) -> bool:
        if tags_codes is None:
            return True
        matched = pull_request.message_filter.is_matched_by_consume_queue
        return any(matched(code) for code in tags_codes)

    def check_hold_requests(self) -> None:
        """Java's periodic check: every held queue against its current max offset, any message matching."""
        for topic, queue_id in list(self._table):
            self.notify_message_arriving(topic, queue_id, self.store.max_offset_in_queue(topic, queue_id), None)

    # -- waking -------------------------------------------------------------------------------------------------------

    def _expire(self, key: QueueKey, pull_request: PullRequest) -> None:
        requests = self._table.get(key)
        if requests is None or pull_request not in requests:
            return  # already woken
        requests.remove(pull_request)
        if not requests:
            del self._table[key]
        self._wake(pull_request)

    def _wake(self, pull_request: PullRequest) -> None:
        if pull_request.timer is not None:
            pull_request.timer.cancel()
            pull_request.timer = None
        try:
            self._wakeup(pull_request)
        except Exception:
            log.exception("waking the pull of %s from %s failed", pull_request.request.ext_fields,
                          pull_request.connection.remote_address)

    def close(self) -> None:
        """Forget every held request without answering it (the broker is stopping)."""
        for requests in self._table.values():
            for pull_request in requests:
                if pull_request.timer is not None:
                    pull_request.timer.cancel()
        self._table.clear()
