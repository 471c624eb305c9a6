"""Consume progress, shared by the lite pull and push consumers: ProcessQueue (what a queue has fetched and not yet
acknowledged), the offset stores (CLUSTERING: the broker's, BROADCASTING: a local file), and where a group starts
on a queue it has no offset for (consumeFromWhere).

Rule 1: the offset a consumer commits is decided here: the lowest offset still held by the ProcessQueue, or one past
the highest fetched once everything is acknowledged (ProcessQueue.removeMessage), so a crash re-delivers rather than
loses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterable
from enum import Enum
from pathlib import Path

from broker.client.instance import ClientConfig, MQClientInstance, client_instance
from broker.client.message import MessageExt, MessageQueue
from broker.common.errors import MQClientError, OffsetNotFound
from broker.common.persist import write_atomic
from broker.common.validation import RETRY_GROUP_TOPIC_PREFIX
from broker.remoting.codes import ResponseCode
from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)


class MessageModel(Enum):
    CLUSTERING = "CLUSTERING"  # each message to one client of the group; offsets kept by the broker
    BROADCASTING = "BROADCASTING"  # each message to every client; offsets kept in a local file


class ConsumeFromWhere(Enum):
    """Where a group starts on a queue it has no committed offset for."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ReadOffsetType(Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


OFFSET_NOT_FOUND = -1  # readOffset: the store has none
OFFSET_STORE_ERROR = -2  # readOffset: the store could not be asked


# -- ProcessQueue ------------------------------------------------------------------------------------------------------


REBALANCE_LOCK_MAX_LIVE_TIME_S = 30.0  # ProcessQueue.REBALANCE_LOCK_MAX_LIVE_TIME (client side; the broker's is 60 s)


class ProcessQueue:
    """The messages of one queue fetched but not yet acknowledged (impl/consumer/ProcessQueue). The offset to commit
    is the lowest one still here, or one past the highest ever put once all are acknowledged."""

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}  # by queue offset, kept in offset order
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.last_pull_timestamp = 0
        self.last_consume_timestamp = 0

    @property
    def msg_count(self) -> int:
        return len(self._msgs)

    def put_messages(self, msgs: Iterable[MessageExt]) -> None:
        resort = False
        for msg in msgs:
            if msg.queue_offset not in self._msgs:
                resort |= bool(self._msgs) and msg.queue_offset < self.queue_offset_max
                self._msgs[msg.queue_offset] = msg
                self.msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, msg.queue_offset)
        if resort:  # pulls come in offset order; this only happens after a reset to an earlier offset
            self._msgs = dict(sorted(self._msgs.items()))

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Acknowledge ``msgs``; returns the offset now safe to commit, -1 when nothing was held."""
        if not self._msgs:
            return -1
        for msg in msgs:
            if self._msgs.pop(msg.queue_offset, None) is not None:
                self.msg_size -= len(msg.body)
        return next(iter(self._msgs)) if self._msgs else self.queue_offset_max + 1

    def contains(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self._msgs

    def cached_offsets(self) -> list[int]:
        """The queue offsets of the messages held, lowest first (Java's msgTreeMap keys)."""
        return list(self._msgs)

    def max_span(self) -> int:
        if not self._msgs:
            return 0
        return self.queue_offset_max - next(iter(self._msgs))

    def clear(self) -> None:
        self._msgs.clear()
        self.msg_size = 0
        self.queue_offset_max = 0


class OrderlyProcessQueue(ProcessQueue):
    """A ProcessQueue that hands messages out in offset order and commits only what the listener finished: the
    messages taken (``take_messages``) stay counted until ``commit`` (or come back with ``rollback``)."""

    def __init__(self) -> None:
        super().__init__()
        self._taken: dict[int, MessageExt] = {}  # Java's consumingMsgOrderlyTreeMap
        self.consuming = False  # a consume task owns the queue's messages
        self.locked = False
        self.last_lock_timestamp = 0.0  # time.monotonic() of the last lock the broker granted
        self.previously_locked = False  # the pull has fixed its offset from the broker since the lock

    @property
    def msg_count(self) -> int:
        return len(self._msgs) + len(self._taken)

    def max_span(self) -> int:
        return 0  # orderly consumption has no span limit (consumeConcurrentlyMaxSpan)

    def claim(self) -> bool:
        """True when messages wait and no consume task owns them yet: the caller must start one."""
        if self._msgs and not self.consuming:
            self.consuming = True
            return True
        return False

    def take_messages(self, count: int) -> list[MessageExt]:
        taken = []
        while self._msgs and len(taken) < count:
            offset = next(iter(self._msgs))
            msg = self._taken[offset] = self._msgs.pop(offset)
            taken.append(msg)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """Forget the taken messages; the offset after the last of them, -1 if none was taken."""
        if not self._taken:
            return -1
        offset = max(self._taken) + 1
        self.msg_size -= sum(len(m.body) for m in self._taken.values())
        self._taken.clear()
        return offset

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        for msg in msgs:
            if self._taken.pop(msg.queue_offset, None) is not None:
                self._msgs[msg.queue_offset] = msg
        self._msgs = dict(sorted(self._msgs.items()))

    def rollback(self) -> None:
        self.make_message_to_consume_again(list(self._taken.values()))

    def taken_offsets(self) -> list[int]:
        """The queue offsets of the messages the listener has and has not finished, lowest first."""
        return sorted(self._taken)

    def is_lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME_S


# -- offset stores -----------------------------------------------------------------------------------------------------


class RemoteBrokerOffsetStore:
    """CLUSTERING offsets (consumer/store/RemoteBrokerOffsetStore): kept in memory, committed to each queue's broker
    with UPDATE_CONSUMER_OFFSET, read back with QUERY_CONSUMER_OFFSET."""

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        pass

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if increase_only and self.offset_table.get(mq, -1) >= offset:
            return
        self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        if kind is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if kind is ReadOffsetType.READ_FROM_MEMORY:
                return OFFSET_NOT_FOUND
        try:
            offset = await self.instance.query_consumer_offset(self.group, mq)
        except OffsetNotFound:
            return OFFSET_NOT_FOUND
        except Exception as err:
            log.warning("fetching the consume offset of %s for %s failed: %s", mq, self.group, err)
            return OFFSET_STORE_ERROR
        self.offset_table[mq] = offset
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Commit the offsets of ``mqs``; oneway (Java's way, for the periodic commit) or waiting for each answer."""
        for mq in mqs:
            offset = self.offset_table.get(mq)
            if offset is not None:
                await self.persist(mq, offset, oneway=oneway)

    async def persist(self, mq: MessageQueue, offset: int | None = None, *, oneway: bool = True) -> None:
        offset = self.offset_table.get(mq) if offset is None else offset
        if offset is None:
            return
        if not oneway:  # the caller waits for the answer, and hears of a failure
            await self.instance.update_consumer_offset(self.group, mq, offset, oneway=False)
            return
        try:
            await self.instance.update_consumer_offset(self.group, mq, offset, oneway=True)
        except Exception as err:
            log.warning("committing offset %s of %s for %s failed: %s", offset, mq, self.group, err)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)


def local_offset_store_dir() -> Path:
    """rocketmq.client.localOffsetStoreDir: ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR, else ~/.rocketmq_offsets."""
    return Path(os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR") or Path.home() / ".rocketmq_offsets")


class LocalFileOffsetStore:
    """BROADCASTING offsets (consumer/store/LocalFileOffsetStore): every client keeps its own, in
    ``<dir>/<clientId>/<group>/offsets.json``, replaced atomically. The file is our own JSON
    (``{"offsetTable": [{"brokerName", "queueId", "topic", "offset"}]}``), not Java's (fastjson object keys)."""

    def __init__(self, client_id: str, group: str, directory: Path | None = None) -> None:
        self.path = (directory or local_offset_store_dir()) / client_id / group / "offsets.json"
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return
        for item in data.get("offsetTable", ()):
            self.offset_table[MessageQueue.from_json(item)] = int(item["offset"])

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if increase_only and self.offset_table.get(mq, -1) >= offset:
            return
        self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        if kind is not ReadOffsetType.READ_FROM_STORE and mq in self.offset_table:
            return self.offset_table[mq]
        if kind is ReadOffsetType.READ_FROM_MEMORY:
            return OFFSET_NOT_FOUND
        await self.load()
        return self.offset_table.get(mq, OFFSET_NOT_FOUND)

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        wanted = set(mqs)
        table = [{**mq.to_json(), "offset": offset} for mq, offset in sorted(self.offset_table.items())
                 if mq in wanted]
        text = json.dumps({"offsetTable": table}, indent=1)
        await asyncio.get_running_loop().run_in_executor(None, _write_file, str(self.path), text)

    async def persist(self, mq: MessageQueue, offset: int | None = None, *, oneway: bool = True) -> None:
        await self.persist_all(self.offset_table)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)


OffsetStore = RemoteBrokerOffsetStore | LocalFileOffsetStore


def consumer_setup(group: str, message_model: MessageModel, namesrv_addr: str | None,
                   client_config: ClientConfig | None, instance: MQClientInstance | None,
                   credentials: SessionCredentials | None = None) -> tuple[MQClientInstance, OffsetStore]:
    """What both consumers make first: their client instance, unless given one (a clustering consumer's instance
    name is its pid; a broadcasting one keeps ip@DEFAULT, which names its offset file), and the offset store of
    their message model (the brokers', or a local file)."""
    instance = client_instance(client_config, namesrv_addr, instance, credentials,
                               pid_instance_name=message_model is MessageModel.CLUSTERING)
    if message_model is MessageModel.CLUSTERING:
        return instance, RemoteBrokerOffsetStore(instance, group)
    return instance, LocalFileOffsetStore(instance.client_id, group)


def _write_file(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, text)


def parse_consume_timestamp(text: str) -> int:
    """UtilAll.parseDate(consumeTimestamp, "yyyyMMddHHmmss") in local time, as milliseconds."""
    return int(time.mktime(time.strptime(text, "%Y%m%d%H%M%S")) * 1000)


def default_consume_timestamp() -> str:
    """Java's default consumeTimestamp: half an hour ago."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - 1800))


async def compute_pull_from_where(instance: MQClientInstance, store: OffsetStore, mq: MessageQueue,
                                  where: ConsumeFromWhere, consume_timestamp: str) -> int:
    """RebalancePushImpl.computePullFromWhereWithException: the committed offset, else where the group starts."""
    last = await store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    if last >= 0:
        return last
    if last != OFFSET_NOT_FOUND:
        raise MQClientError(ResponseCode.QUERY_NOT_FOUND, "Failed to query consume offset from offset store")
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not retry:
        return await instance.search_offset(mq, parse_consume_timestamp(consume_timestamp))
    if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET and retry:
        return 0
    return await instance.get_max_offset(mq)
