"""What ``mqadmin`` and the clients' admin APIs ask a broker about its queues and itself: queue offsets and times,
ConsumeQueue units (queryCq), broker config (read, and changed at runtime), runtime info, stats items (statsAll),
replication status (haStatus), delay offsets, and the cleanups of expired and unused ConsumeQueues and expired
CommitLog files.

Java's AdminBrokerProcessor serves these and more; here its topic requests are ``topic_admin``'s, its subscription
group requests ``group_admin``'s, and the queries by key or offset (Java's QueryMessageProcessor)
``query_message``'s. ``ProcessorFamily`` registers the four as "admin".

GET_BROKER_RUNTIME_INFO reports what rmq measures (``BrokerStats``): puts counted from the ConsumeQueues, gets as
the pull processor reports them (``BrokerStats.record_get``), the store's offsets and disk use. Java's
thread-pool and latency metrics have no rmq counterpart and are left out rather than invented. Apache 5.3.3 puts no
replication keys in it (a slave's lag is GET_BROKER_HA_STATUS's), and neither does rmq.
"""

from __future__ import annotations

import asyncio
import logging
import math
import shutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.common import validation
from broker.common.errors import ConfigError, IllegalName
from broker.common.fastjson import DataVersion, encode_json
from broker.common.properties import parse_properties
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.ha_bodies import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
from broker.remoting.headers import (
    GetBrokerConfigResponseHeader,
    OffsetResponseHeader,
    QueryConsumeQueueRequestHeader,
    SearchOffsetRequestHeader,
    TimestampResponseHeader,
    TopicQueueHeader,
    ViewBrokerStatsDataRequestHeader,
)
from broker.server.config import format_config
from broker.server.config_update import UpdateStatus, apply_update, write_config_file
from broker.server.processors.common import (
    Handler,
    guarded,
    json_body,
    queue_value,
    success,
    wait_dispatched,
)
from broker.server.processors.request_headers import request_header
from broker.store.config import BrokerRole

if TYPE_CHECKING:
    from broker.replication.runtime import HAState
    from broker.server.config import BrokerConfig
    from broker.server.consumer_manager import ConsumerManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.schedule import ScheduleMessageService
    from broker.server.stats import BrokerStats, BrokerStatsManager
    from broker.store.config import MessageStoreConfig
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

NO_HA_RUNTIME_INFO = "Can not get HARuntimeInfo, may be duplicationEnable is true"  # Apache's, when no HA service runs

BROKER_VERSION_DESC = "V5_5_1"  # MQVersion.getVersionDesc(CURRENT_VERSION): the release rmq speaks (REMOTING_VERSION)
# BrokerConfig's request queue capacities (Java's defaults), reported in the runtime info: clusterList prints the send
# and pull queues' sizes and head waits as #InTPS(LOAD) and #OutTPS(LOAD). rmq serves requests on the event loop as they
# arrive, so its queues are always empty and nothing waits at their head.
REQUEST_QUEUE_CAPACITIES = {"send": 10000, "pull": 100000, "litePull": 100000, "query": 20000, "ack": 100000}
END_TRANSACTION_QUEUE_CAPACITY = 100000


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(bytes, false): "512 B", "1.5 KiB", "97.9 GiB"."""
    if count < 1024:
        return f"{count} B"
    exp = min(6, int(math.log(count) / math.log(1024)))
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def ha_runtime_info(state: HAState) -> HARuntimeInfo:
    """The HARuntimeInfo body of the HA service's state."""
    client = state.client
    return HARuntimeInfo(
        master=state.master, master_commit_log_max_offset=state.master_commit_log_max_offset,
        in_sync_slave_nums=state.in_sync_slave_nums,
        ha_connection_info=[HAConnectionRuntimeInfo(c.addr, c.slave_ack_offset, c.diff, c.in_sync,
                                                    c.transferred_byte_in_second, c.transfer_from_where)
                            for c in state.connections],
        ha_client_runtime_info=HAClientRuntimeInfo() if client is None else HAClientRuntimeInfo(
            client.master_addr, client.transferred_byte_in_second, client.max_offset, client.last_read_timestamp,
            client.last_write_timestamp, client.master_flush_offset))


# -- the processor -----------------------------------------------------------------------------------------------------


class AdminBrokerProcessor:
    """The broker's own admin requests. ``broker_active`` says whether it runs a master's services (runtime info's
    brokerActive), ``ha_state`` what its HA service reports."""

    def __init__(self, *, broker_config: BrokerConfig, store_config: MessageStoreConfig, store: MessageStore,
                 stats: BrokerStats, topic_config_manager: TopicConfigManager, consumer_manager: ConsumerManager,
                 schedule_message_service: ScheduleMessageService, broker_active: Callable[[], bool],
                 ha_state: Callable[[], HAState], stats_manager: BrokerStatsManager,
                 register_broker: Callable[[], Awaitable[None]]) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.store = store
        self.stats = stats
        self.topic_config_manager = topic_config_manager
        self.consumer_manager = consumer_manager
        self.schedule_message_service = schedule_message_service
        self.broker_active = broker_active
        self.ha_state = ha_state
        self.stats_manager = stats_manager
        self.register_broker = register_broker
        self.config_version = DataVersion.new()  # Configuration.dataVersion: the next one after each update

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_BROKER_HA_STATUS: self.get_broker_ha_status,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_ALL_MESSAGE_REQUEST_MODE: self.get_all_message_request_mode,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        }
        return {code: guarded(handler) for code, handler in handlers.items()}


    # -- queue offsets and times -----------------------------------------------------------------------------------

    async def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request_header(request, TopicQueueHeader)
        await wait_dispatched(self.store)
        offset = queue_value(lambda: self.store.max_offset_in_queue(h.topic, h.queue_id), 0)
        return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())

    async def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request_header(request, TopicQueueHeader)
        offset = queue_value(lambda: self.store.min_offset_in_queue(h.topic, h.queue_id), 0)
        return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())

    async def search_offset_by_timestamp(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The first offset stored at or after ``timestamp`` (BoundaryType.LOWER; UPPER is answered the same)."""
        h = request_header(request, SearchOffsetRequestHeader)
        offset = queue_value(lambda: self.store.offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp), 0)
        return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())

    async def get_earliest_msg_storetime(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request_header(request, TopicQueueHeader)
        timestamp = queue_value(lambda: self.store.earliest_message_time(h.topic, h.queue_id), -1)
        return success(request, ext_fields=TimestampResponseHeader(timestamp).to_ext())

    async def query_consume_queue(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """mqadmin queryCq: ConsumeQueue units from ``index`` (QueryConsumeQueueResponseBody)."""
        h = request_header(request, QueryConsumeQueueRequestHeader)
        try:
            cq = self.store.get_consume_queue(h.topic, h.queue_id)
        except IllegalName:
            cq = None
        if cq is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"{h.queue_id}@{h.topic} is not exist!")
        body: dict[str, Any] = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
        if h.consumer_group is not None:
            sub = self.consumer_manager.find_subscription_data(h.consumer_group, h.topic)
            body["subscriptionData"] = sub.to_json() if sub else None
            if sub is None:
                body["filterData"] = f"{h.consumer_group}@{h.topic} is not online!"
        if not cq.min_offset <= h.index < cq.max_offset:
            return create_response(request, ResponseCode.SUCCESS,
                                   f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!", body=json_body(body))
        units = cq.iter_units(h.index, max(0, h.count))
        body["queueData"] = [{"eval": False, "physicOffset": u.commit_log_offset, "physicSize": u.size,
                              "tagsCode": u.tags_code} for u in units]
        return success(request, json_body(body))

    # -- the broker itself -----------------------------------------------------------------------------------------

    async def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Every setting as "key=value" lines (Configuration.getAllConfigsFormatString)."""
        text = format_config(self.broker_config, self.store_config)
        header = GetBrokerConfigResponseHeader(encode_json(self.config_version.to_json()))
        return success(request, text.encode(), header.to_ext())

    async def update_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Apply the properties in the body to the running broker and write them to its config file
        (``broker/server/config_update.py`` says which keys and why); a brokerPermission change registers the
        broker again at once, so the NameServers' routes show it (as Java's registerBrokerAll here)."""
        log.info("Broker receive request to update config, caller address=%s", conn.remote_address)
        if not request.body:
            return success(request)
        try:
            props = parse_properties(request.body.decode("utf-8"))
        except (UnicodeDecodeError, ConfigError):
            return create_response(request, ResponseCode.SYSTEM_ERROR, "string2Properties error")
        outcome = apply_update(self.broker_config, self.store_config, props)
        if outcome.status is not UpdateStatus.APPLIED:
            log.warning("updateBrokerConfig %s refused (%s), client: %s", props, outcome.remark, conn.remote_address)
            code = ResponseCode.SYSTEM_ERROR if outcome.status is UpdateStatus.REFUSED else ResponseCode.NO_PERMISSION
            return create_response(request, code, outcome.remark)
        log.info("updateBrokerConfig, new config: [%s] client: %s", props, conn.remote_address)
        self.config_version = self.config_version.next_version()
        if self.broker_config.broker_config_path:
            try:
                await asyncio.to_thread(write_config_file, self.broker_config.broker_config_path, props)
            except OSError:
                log.exception("updateBrokerConfig: the change is live but %s could not be written",
                              self.broker_config.broker_config_path)
        if "brokerPermission" in props:
            self.topic_config_manager.bump_data_version()
            await self.register_broker()
        return success(request)

    async def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        table = await asyncio.to_thread(self._runtime_info)
        return success(request, json_body({"table": table}))

    def _runtime_info(self) -> dict[str, str]:
        stats, store = self.stats, self.store
        puts = stats.put_total
        # A slave's puts are its master's: Java's store stats count them as they are dispatched (putMessageTimesTotal,
        # putTps), its BrokerStatsManager (msgPutTotal*) only what clients sent to this broker, none on a slave.
        sent = (0, 0, 0) if self.broker_config.broker_role is BrokerRole.SLAVE else (
            puts, stats.morning[0], stats.yesterday_morning[0])
        info = {
            "bootTimestamp": str(stats.boot_timestamp),
            "runtime": stats.runtime(),
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerActive": str(self.broker_active()).lower(),
            "putMessageTimesTotal": str(puts),
            "putMessageSizeTotal": str(stats.put_size_total()),
            "putMessageAverageSize": repr(stats.put_size_total() / max(1, puts)),
            "putTps": stats.tps(1),
            "getTransferredTps": stats.tps(2),
            "msgPutTotalTodayNow": str(sent[0]),
            "msgPutTotalTodayMorning": str(sent[1]),
            "msgPutTotalYesterdayMorning": str(sent[2]),
            "msgGetTotalTodayNow": str(stats.get_total),
            "msgGetTotalTodayMorning": str(stats.morning[1]),
            "msgGetTotalYesterdayMorning": str(stats.yesterday_morning[1]),
            "commitLogMinOffset": str(store.min_phy_offset),
            "commitLogMaxOffset": str(store.max_phy_offset),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes),
            "earliestMessageTimeStamp": str(store.earliest_commit_log_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "remainHowManyDataToFlush": human_bytes(store.flush_behind_bytes),
            "remainTransientStoreBufferNumbs": str(2**31 - 1),  # no transient store pool (Integer.MAX_VALUE)
            "pageCacheLockTimeMills": "0",  # appends hold the put lock only for a memory copy
            # the timer wheel is not enabled: Java's constants for that case
            "timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
            "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0",
            "dispatchMaxBuffer": "0",  # StoreStatsService never sets it: always 0 in Java too
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_QUEUE_CAPACITY),
        }
        for pool, capacity in REQUEST_QUEUE_CAPACITIES.items():
            info[f"{pool}ThreadPoolQueueSize"] = "0"
            info[f"{pool}ThreadPoolQueueCapacity"] = str(capacity)
            info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        info.update(self._disk_info())
        info.update(self.schedule_message_service.running_stats())
        return info

    async def get_broker_ha_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """HARuntimeInfo (``mqadmin haStatus``): a master's slaves, or a slave's HAClient. A DLedger member runs no
        HA service (its group replicates through DLedger): SYSTEM_ERROR with Apache's remark, as its store has no
        HARuntimeInfo to give."""
        if self.store_config.enable_d_leger_commit_log:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"{NO_HA_RUNTIME_INFO} (DLedger mode: the "
                                   "group replicates through DLedger, no HA service runs)")
        return success(request, json_body(ha_runtime_info(self.ha_state()).to_json()))

    def _disk_info(self) -> dict[str, str]:
        """Used fractions of the CommitLog's and ConsumeQueues' partitions (-1.0 while a directory does not exist
        yet, as in Java) and the store root's capacity."""
        config = self.store_config
        ratios = {key: _used_ratio(path) for key, path in (("commitLogDiskRatio", config.commit_log_dir),
                                                           ("consumeQueueDiskRatio", config.consume_queue_dir))}
        info = {key: repr(ratio) for key, ratio in ratios.items()}
        info[f"commitLogDiskRatio_{config.commit_log_dir}"] = info["commitLogDiskRatio"]
        try:
            usage = shutil.disk_usage(config.store_path_root_dir)
            info["commitLogDirCapacity"] = f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        except OSError:
            pass
        return info

    async def get_all_delay_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The schedule service's delivery progress per delay level, as delayOffset.json holds it."""
        return create_response(request, ResponseCode.SUCCESS,
                               body=json_body(self.schedule_message_service.to_json()))

    async def get_all_message_request_mode(self, conn: RemotingConnection,
                                           request: RemotingCommand) -> RemotingCommand:
        """MessageRequestModeSerializeWrapper, which a slave's SlaveSynchronize asks for: rmq keeps no POP request
        modes (SET_MESSAGE_REQUEST_MODE is not served), so the map is empty."""
        return create_response(request, ResponseCode.SUCCESS, body=json_body({"messageRequestModeMap": {}}))

    async def view_broker_stats_data(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """One BrokerStatsManager item over its last minute, hour and day (``mqadmin statsAll``); an item nothing
        has added to yet, or a stats name rmq does not keep, does not exist (Java's answer)."""
        h = request_header(request, ViewBrokerStatsDataRequestHeader)
        data = self.stats_manager.stats_data(h.stats_name, h.stats_key)
        if data is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
        return success(request, json_body(data.to_json()))

    async def clean_expired_consume_queue(self, conn: RemotingConnection,
                                          request: RemotingCommand) -> RemotingCommand:
        """Drop the ConsumeQueues of non-system topics whose every unit points below the CommitLog's start
        (whole topics only: Java may also drop single queues of a topic)."""
        min_offset = self.store.min_phy_offset
        manager = self.topic_config_manager
        expired = {topic for topic in self.store.consume_queue_topics_below(min_offset)
                   if not manager.is_system_topic(topic)}
        if expired:
            log.info("cleanExpiredConsumerQueue: %s destroyed, minCommitLogOffset %d", sorted(expired), min_offset)
            self.store.delete_topics(expired)
        return success(request)

    async def clean_unused_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Drop the ConsumeQueues of topics no longer configured (system and LMQ topics stay)."""
        manager = self.topic_config_manager
        unused = {t for t in self.store.consume_queue_topics() if not manager.contains_topic(t)
                  and not manager.is_system_topic(t) and not t.startswith(validation.LMQ_PREFIX)}
        if unused:
            log.warning("cleanUnusedTopic: %s", sorted(unused))
            self.store.delete_topics(unused)
        return success(request)

    async def delete_expired_commit_log(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Ask retention to delete expired CommitLog files on its next rounds even outside the deleteWhen hours; the
        answer comes at once, before anything is deleted (as Java's)."""
        log.warning("invoke deleteExpiredCommitLog from %s", conn.remote_address)
        self.store.execute_delete_files_manually()
        return success(request)


def _used_ratio(path: str) -> float:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return usage.used / usage.total if usage.total else 0.0
