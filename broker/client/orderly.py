"""Orderly push consumption (MessageListenerOrderly): Java's ConsumeMessageOrderlyService, the orderly parts of
RebalanceImpl / RebalancePushImpl (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ); ProcessQueue's orderly methods are
OrderlyProcessQueue in broker/client/offsets.py.

Order per queue rests on three locks:

* **The broker's lock** on each queue (RebalanceLockManager, 60 s unless renewed): a consumer locks a queue before
  it starts pulling it, renews every queue it holds every 20 s, and gives it up (offset committed first, then
  UNLOCK_BATCH_MQ) when a rebalance takes the queue away, so a consumer that joins midway can only start on a queue
  once the previous owner has finished with it. A queue it fails to lock is tried again 0.5 s later.
* **The client's view** of that lock: it counts as expired 30 s after the last successful lock; an expired or lost
  lock stops consumption of that queue until a new lock succeeds.
* **One consumer at a time per queue** (Java's MessageQueueLock): each queue is consumed by one task, message after
  message; different queues run in parallel, up to ``consume_thread_max``.

The listener returns SUCCESS (the batch is committed) or SUSPEND_CURRENT_QUEUE_A_MOMENT (the same messages come
back after ``suspend_current_queue_time_millis``, nothing behind them is delivered meanwhile); an exception or no
status counts as SUSPEND. A message suspended ``max_reconsume_times`` times (unlimited by default) is sent to the
group's retry topic and the queue moves on. With ``auto_commit`` off, COMMIT and ROLLBACK decide instead.

Examples:
    >>> consumer = PushConsumer("orders_group", namesrv_addr="127.0.0.1:9876")  # doctest: +SKIP
    >>> consumer.subscribe("Orders", "*")  # doctest: +SKIP
    >>> def listener(msgs, context):
    ...     for msg in msgs:
    ...         print(msg.queue_id, msg.queue_offset, msg.body)
    ...     return ConsumeOrderlyStatus.SUCCESS
    >>> consumer.register_message_listener_orderly(listener)  # doctest: +SKIP
    >>> await consumer.start()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from broker.client.message import Message, MessageExt, MessageQueue
from broker.client.offsets import MessageModel, OrderlyProcessQueue, compute_pull_from_where
from broker.client.trace import ConsumeReturnType
from broker.client.trace_hooks import consume_return_type
from broker.common.errors import MQBrokerError, MQClientError, RemotingError, broker_error
from broker.common.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
)
from broker.common.validation import retry_topic
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request

if TYPE_CHECKING:
    from broker.client.push_consumer import PushConsumer

log = logging.getLogger(__name__)

REBALANCE_LOCK_INTERVAL_S = 20.0  # ProcessQueue.REBALANCE_LOCK_INTERVAL: every held queue is locked again
FIRST_LOCK_DELAY_S = 1.0
LOCK_TIMEOUT_MS = 1000
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0  # rocketmq.client.maxTimeConsumeContinuously: then other queues get a turn
SUSPEND_CURRENT_QUEUE_TIME_MILLIS = 1000  # DefaultMQPushConsumer.suspendCurrentQueueTimeMillis
REMOVE_WAIT_S = 0.5  # tryRemoveOrderMessageQueue: how long a rebalance waits for the queue's consumer
REBALANCE_LATER_S = 0.5  # a queue that would not lock is asked for again this soon
UNLIMITED_RECONSUME_TIMES = 2**31 - 1


class ConsumeOrderlyStatus(Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"
    COMMIT = "COMMIT"  # with auto_commit off
    ROLLBACK = "ROLLBACK"  # with auto_commit off


_SUCCEEDED = (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT)  # what a trace calls success


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """What an orderly listener may set: turn ``auto_commit`` off (then COMMIT/ROLLBACK decide), and how long the
    queue waits after SUSPEND_CURRENT_QUEUE_A_MOMENT (-1: the consumer's 1 s)."""

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


MessageListenerOrderly = Callable[[list[MessageExt], ConsumeOrderlyContext],
                                  ConsumeOrderlyStatus | None | Awaitable[ConsumeOrderlyStatus | None]]


class OrderlyConsumeService:
    """ConsumeMessageOrderlyService for one PushConsumer, plus the queue locking its rebalance needs. The consumer
    calls ``lock_new_queue`` before it starts a queue, ``offset_to_pull`` before each pull, ``submit`` after each
    pull that found messages, ``remove_queue`` when a rebalance takes a queue away, and at shutdown ``stop``, then
    (offsets committed) ``unlock_all``."""

    def __init__(self, consumer: PushConsumer, listener: MessageListenerOrderly) -> None:
        self.consumer = consumer
        self.listener = listener
        self.clustering = consumer.config.message_model is MessageModel.CLUSTERING
        self._queue_locks: dict[MessageQueue, asyncio.Lock] = {}  # MessageQueueLock
        self._slots = asyncio.Semaphore(consumer.config.consume_thread_max)
        self._tasks: set[asyncio.Task[None]] = set()  # the lock renewal and delayed re-submits
        self._consuming: set[asyncio.Task[None]] = set()  # consume tasks
        self._stopped = False

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.clustering:
            self._spawn(self._lock_periodically(), "orderly-lock")

    async def stop(self) -> None:
        """Stop: no renewal, no re-submit; the listener calls in flight finish (each queue stops after the message
        in hand), so that the consumer can commit their offsets before ``unlock_all``."""
        self._stopped = True
        timers = list(self._tasks)
        for task in timers:
            task.cancel()
        await asyncio.gather(*timers, *self._consuming, return_exceptions=True)

    def _spawn(self, coro: Awaitable[None], name: str, tasks: set[asyncio.Task[None]] | None = None) -> None:
        owner = self._tasks if tasks is None else tasks
        task = asyncio.get_running_loop().create_task(coro, name=name)  # type: ignore[arg-type]
        owner.add(task)
        task.add_done_callback(owner.discard)

    def _later(self, delay_s: float, coro_fn: Callable[[], Awaitable[None]], name: str) -> None:
        async def run() -> None:
            await asyncio.sleep(delay_s)
            if not self._stopped:
                await coro_fn()

        self._spawn(run(), name)

    async def _lock_periodically(self) -> None:
        await asyncio.sleep(FIRST_LOCK_DELAY_S)
        while not self._stopped:
            try:
                await self.lock_all()
            except Exception:  # a periodic duty must survive one failure
                log.exception("lockMQPeriodically of group %s failed", self.consumer.group)
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL_S)

    # -- broker locks (RebalanceImpl.lock / lockAll / unlock / unlockAll) -----------------------------------------

    def _held_queues(self, *, dropped_too: bool = False) -> dict[str, list[MessageQueue]]:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq, pq in self.consumer.process_queue_table().items():
            if dropped_too or not pq.dropped:
                by_broker.setdefault(mq.broker_name, []).append(mq)
        return by_broker

    def _body(self, mqs: Iterable[MessageQueue], *, lock: bool) -> bytes:
        body: dict[str, object] = {"clientId": self.consumer.instance.client_id,
                                   "consumerGroup": self.consumer.group, "mqSet": [mq.to_json() for mq in mqs]}
        if lock:
            body["onlyThisBroker"] = False
        return json.dumps(body).encode()

    async def _lock_batch(self, broker_name: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ at the broker's master: the queues it granted."""
        instance = self.consumer.instance
        addr = await instance.broker_address_for(mqs[0])
        request = create_request(RequestCode.LOCK_BATCH_MQ, body=self._body(mqs, lock=True))
        response = await instance.invoke(addr, request, LOCK_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response.code, response.remark, addr)
        granted = json.loads(response.body or b"{}").get("lockOKMQSet") or []
        return {MessageQueue.from_json(item) for item in granted}

    async def lock(self, mq: MessageQueue) -> bool:
        if self._stopped:
            return False
        try:
            granted = await self._lock_batch(mq.broker_name, [mq])
        except (MQClientError, MQBrokerError, RemotingError, ValueError) as err:
            log.error("lockBatchMQ of %s failed: %s", mq, err)
            return False
        table = self.consumer.process_queue_table()
        for locked in granted:
            pq = table.get(locked)
            if isinstance(pq, OrderlyProcessQueue):
                pq.locked, pq.last_lock_timestamp = True, time.monotonic()
        ok = mq in granted
        log.info("message queue lock %s, %s %s", "OK" if ok else "Failed", self.consumer.group, mq)
        return ok

    async def lock_all(self) -> None:
        table = self.consumer.process_queue_table()
        for broker_name, mqs in self._held_queues().items():
            try:
                granted = await self._lock_batch(broker_name, mqs)
            except (MQClientError, MQBrokerError, RemotingError, ValueError) as err:
                log.error("lockBatchMQ of %s failed: %s", mqs, err)
                continue
            for mq in mqs:
                pq = table.get(mq)
                if not isinstance(pq, OrderlyProcessQueue):
                    continue
                if mq in granted:
                    pq.locked, pq.last_lock_timestamp = True, time.monotonic()
                else:
                    pq.locked = False
                    log.warning("the message queue locked Failed, Group: %s %s", self.consumer.group, mq)

    async def unlock(self, mq: MessageQueue) -> None:
        await self._unlock_batch([mq])

    async def unlock_all(self) -> None:
        """Give back every queue of the consumer's table (at shutdown all of them are dropped already)."""
        if not self.clustering:
            return
        for mqs in self._held_queues(dropped_too=True).values():
            await self._unlock_batch(mqs)
        for pq in self.consumer.process_queue_table().values():
            if isinstance(pq, OrderlyProcessQueue):
                pq.locked = False

    async def _unlock_batch(self, mqs: list[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ, waiting for the answer (Java's rebalance sends it oneway): the next owner must not
        find the queue still locked, nor its offset not yet committed."""
        instance = self.consumer.instance
        try:
            addr = await instance.broker_address_for(mqs[0])
            request = create_request(RequestCode.UNLOCK_BATCH_MQ, body=self._body(mqs, lock=False))
            await instance.invoke(addr, request, LOCK_TIMEOUT_MS)
        except (MQClientError, RemotingError) as err:
            log.error("unlockBatchMQ of %s failed: %s", mqs, err)

    # -- what the consumer's rebalance and pull loop call -----------------------------------------------------

    def new_process_queue(self) -> OrderlyProcessQueue:
        pq = OrderlyProcessQueue()
        pq.locked, pq.last_lock_timestamp = True, time.monotonic()  # RebalanceImpl: setLocked(true) on creation
        return pq

    async def lock_new_queue(self, mq: MessageQueue) -> bool:
        """A queue the rebalance assigned: locked at the broker first, or left for a rebalance 0.5 s later."""
        if not self.clustering:
            return True
        if await self.lock(mq):
            return True
        log.warning("doRebalance, %s, add a new mq failed, %s, because lock failed", self.consumer.group, mq)
        asyncio.get_running_loop().call_later(REBALANCE_LATER_S, self.consumer.instance.rebalance_immediately)
        return False

    async def offset_to_pull(self, mq: MessageQueue, pq: OrderlyProcessQueue, next_offset: int) -> int | None:
        """None while the queue is not locked (pull later); else where to pull, fixed from the broker's committed
        offset on the first pull after the lock (the previous owner may have consumed further)."""
        if not self.clustering:
            return next_offset
        if not pq.locked:
            return None
        if not pq.previously_locked:
            consumer = self.consumer
            next_offset = await compute_pull_from_where(consumer.instance, consumer.offset_store, mq,
                                                        consumer.config.consume_from_where,
                                                        consumer.consume_timestamp)
            pq.previously_locked = True
        return next_offset

    def submit(self, pq: OrderlyProcessQueue, mq: MessageQueue) -> None:
        """After a pull put messages into ``pq``: start its consume task unless one owns it already."""
        if pq.claim():
            self._spawn(self._consume(pq, mq), f"orderly-consume-{mq}", self._consuming)

    async def remove_queue(self, mq: MessageQueue, pq: OrderlyProcessQueue) -> None:
        """RebalancePushImpl.tryRemoveOrderMessageQueue: once the queue's consumer is idle (it stops after the
        message in hand, the queue being dropped), commit its offset, then unlock it. A consumer busy longer than
        0.5 s does not hold up the rebalance: the hand-over finishes in the background."""
        lock = self._queue_lock(mq)
        try:
            await asyncio.wait_for(lock.acquire(), REMOVE_WAIT_S)
        except TimeoutError:
            self._spawn(self._remove_when_idle(mq, lock), f"orderly-remove-{mq}")
            return
        try:
            await self._hand_over(mq)
        finally:
            lock.release()

    async def _remove_when_idle(self, mq: MessageQueue, lock: asyncio.Lock) -> None:
        async with lock:
            if mq not in self.consumer.process_queue_table():  # not ours again meanwhile
                await self._hand_over(mq)

    async def _hand_over(self, mq: MessageQueue) -> None:
        store = self.consumer.offset_store
        if self.clustering:
            try:
                await store.persist(mq, oneway=False)
            except (MQClientError, MQBrokerError, RemotingError) as err:
                log.warning("committing the offset of %s before unlocking it failed: %s", mq, err)
        store.remove_offset(mq)
        if self.clustering:
            await self.unlock(mq)

    def _queue_lock(self, mq: MessageQueue) -> asyncio.Lock:
        lock = self._queue_locks.get(mq)
        if lock is None:
            lock = self._queue_locks[mq] = asyncio.Lock()
        return lock

    # -- consuming (ConsumeMessageOrderlyService.ConsumeRequest) ----------------------------------------------

    async def _consume(self, pq: OrderlyProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            return
        async with self._queue_lock(mq), self._slots:
            if self.clustering and not (pq.locked and not pq.is_lock_expired()):
                if not pq.dropped:
                    self._try_lock_later_and_reconsume(mq, pq, 0.1)
                return
            await self._consume_in_turn(pq, mq)

    async def _consume_in_turn(self, pq: OrderlyProcessQueue, mq: MessageQueue) -> None:
        begin = time.monotonic()
        batch = max(1, self.consumer.config.consume_message_batch_max_size)
        while not pq.dropped and not self._stopped:
            if self.clustering and (not pq.locked or pq.is_lock_expired()):
                log.warning("the message queue not locked or its lock expired, so consume later, %s", mq)
                self._try_lock_later_and_reconsume(mq, pq, 0.01)
                return
            if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                self._submit_later(pq, mq, 10)
                return
            msgs = pq.take_messages(batch)
            if not msgs:
                return
            self.consumer.reset_retry_topic(msgs)
            context = ConsumeOrderlyContext(mq)
            trace = self.consumer.trace_dispatcher
            before = trace.consume_before(self.consumer.group, msgs) if trace is not None else None
            status, return_type = await self._call_listener(msgs, context)
            if trace is not None:
                trace.consume_after(before, len(msgs), status in _SUCCEEDED, return_type)
            if not await self._process_result(msgs, status, context, pq, mq):
                return

    async def _call_listener(self, msgs: list[MessageExt], context: ConsumeOrderlyContext
                             ) -> tuple[ConsumeOrderlyStatus, ConsumeReturnType]:
        """The listener's status (SUSPEND when it raised or returned none) and how it ended, for traces."""
        begin = time.monotonic()
        try:
            if inspect.iscoroutinefunction(self.listener):
                status = await self.listener(msgs, context)
            else:
                status = await asyncio.to_thread(self.listener, msgs, context)
                if inspect.isawaitable(status):
                    status = await status
        except Exception:
            log.exception("consumeMessage exception, group %s, queue %s, messages %s", self.consumer.group,
                          context.message_queue, [m.msg_id for m in msgs])
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, ConsumeReturnType.EXCEPTION
        if not isinstance(status, ConsumeOrderlyStatus):
            log.warning("consumeMessage Orderly returned %r, group %s: suspending the queue", status,
                        self.consumer.group)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, ConsumeReturnType.RETURNNULL
        # Java: only SUSPEND is FAILED; COMMIT and ROLLBACK keep SUCCESS (the trace's success says which)
        return status, consume_return_type(status is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, begin)

    async def _process_result(self, msgs: list[MessageExt], status: ConsumeOrderlyStatus,
                              context: ConsumeOrderlyContext, pq: OrderlyProcessQueue, mq: MessageQueue) -> bool:
        """processConsumeResult; True to go on with the next messages of the queue."""
        commit_offset = -1
        go_on = True
        suspend = status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if suspend or (status is ConsumeOrderlyStatus.ROLLBACK and not context.auto_commit):
            if status is ConsumeOrderlyStatus.ROLLBACK:
                pq.rollback()
                go_on = False
            elif await self._check_reconsume_times(msgs):
                pq.make_message_to_consume_again(msgs)
                go_on = False
            elif context.auto_commit:
                commit_offset = pq.commit()
            if not go_on:
                self._submit_later(pq, mq, context.suspend_current_queue_time_millis)
        elif context.auto_commit or status is ConsumeOrderlyStatus.COMMIT:
            if context.auto_commit and status is not ConsumeOrderlyStatus.SUCCESS:
                log.warning("the message queue consume result is illegal, we think you want to ack these message %s",
                            mq)
            commit_offset = pq.commit()
        if commit_offset >= 0:
            # Java skips this once the queue is dropped, and the next owner consumes the message again; here a
            # rebalance waits for the queue's consumer (``remove_queue``) and commits after this.
            self.consumer.offset_store.update_offset(mq, commit_offset)
        return go_on

    @property
    def max_reconsume_times(self) -> int:
        configured = self.consumer.config.max_reconsume_times
        return UNLIMITED_RECONSUME_TIMES if configured == -1 else configured

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True when the queue must wait and deliver ``msgs`` again; a message out of attempts goes to the retry
        topic instead (if that send fails, it waits with the others)."""
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= self.max_reconsume_times:
                msg.properties[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times)
                if not await self._send_message_back(msg):
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    async def _send_message_back(self, msg: MessageExt) -> bool:
        """ConsumeMessageOrderlyService.sendMessageBack: a plain send to %RETRY%group (so on to the DLQ)."""
        properties = dict(msg.properties)
        properties[PROPERTY_ORIGIN_MESSAGE_ID] = properties.get(PROPERTY_ORIGIN_MESSAGE_ID) or msg.msg_id
        properties[PROPERTY_RETRY_TOPIC] = msg.topic
        properties[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
        properties[PROPERTY_MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
        properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
        new = Message(retry_topic(self.consumer.group), msg.body, flag=msg.flag, properties=properties)
        new.delay_time_level = 3 + msg.reconsume_times
        try:
            await self.consumer.send_back_producer().send(new)
            return True
        except (MQClientError, MQBrokerError, RemotingError) as err:
            log.error("sendMessageBack of %s failed, group %s: %s", msg.msg_id, self.consumer.group, err)
            return False

    def _submit_later(self, pq: OrderlyProcessQueue, mq: MessageQueue, suspend_ms: int) -> None:
        if suspend_ms == -1:
            suspend_ms = SUSPEND_CURRENT_QUEUE_TIME_MILLIS
        delay_s = min(max(suspend_ms, 10), 30_000) / 1000

        async def resubmit() -> None:
            self._spawn(self._consume(pq, mq), f"orderly-consume-{mq}", self._consuming)

        self._later(delay_s, resubmit, f"orderly-later-{mq}")

    def _try_lock_later_and_reconsume(self, mq: MessageQueue, pq: OrderlyProcessQueue, delay_s: float) -> None:
        async def relock() -> None:
            locked = await self.lock(mq)
            self._submit_later(pq, mq, 10 if locked else 3000)

        self._later(delay_s, relock, f"orderly-relock-{mq}")
