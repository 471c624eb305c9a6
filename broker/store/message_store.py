"""MessageStore: the store's facade (RocketMQ's DefaultMessageStore), delegating to one module per concern.

Examples
--------
>>> store = MessageStore(MessageStoreConfig(store_path_root_dir="/tmp/store"))
>>> store.start()
>>> result = store.put_message(StoreMessage("TopicTest", 0, b"hello", {"KEYS": "order-1", "TAGS": "TagA"}))
>>> store.get_message("group", "TopicTest", 0, 0, 32).status
<GetMessageStatus.FOUND: 'FOUND'>
>>> store.shutdown()
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

from broker.common.message import pack_host
from broker.common.record import MessageRecord
from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import CommitLog, EncodedRecord, EncodeError, StoreMessage
from broker.store.config import DispatchMode, FlushDiskType, MessageStoreConfig
from broker.store.consume_queue import ConsumeQueue, ConsumeQueueStore
from broker.store.dispatch import (
    ArrivalListener,
    BuildConsumeQueue,
    BuildIndex,
    CommitLogDispatcher,
    DispatchService,
    ReputMessageService,
    TagsCodeHook,
)
from broker.store.dispatch_process import DispatchProcess, effective_dispatch_mode
from broker.store.flush import (
    CleanCommitLogService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
    disk_usage_percent,
)
from broker.store.get_message import (
    MAX_PULL_MSG_SIZE,
    MessageFilter,
    collect,
    suggest_pulling_from_slave,
    total_physical_memory_size,
)
from broker.store.index_service import IndexService
from broker.store.recovery import recover
from broker.store.results import (
    AppendMessageResult,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

log = logging.getLogger(__name__)

class MessageStore:
    def __init__(self, config: MessageStoreConfig, store_host: bytes = pack_host("127.0.0.1", 10911), *,
                 disk_usage: Callable[[str], float] = disk_usage_percent) -> None:
        self.config = config
        self.commit_log = CommitLog(config, store_host)
        self.consume_queues = ConsumeQueueStore(config.consume_queue_dir, config.mapped_file_size_consume_queue)
        self.index = (IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
                      if config.message_index_enable else None)
        self.checkpoint: StoreCheckpoint | None = None
        dispatchers: list[CommitLogDispatcher] = [BuildConsumeQueue(self.consume_queues)]
        if self.index is not None:
            dispatchers.append(BuildIndex(self.index))
        # The dispatch code. It runs here at start (what recovery found missing); after that in a thread
        # (dispatchMode=THREAD) or in the dispatch process (PROCESS), whose reports the views here follow.
        self.reput = ReputMessageService(self.commit_log.queue, dispatchers)
        self.dispatch: DispatchService = (
            self.reput if effective_dispatch_mode(config) is DispatchMode.THREAD
            else DispatchProcess(config, self.commit_log.queue, self.consume_queues, self.index, self.reput,
                                 self._index_checkpoint))
        self._disk_usage = disk_usage
        self._total_memory = total_physical_memory_size()
        self._services: list = []
        self.group_commit: GroupCommitService | None = None
        self.cleaner: CleanCommitLogService | None = None
        self.running = False

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Load, recover, dispatch what is missing, then start the background services and mark the store open."""
        os.makedirs(self.config.store_path_root_dir, exist_ok=True)
        os.makedirs(self.config.commit_log_dir, exist_ok=True)  # retention measures the disk usage there
        last_exit_ok = not os.path.exists(self.config.abort_path)
        self.checkpoint = StoreCheckpoint(self.config.checkpoint_path)
        self.commit_log.queue.load()
        self.consume_queues.load()
        if self.index is not None:
            self.index.load(last_exit_ok, self.checkpoint.value.index_msg_timestamp)
        self.reput.reput_from_offset = recover(self.commit_log, self.consume_queues, self.index, self.checkpoint,
                                               last_exit_ok=last_exit_ok)
        self.reput.do_reput()
        for cq in self.consume_queues.queues():
            cq.correct_min_offset(self.commit_log.min_offset)
        self.recover_topic_queue_table()
        # Store times never go backwards across a restart, even if the clock does.
        self.commit_log.last_store_timestamp = max(self.reput.last_store_timestamp,
                                                   self.checkpoint.value.physic_msg_timestamp)
        with open(self.config.abort_path, "w"):
            pass
        self._start_services()
        self.running = True

    def recover_topic_queue_table(self) -> None:
        """Each queue's next offset from its ConsumeQueue (RocketMQ's recoverTopicQueueTable): at start, and when a
        DLedger member becomes leader with the entries it took from the old one dispatched."""
        self.commit_log.queue_offsets = {(cq.topic, cq.queue_id): cq.max_offset
                                         for cq in self.consume_queues.queues()}

    def _start_services(self) -> None:
        assert self.checkpoint is not None
        self._services = [self.commit_log.prefaulter]
        if self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.group_commit = GroupCommitService(self.commit_log, self.checkpoint)  # runs in the putting thread
        else:
            self._services.append(FlushRealTimeService(self.config, self.commit_log, self.checkpoint))
        self.cleaner = CleanCommitLogService(self.config, self.commit_log, self.dispatch, self._disk_usage)
        self._services += [self.dispatch,
                           FlushConsumeQueueService(self.config, self.consume_queues, self.index, self.dispatch,
                                                    self.checkpoint),
                           self.cleaner]
        for service in self._services:
            service.start()

    def _index_checkpoint(self) -> int:
        return self.checkpoint.value.index_msg_timestamp if self.checkpoint is not None else 0

    def shutdown(self) -> None:
        """Stop services, dispatch and flush everything, write the checkpoint and remove the abort file (kept when
        dispatch could not finish: the next start then rebuilds as after a crash)."""
        if not self.running:
            return
        self.running = False
        for service in reversed(self._services):
            service.shutdown()
        dispatched = self.dispatch.behind == 0
        self.flush()
        assert self.checkpoint is not None
        self.checkpoint.close()
        self.commit_log.queue.close()
        self.consume_queues.close()
        if self.index is not None:
            self.index.close()
        if dispatched:
            os.remove(self.config.abort_path)
        else:
            log.error("dispatch did not reach the CommitLog end; the next start recovers as after a crash")

    def flush(self) -> None:
        """Force CommitLog, ConsumeQueues, index and checkpoint to disk now."""
        assert self.checkpoint is not None
        self.commit_log.queue.flush()
        self.consume_queues.flush_all()
        ts = self.dispatch.last_store_timestamp
        updates = {"physic_msg_timestamp": ts, "logics_msg_timestamp": ts} if ts else {}
        if self.index is not None:
            # Only a full index file may be named, as in FlushConsumeQueueService: the open one is destroyed after
            # a later crash, and re-dispatch must start before its first message even if that start is killed.
            full_index_ts = self.index.flush()
            if full_index_ts:
                updates["index_msg_timestamp"] = full_index_ts
        self.checkpoint.update(**updates)
        self.checkpoint.flush()

    # -- writes -----------------------------------------------------------------------------------------------------

    def put_message(self, msg: StoreMessage) -> PutMessageResult:
        return self.put_messages([msg])

    def put_messages(self, msgs: list[StoreMessage | EncodedRecord]) -> PutMessageResult:
        """Store ``msgs`` contiguously, each with its own queue offset; all or nothing. With SYNC_FLUSH the result
        comes once the records are on disk (FLUSH_DISK_TIMEOUT after syncFlushTimeout: stored, not confirmed)."""
        refusal = self._check_writable()
        if refusal is not None:
            return refusal
        try:
            appended = self.commit_log.put(msgs)
        except EncodeError as err:
            return PutMessageResult(err.status, reason=str(err))
        self.dispatch.wakeup()
        status = PutMessageStatus.PUT_OK
        if self.group_commit is not None and not self.group_commit.wait_flushed(
                appended.wrote_offset + appended.wrote_bytes, self.config.sync_flush_timeout / 1000):
            status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return PutMessageResult(status, appended)

    def append_to_commit_log(self, start_offset: int, chunks: Sequence) -> bool:
        """Replicated CommitLog bytes from a master (a slave's only writes), ``chunks`` back to back from
        ``start_offset``: appended, then dispatched like a put's records. False when they do not continue this
        CommitLog (the caller drops the connection)."""
        if not self.running:
            return False
        appended = self.commit_log.append_data(start_offset, chunks)
        self.dispatch.wakeup()
        return appended

    def commit_log_data(self, offset: int, max_size: int) -> memoryview | None:
        """CommitLog bytes from ``offset``, at most ``max_size`` and within one file: what a master sends a slave."""
        return self.commit_log.data_from(offset, max_size)

    def _check_writable(self) -> PutMessageResult | None:
        if not self.running:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason="the message store is not running")
        if self.cleaner is not None and self.cleaner.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    reason=f"disk usage is above {self.config.disk_space_warning_level_ratio}%")
        return None

    # -- reads ------------------------------------------------------------------------------------------------------

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    max_total_size: int = MAX_PULL_MSG_SIZE,
                    message_filter: MessageFilter | None = None) -> GetMessageResult:
        """Raw records of ``topic``/``queue_id`` from queue ``offset`` (RocketMQ's getMessage, as a master)."""
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        max_offset_py = self.commit_log.max_offset
        pulling = collect(self.commit_log, self.config, cq, offset, max_msg_nums,
                          min(max(max_total_size, 100), MAX_PULL_MSG_SIZE), message_filter, result)
        result.suggest_pulling_from_slave = suggest_pulling_from_slave(
            max_offset_py, pulling, self.config.access_message_in_memory_max_ratio, self._total_memory)
        return result

    def lookup_message(self, commit_log_offset: int, *, body: bool = True) -> MessageRecord | None:
        """The message at a physical offset (RocketMQ's lookMessageByOffset; VIEW_MESSAGE_BY_ID after decoding the
        offsetMsgId); without its body when ``body`` is False."""
        return self.commit_log.read_record(commit_log_offset, body=body)

    def stored_record(self, msg: StoreMessage, append: AppendMessageResult, index: int = 0) -> MessageRecord:
        """The record ``msg`` became in ``append`` (its ``index``-th), built without reading it back."""
        return self.commit_log.stored_record(msg, append, index)

    def select_one_message(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        if size is None:
            size = self.commit_log.size_at(commit_log_offset)
            if size is None:
                return None
        return self.commit_log.read(commit_log_offset, size)

    def query_message(self, topic: str, key: str, max_num: int, begin: int = 0,
                      end: int = 2**63 - 1) -> QueryMessageResult:
        """Records whose KEYS or UNIQ_KEY equal ``key`` (hash collisions re-checked on the record), oldest first:
        the index chains run newest first and Java sorts the offsets before reading (mqadmin prints in this order)."""
        result = QueryMessageResult()
        if self.index is None:
            return result
        found = self.index.query(topic, key, max_num, begin, end)
        result.index_last_update_timestamp = found.index_last_update_timestamp
        result.index_last_update_phyoffset = found.index_last_update_phyoffset
        for offset in sorted(found.phy_offsets):
            record = self.commit_log.read_record(offset, body=False)
            if record is None or record.topic != topic:
                continue
            keys = record.properties.get("KEYS", "").split(" ")
            if key in keys or record.properties.get("UNIQ_KEY") == key:
                data = self.commit_log.read(offset, record.store_size)
                if data is not None:
                    result.buffers.append(data)
        return result

    # -- queue offsets and times --------------------------------------------------------------------------------------

    def min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.min_offset if cq else 0

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.max_offset if cq else 0

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.offset_for_timestamp(timestamp, self.commit_log.store_time_at) if cq else 0

    def commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        unit = cq.get_unit(queue_offset) if cq else None
        return unit.commit_log_offset if unit else 0

    def message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        unit = cq.get_unit(queue_offset) if cq else None
        if unit is None:
            return -1
        ts = self.commit_log.store_time_at(unit.commit_log_offset, unit.size)
        return -1 if ts is None else ts

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.message_store_timestamp(topic, queue_id, self.min_offset_in_queue(topic, queue_id))

    # -- ConsumeQueues ------------------------------------------------------------------------------------------------

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The ConsumeQueue of ``topic``/``queue_id`` if it exists (RocketMQ's getConsumeQueue), for readers that
        walk its units (the schedule service, mqadmin queryCq)."""
        return self.consume_queues.get(topic, queue_id)

    def consume_queue_topics(self) -> list[str]:
        """Every topic that has a ConsumeQueue."""
        return self.consume_queues.topics()

    def consume_queue_topics_below(self, commit_log_offset: int) -> set[str]:
        """Topics all of whose ConsumeQueues end below ``commit_log_offset`` (a queue without units keeps its
        topic): what cleanExpiredConsumerQueue may delete once that offset is the CommitLog's minimum."""
        ends: dict[str, list[int]] = {}
        for cq in self.consume_queues.queues():
            ends.setdefault(cq.topic, []).append(cq.max_physic_offset)
        return {topic for topic, last in ends.items() if all(end != -1 and end < commit_log_offset for end in last)}

    def sum_max_offset_in_queues(self) -> int:
        """The max offsets of every ConsumeQueue added up: units ever written to the live queues."""
        return sum(cq.max_offset for cq in self.consume_queues.queues())

    # -- the CommitLog and dispatch ---------------------------------------------------------------------------------

    @property
    def store_host(self) -> bytes:
        """This broker's packed address, as every record stores it."""
        return self.commit_log.store_host

    @property
    def min_phy_offset(self) -> int:
        """The CommitLog's first offset (RocketMQ's getMinPhyOffset): retention moves it up."""
        return self.commit_log.min_offset

    @property
    def max_phy_offset(self) -> int:
        """The CommitLog's end (RocketMQ's getMaxPhyOffset): where the next record goes."""
        return self.commit_log.max_offset

    def earliest_commit_log_time(self) -> int:
        """The store time of the CommitLog's first record (RocketMQ's getEarliestMessageTime() without a queue), -1
        when the log is empty."""
        if not self.commit_log.max_offset:
            return -1
        earliest = self.commit_log.store_time_at(self.commit_log.min_offset, 128)
        return earliest if earliest is not None else -1

    @property
    def flush_behind_bytes(self) -> int:
        """CommitLog bytes written and not forced to disk yet (RocketMQ's flushBehindBytes)."""
        return self.commit_log.queue.unflushed_bytes()

    def flush_commit_log(self) -> int:
        """Force the CommitLog (only) to disk now; returns the offset it is flushed to."""
        return self.commit_log.queue.flush()

    @property
    def dispatch_behind_bytes(self) -> int:
        return self.dispatch.behind

    def is_dispatched(self, commit_log_offset: int) -> bool:
        """Everything below ``commit_log_offset`` is in the ConsumeQueues and the index."""
        return self.dispatch.reput_from_offset >= commit_log_offset

    @property
    def dispatch_pid(self) -> int | None:
        """The dispatch process's pid (dispatchMode=PROCESS while it runs); None with a dispatch thread."""
        return self.dispatch.pid if isinstance(self.dispatch, DispatchProcess) else None

    def set_tags_code_hook(self, tags_code_of: TagsCodeHook) -> None:
        """What dispatch stores as each unit's tagsCode (default: the tag's hash). Before ``start``: the units
        recovery rebuilds need it too."""
        self.reput.tags_code_of = tags_code_of

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Hear of every dispatch step once its units are readable (long polling); called on the dispatching
        thread, or on the thread that reads the dispatch process's reports."""
        self.dispatch.arrival_listeners.append(listener)

    # -- maintenance --------------------------------------------------------------------------------------------------

    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG: retention's next rounds delete expired CommitLog files whatever the hour."""
        if self.cleaner is not None:
            self.cleaner.execute_delete_files_manually()

    def delete_topics(self, topics: set[str]) -> None:
        self.dispatch.delete_topics(topics)
        self.commit_log.queue_offsets = {k: v for k, v in self.commit_log.queue_offsets.items()
                                         if k[0] not in topics}
