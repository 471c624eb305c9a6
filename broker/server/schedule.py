"""ScheduleMessageService: delayed delivery through SCHEDULE_TOPIC_XXXX (Java's broker/schedule/ScheduleMessageService
and the put hook HookUtils.handleScheduleMessage).

Rule 1: the delay-level arithmetic (level <-> queue id, the deliver timestamp kept as the ConsumeQueue tagsCode) and
the shape of config/delayOffset.json are defined here and nowhere else.

How a delayed message travels, exactly as on Apache's broker (so either broker can take over the other's store)::

    send (DELAY=2) ----> handle_schedule_message: topic SCHEDULE_TOPIC_XXXX, queue 2-1, REAL_TOPIC/REAL_QID added
                         |  stored; dispatch writes the CQ unit with tagsCode = storeTimestamp + delay(level 2)
                         v
    one task per level:  reads its queue from the delay offset; a unit whose tagsCode has passed is
                         "timed up" (message_time_up: real topic and queue, the stored properties kept verbatim,
                         DELAY included, as Java's copy keeps them) and put again; the offset moves past it

A level's task sleeps until its head unit is due (units parked behind it are due later), or, with nothing parked,
until dispatch reports a unit of its queue (``on_arrivals``, a store arrival listener): an idle broker runs none of
them, where Java's 18 timers and our former 100 ms polls woke ten times a second each.

The offsets (the next unit to deliver, per level) are written to config/delayOffset.json every
``flushDelayOffsetInterval`` (10 s) and at stop; Java's DelayOffsetSerializeWrapper, fastjson's pretty format:
``{"dataVersion":{...},"offsetTable":{1:0,2:5}}``.

Two departures from Java, both about not delivering twice or never:
* After a crash the persisted offsets can be up to 10 s behind. At load, units past a level's offset that are already
  due are checked against the index: one whose UNIQ_KEY is already stored in its real topic after the scheduled
  record was delivered before the crash, and is skipped (Java delivers it again). Needs messageIndexEnable.
* A put that can never succeed (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED) is logged and skipped instead of retried
  forever, and FLUSH_DISK_TIMEOUT counts as delivered (the record is stored; Java puts it again).

Examples:
    >>> service = ScheduleMessageService(store, controller.put_messages, (1000, 5000), "/tmp/store")  # doctest: +SKIP
    >>> store.set_tags_code_hook(service.tags_code_of)  # before store.start(): rebuilt units need it too
    >>> service.load(); await service.start()  # doctest: +SKIP
    >>> msg = service.handle_schedule_message(StoreMessage("T", 0, b"x", {"DELAY": "2"}))  # doctest: +SKIP
    >>> msg.topic, msg.queue_id, msg.properties["REAL_TOPIC"]  # doctest: +SKIP
    ('SCHEDULE_TOPIC_XXXX', 1, 'T')
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from broker.common.clock import now_ms
from broker.common.config_manager import ConfigManager
from broker.common.errors import CorruptRecord
from broker.common.fastjson import DataVersion, encode_json_pretty
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TIMER_PROPERTIES,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    transaction_type,
)
from broker.common.persist import write_atomic
from broker.common.record import MessageRecord, decode_record
from broker.common.validation import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from broker.server.message_properties import java_ordered
from broker.server.metadata.paths import delay_offset_path
from broker.store.commit_log import StoreMessage
from broker.store.consume_queue import ConsumeQueue, is_blank
from broker.store.dispatch import Arrivals, TaggedRecord, default_tags_code
from broker.store.layout import CqUnit
from broker.store.message_store import MessageStore
from broker.store.results import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = RMQ_SYS_SCHEDULE_TOPIC
DELAY_FOR_A_WHILE_S = 0.1  # Java's DELAY_FOR_A_WHILE: the pause after a failed put
MAX_SLEEP_S = 1.0  # a level waiting for its head unit re-reads the clock at least this often
# A level sleeps at least this long, so messages due within it go out in one put: under a steady stream of due
# messages this cuts the CPU per delivery by about 40 % for at most 10 ms of lag (Java polls every 100 ms).
COALESCE_S = 0.01
FLUSH_DELAY_OFFSET_INTERVAL_MS = 10_000  # MessageStoreConfig.flushDelayOffsetInterval
DELAY_OFFSET_UPDATE_VERSION_STEP = 200  # BrokerConfig.delayOffsetUpdateVersionStep
DELIVER_BATCH_MAX = 32  # due messages put together (Java puts them one by one)
# Puts that fail the same way however often they are tried.
_HOPELESS = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
_RECORD_GROWTH = 256  # bytes a timed-up record may outgrow its scheduled one by (a longer topic name)

PutMessages = Callable[[list[StoreMessage]], Awaitable[PutMessageResult]]


def delay_level_to_queue_id(delay_level: int) -> int:
    return delay_level - 1


def delay_time_level(properties: dict[str, str]) -> int:
    """Message.getDelayTimeLevel: the DELAY property, 0 when absent (or, unlike Java's exception, not a number)."""
    text = properties.get(PROPERTY_DELAY_TIME_LEVEL)
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


@dataclasses.dataclass(frozen=True, slots=True)
class DeliverTimeTagsCode:
    """The ConsumeQueue tagsCode (CommitLog.checkMessageAndReturnSize): for a scheduled record its deliver timestamp,
    else the tag's hash. A value named by its import path, not a bound method: dispatch may run in its own process
    (dispatchMode=PROCESS), which receives the hook pickled."""

    delay_level_table: dict[int, int]  # level -> delay in milliseconds

    def compute_deliver_timestamp(self, delay_level: int, store_timestamp: int) -> int:
        millis = self.delay_level_table.get(delay_level)
        return store_timestamp + (millis if millis is not None else 1000)

    def __call__(self, record: TaggedRecord) -> int:
        if record.topic == SCHEDULE_TOPIC and PROPERTY_DELAY_TIME_LEVEL in record.properties:
            level = min(delay_time_level(record.properties), len(self.delay_level_table))
            if level > 0:
                return self.compute_deliver_timestamp(level, record.store_timestamp)
        return default_tags_code(record)


# What delayOffset.json holds: delay level -> next ConsumeQueue offset to deliver, and the DataVersion.
DelayOffsets = tuple[dict[int, int], DataVersion]


class ScheduleMessageService(ConfigManager[DelayOffsets]):
    """Parks delayed messages (``handle_schedule_message``) and delivers them when due (one asyncio task per level).

    ``delay_levels`` holds milliseconds per level (BrokerConfig.delay_level_table()); ``put_messages`` stores
    timed-up messages (BrokerController.put_messages, so SYNC_FLUSH puts leave the loop).
    """

    def __init__(self, store: MessageStore, put_messages: PutMessages, delay_levels: Sequence[int],
                 store_path_root_dir: str, *,
                 flush_delay_offset_interval_ms: int = FLUSH_DELAY_OFFSET_INTERVAL_MS) -> None:
        super().__init__(delay_offset_path(store_path_root_dir))
        self.store = store
        self.put_messages = put_messages
        self.delay_level_table = {level: millis for level, millis in enumerate(delay_levels, start=1)}
        self.tags_code_of = DeliverTimeTagsCode(self.delay_level_table)  # the store's dispatch hook
        self.flush_interval_s = flush_delay_offset_interval_ms / 1000
        self.offset_table: dict[int, int] = {}  # level -> next ConsumeQueue offset to deliver
        self.data_version = DataVersion.new()
        self._version_change_counter = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._persist_task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeups: dict[int, asyncio.Event] = {}  # level -> set when its queue got units, or at stop
        self._timed: set[int] = set()  # levels asleep until their head is due: units behind it change nothing
        self.started = False

    @property
    def max_delay_level(self) -> int:
        return len(self.delay_level_table)

    # -- the put hook and the tagsCode ------------------------------------------------------------------------------

    def handle_schedule_message(self, msg: StoreMessage) -> StoreMessage:
        """HookUtils.handleScheduleMessage: a non-transactional or committed message with DELAY > 0 becomes a
        SCHEDULE_TOPIC_XXXX message on queue level-1 (the level capped at the highest), its real topic and queue
        kept in REAL_TOPIC / REAL_QID. Anything else comes back unchanged, a transaction half message too (Java
        parks one that still carries DELAY and discards it when due; its clients clear DELAY first)."""
        if (transaction_type(msg.sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
                or msg.topic == RMQ_SYS_TRANS_HALF_TOPIC):
            return msg
        level = delay_time_level(msg.properties)
        if level <= 0:
            return msg
        props = {k: val for k, val in msg.properties.items() if k not in TIMER_PROPERTIES}
        if level > self.max_delay_level:
            level = self.max_delay_level
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        # Java writes the properties string again from its HashMap, so the new keys land in hash order.
        return dataclasses.replace(msg, topic=SCHEDULE_TOPIC, queue_id=delay_level_to_queue_id(level),
                                   properties=java_ordered(props))

    def compute_deliver_timestamp(self, delay_level: int, store_timestamp: int) -> int:
        return self.tags_code_of.compute_deliver_timestamp(delay_level, store_timestamp)

    # -- delivery ---------------------------------------------------------------------------------------------------

    @staticmethod
    def message_time_up(record: MessageRecord) -> StoreMessage | None:
        """ScheduleMessageService.messageTimeUp: the scheduled record as a message of its real topic and queue.
        Its properties string is stored as it was (Java clears DELAY only from the map, after building the string).
        None when REAL_TOPIC / REAL_QID are missing or bad."""
        props = record.properties
        try:
            topic, queue_id = props[PROPERTY_REAL_TOPIC], int(props[PROPERTY_REAL_QUEUE_ID])
        except (KeyError, ValueError):
            return None
        return StoreMessage(topic, queue_id, record.body or b"", dict(props), record.flag, record.sys_flag,
                            record.born_timestamp, record.born_host, record.reconsume_times)

    async def start(self) -> None:
        """One delivery task per level, and the periodic persist. ``load()`` first; ``on_arrivals`` must be one of
        the store's arrival listeners (BrokerController adds it)."""
        if self.started:
            return
        self.started = True
        self._loop = loop = asyncio.get_running_loop()
        self._wakeups = {level: asyncio.Event() for level in self.delay_level_table}
        for level in self.delay_level_table:
            self._tasks.append(loop.create_task(self._deliver_level(level), name=f"schedule-level-{level}"))
        self._persist_task = loop.create_task(self._persist_periodically(), name="schedule-persist")

    async def stop(self) -> None:
        """Stop delivering and persist the offsets. The level tasks are woken, not cancelled: a put in flight
        (a SYNC_FLUSH put runs on in its thread whatever happens to the task) ends with its offset recorded."""
        if not self.started:
            return
        self.started = False
        for wakeup in self._wakeups.values():
            wakeup.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._persist_task is not None:
            self._persist_task.cancel()
            await asyncio.gather(self._persist_task, return_exceptions=True)
        self.persist()

    def on_arrivals(self, arrivals: Arrivals) -> None:
        """A store arrival listener: wake the levels whose queues got units. Runs on the thread that dispatched (or
        reads the dispatch process's reports), so it only hops to the loop, once per step that parked something."""
        levels = [queue_id + 1 for topic, queue_id in arrivals if topic == SCHEDULE_TOPIC]
        loop = self._loop
        if not levels or loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._wake, levels)
        except RuntimeError:  # the loop is closed: nothing delivers any more
            pass

    def _wake(self, levels: list[int]) -> None:
        for level in levels:
            wakeup = self._wakeups.get(level)
            if wakeup is not None and level not in self._timed:
                wakeup.set()

    async def _deliver_level(self, level: int) -> None:
        """DeliverDelayedMessageTimerTask, as one loop: deliver what is due, then sleep until the head is due, or
        with nothing parked until a unit arrives."""
        offset = self.offset_table.get(level, 0)
        wakeup = self._wakeups[level]
        while self.started:
            wakeup.clear()  # before reading the queue: a unit dispatched from here on wakes the wait below
            try:
                offset, wait_s = await self._deliver_due(level, offset)
            except Exception:
                log.exception("delivering delay level %d failed at offset %d", level, offset)
                wait_s = 10.0  # Java's DELAY_FOR_A_PERIOD
            if wait_s is None:
                await wakeup.wait()
                continue
            # asyncio.timeout, not wait_for: on 3.11 wait_for makes a task per pause
            self._timed.add(level)
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_s):
                        await wakeup.wait()
            finally:
                self._timed.discard(level)

    async def _deliver_due(self, level: int, offset: int) -> tuple[int, float | None]:
        """Deliver the due units from ``offset``; returns the next offset and how long to sleep (None: until a unit
        arrives)."""
        cq = self.store.get_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
        if cq is None:
            return offset, None
        offset = self._corrected(cq, level, offset)
        while self.started:
            units = cq.iter_units(offset, DELIVER_BATCH_MAX)
            if not units:
                return offset, None
            batch, wait_ms = self._due_batch(level, offset, units)
            if not batch:
                if self.offset_table.get(level) != offset:  # Java records the waiting offset too
                    self.update_offset(level, offset)
                return offset, min(max(wait_ms / 1000, COALESCE_S), MAX_SLEEP_S)
            delivered = await self._deliver(batch)
            if delivered == 0:
                return offset, DELAY_FOR_A_WHILE_S
            offset += delivered
            self.update_offset(level, offset)
            await asyncio.sleep(0)  # ASYNC_FLUSH puts do not suspend: let sends and pulls in between batches
        return offset, DELAY_FOR_A_WHILE_S

    def _corrected(self, cq: ConsumeQueue, level: int, offset: int) -> int:
        corrected = min(max(offset, cq.min_offset), cq.max_offset)
        if corrected != offset:
            log.error("schedule CQ offset invalid: offset=%d, cqMinOffset=%d, cqMaxOffset=%d, queueId=%d",
                      offset, cq.min_offset, cq.max_offset, cq.queue_id)
            self.update_offset(level, corrected)
        return corrected

    def _due_batch(self, level: int, offset: int,
                   units: list[CqUnit]) -> tuple[list[tuple[int, StoreMessage | None]], int]:
        """The leading due units of ``units`` as (offset, timed-up message or None to skip), and when nothing is
        due, the milliseconds until the first is."""
        now = now_ms()
        budget = self.store.config.mapped_file_size_commit_log // 4
        batch: list[tuple[int, StoreMessage | None]] = []
        for i, unit in enumerate(units):
            countdown = self._correct_deliver_timestamp(level, now, unit.tags_code) - now
            if countdown > 0:
                return batch, countdown
            budget -= unit.size + _RECORD_GROWTH
            if batch and budget < 0:
                break
            batch.append((offset + i, None if is_blank(unit) else self._timed_up(unit)))
        return batch, 0

    def _correct_deliver_timestamp(self, level: int, now: int, deliver_timestamp: int) -> int:
        """A deliver time further away than the level's delay (the clock went back) means now."""
        return now if deliver_timestamp > now + self.delay_level_table[level] else deliver_timestamp

    def _timed_up(self, unit: CqUnit) -> StoreMessage | None:
        """The unit's record (read by offset and size, as Java's lookMessageByOffset(offsetPy, sizePy)) timed up."""
        data = self.store.select_one_message(unit.commit_log_offset, unit.size)
        try:
            record = decode_record(data) if data is not None else None
        except CorruptRecord as err:
            log.error("scheduled message at commit log offset %d does not decode (%s); skipped",
                      unit.commit_log_offset, err)
            return None
        if record is None:
            log.warning("scheduled message at commit log offset %d is gone; skipped", unit.commit_log_offset)
            return None
        msg = self.message_time_up(record)
        if msg is None:
            log.error("scheduled message %s has no valid REAL_TOPIC/REAL_QID (%s); discarded", record.msg_id,
                      record.properties)
        elif msg.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error("[BUG] the real topic of scheduled message %s is %s; discarded", record.msg_id, msg.topic)
            return None
        return msg

    async def _deliver(self, batch: list[tuple[int, StoreMessage | None]]) -> int:
        """Put the batch's messages; returns how many leading entries are done (delivered or skipped)."""
        msgs = [m for _, m in batch if m is not None]
        if not msgs:
            return len(batch)
        result = await self.put_messages(msgs)
        if result.ok:
            return len(batch)
        if len(msgs) > 1:  # all or nothing failed: find out message by message
            for done, (_, msg) in enumerate(batch):
                if msg is not None and not await self._deliver_one(msg):
                    return done
            return len(batch)
        return len(batch) if self._skip_failed(msgs[0], result) else 0

    async def _deliver_one(self, msg: StoreMessage) -> bool:
        result = await self.put_messages([msg])
        return result.ok or self._skip_failed(msg, result)

    @staticmethod
    def _skip_failed(msg: StoreMessage, result: PutMessageResult) -> bool:
        if result.status in _HOPELESS:
            log.error("scheduled message for %s cannot be stored (%s: %s); discarded", msg.topic, result.status.value,
                      result.reason)
            return True
        log.warning("delivering a scheduled message to %s failed (%s); retrying", msg.topic, result.status.value)
        return False

    def update_offset(self, level: int, offset: int) -> None:
        self.offset_table[level] = offset
        self._version_change_counter += 1
        if self._version_change_counter % DELAY_OFFSET_UPDATE_VERSION_STEP == 0:
            self.data_version = self.data_version.next_version()

    # -- delayOffset.json -------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """DelayOffsetSerializeWrapper (levels ascending, as Java's map iterates); GET_ALL_DELAY_OFFSET answers it
        compact."""
        return {"dataVersion": self.data_version.to_json(), "offsetTable": dict(sorted(self.offset_table.items()))}

    def encode(self) -> str:
        """Pretty, as Java writes delayOffset.json."""
        return encode_json_pretty(self.to_json())

    async def _persist_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval_s)
            text = self.encode()  # the snapshot is taken on the loop, the fsync happens off it
            try:
                await asyncio.to_thread(write_atomic, self.path, text)
            except OSError:
                log.exception("failed to persist %s", self.path)

    def decode(self, data: Any) -> DelayOffsets:
        table = {int(level): int(offset) for level, offset in (data.get("offsetTable") or {}).items()}
        return table, DataVersion.from_json(data.get("dataVersion"))

    def restore(self, loaded: DelayOffsets) -> None:
        table, version = loaded
        self.offset_table.update(table)
        self.data_version = version

    def load(self) -> bool:
        """Read delayOffset.json (missing: every level from 0), bring each offset within its queue, and skip what
        was delivered after the last persist. Call after the store has started."""
        super().load()
        self.correct_delay_offset()
        self.skip_delivered()
        return True

    def sync_delay_offset(self, text: str) -> None:
        """A slave's copy of its master's delayOffset.json (SlaveSynchronize.syncDelayOffset): the master's text
        written as the file, then read back as loadWhenSyncDelayOffset does (its offsets over ours, its
        DataVersion; no correction against the queues, which a slave's service never delivers from)."""
        write_atomic(self.path, text)
        ConfigManager.load(self)

    def correct_delay_offset(self) -> None:
        for level, offset in list(self.offset_table.items()):
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            if cq is not None:
                self._corrected(cq, level, offset)

    def skip_delivered(self) -> None:
        """Move each level past the units already delivered (stored in their real topic after the scheduled
        record, found by UNIQ_KEY): a crash can leave delayOffset.json up to one persist interval behind."""
        now = now_ms()
        for level in self.delay_level_table:
            cq = self.store.get_consume_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            if cq is None:
                continue
            start = offset = self.offset_table.get(level, 0)
            while (unit := cq.get_unit(offset)) is not None and unit.tags_code <= now and self._delivered(unit):
                offset += 1
            if offset != start:
                log.warning("delay level %d: units %d..%d were delivered after the last persist; skipping them",
                            level, start, offset - 1)
                self.update_offset(level, offset)

    def _delivered(self, unit: CqUnit) -> bool:
        if is_blank(unit):
            return True
        record = self.store.lookup_message(unit.commit_log_offset, body=False)
        if record is None:
            return True
        uniq = record.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        topic = record.properties.get(PROPERTY_REAL_TOPIC)
        if not uniq or not topic:
            return False
        found = self.store.query_message(topic, uniq, 64, record.store_timestamp)
        for data in found.buffers:
            copy = decode_record(data, body=False)
            if copy.commit_log_offset > record.commit_log_offset:
                return True
        return False

    # -- stats ------------------------------------------------------------------------------------------------------

    def running_stats(self) -> dict[str, str]:
        """BrokerController's runtime-info entries: scheduleMessageOffset_{level} -> "{delayOffset},{maxOffset}"."""
        stats = {}
        for level, offset in sorted(self.offset_table.items()):
            max_offset = self.store.max_offset_in_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            stats[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
        return stats
