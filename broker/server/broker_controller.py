"""BrokerController: one broker process. It owns the store, the metadata managers, the client managers and the
remoting server, registers with every NameServer, and runs the periodic duties (registration every 30 s, consumer
offsets persisted every 5 s, silent clients dropped). A master also delivers delayed messages and checks
transactions; a slave stores no message of its own and copies its master's metadata (SlaveSynchronize).

It builds the request processors (``broker/server/processors``, a class per request family), giving each the
parts it uses: the processors never see this object.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from broker.auth.evaluate import AuthEvaluator
from broker.auth.metadata import AuthMetadataManager
from broker.auth.plain import WATCH_INTERVAL_S, PlainPermissionManager
from broker.auth.store import AuthStore
from broker.common.message import PROPERTY_WAIT_STORE_MSG_OK, pack_host
from broker.common.record import decode_record
from broker.dledger.message_store import DLedgerMessageStore
from broker.remoting.client import RemotingClient
from broker.remoting.route import MASTER_ID
from broker.remoting.server import RemotingServer
from broker.replication.ha_service import HAService
from broker.server.auth_pipeline import AuthPipeline
from broker.server.config import BrokerConfig
from broker.server.consumer_manager import ConsumerManager
from broker.server.dledger_role import DLedgerRoleChangeHandler
from broker.server.filter.message_filter import ConsumerFilterManager
from broker.server.metadata.groups import SubscriptionGroupManager
from broker.server.metadata.offsets import ConsumerOffsetManager
from broker.server.metadata.paths import config_dir
from broker.server.metadata.topics import TopicConfigManager
from broker.server.outer_api import register_broker_all, unregister_broker_all
from broker.server.processors import registry
from broker.server.processors.acl_admin import AclAdminProcessor
from broker.server.processors.admin import AdminBrokerProcessor
from broker.server.processors.auth_admin import AuthAdminProcessor
from broker.server.processors.client_manage import ClientManageProcessor
from broker.server.processors.common import ProcessorFamily, RequestProcessor
from broker.server.processors.consumer_manage import ConsumerManageProcessor
from broker.server.processors.end_transaction import EndTransactionProcessor
from broker.server.processors.end_transaction_batch import EndTransactionBatchProcessor
from broker.server.processors.group_admin import GroupAdminProcessor
from broker.server.processors.pull import PullMessageProcessor
from broker.server.processors.query_message import QueryMessageProcessor
from broker.server.processors.send import SendMessageProcessor
from broker.server.processors.send_back import SendMessageBackProcessor
from broker.server.processors.topic_admin import TopicAdminProcessor
from broker.server.producer_manager import ProducerManager
from broker.server.schedule import ScheduleMessageService
from broker.server.slave_synchronize import SlaveSynchronize
from broker.server.stats import HOURS_S, MINUTES_S, SECONDS_S, BrokerStats, BrokerStatsManager
from broker.server.transaction import TransactionalMessageCheckService, TransactionalMessageService
from broker.store.commit_log import EncodedRecord, StoreMessage
from broker.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from broker.store.message_store import MessageStore
from broker.store.results import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from broker.server.broker_metrics import BrokerMetricsManager

log = logging.getLogger(__name__)


def _waits_for_slaves(first: StoreMessage | EncodedRecord) -> bool:
    """needHandleHA: a put waits for the slaves unless its (first) message says WAIT=false."""
    props = first.properties if isinstance(first, StoreMessage) else decode_record(first, body=False).properties
    return props.get(PROPERTY_WAIT_STORE_MSG_OK) != "false"

CLIENT_SCAN_INTERVAL = 10.0  # seconds; also drops clients whose connection closed
REGISTER_FIRST_S = 10.0  # the periodic registration's first run (Apache's initial delay): an unelected DLedger
# member registers then with brokerId -1, as BrokerStartup leaves it
# A DLedger follower syncs its master's metadata every 10 s, whatever slaveSynchronizeInterval says (Apache's
# DLedgerRoleChangeHandler); a shorter slaveSynchronizeInterval is kept (tests use one).
DLEDGER_SYNC_INTERVAL_MS = 10_000


class BrokerController:
    def __init__(self, broker_config: BrokerConfig, store_config: MessageStoreConfig, *,
                 bind_host: str = "0.0.0.0") -> None:
        if store_config.ha_listen_port <= 0:  # as BrokerStartup: the HA port follows the listen port
            store_config = dataclasses.replace(store_config, ha_listen_port=broker_config.listen_port + 1)
        self.broker_config = broker_config
        self.store_config = store_config
        root = store_config.store_path_root_dir
        store_host = pack_host(broker_config.broker_ip1, broker_config.listen_port)
        # -- DLedger mode (enableDLegerCommitLog): the CommitLog is a Raft log; elections make this broker a master or
        # a slave (dledger_role.py), so it starts as neither: brokerId -1, no master-only service, and no
        # registration before the periodic one (then as -1 unless elected meanwhile)
        self.dledger_store = (DLedgerMessageStore(store_config, store_host)
                              if store_config.enable_d_leger_commit_log else None)
        self.store = self.dledger_store or MessageStore(store_config, store_host)
        # -- replication (broker/replication): slaves connect to haListenPort; a SLAVE follows its master
        # (never started in DLedger mode, whose members copy entries through DLedger: no HA client either)
        ha_role = broker_config.broker_role if self.dledger_store is None else BrokerRole.ASYNC_MASTER
        self.ha_service = HAService(self.store, store_config, ha_role, bind_host)
        self._sync_master = broker_config.broker_role is BrokerRole.SYNC_MASTER
        self.topic_config_manager = TopicConfigManager(broker_config, root, on_topic_created=self._topic_created)
        self.subscription_group_manager = SubscriptionGroupManager(broker_config, root)
        self.consumer_offset_manager = ConsumerOffsetManager(broker_config, root)
        self.consumer_manager = ConsumerManager()
        self.consumer_filter_manager = ConsumerFilterManager()  # SQL92 subscriptions: heartbeat writes, pull reads
        self.producer_manager = ProducerManager()
        # Java's brokers also serve the "VIP channel" on listenPort - 2: slaves sync metadata through it, and clients
        # with sendMessageWithVIPChannel send there.
        vip_port = broker_config.listen_port - 2
        self.server = RemotingServer(bind_host, broker_config.listen_port, also_on=(vip_port,) if vip_port > 0 else ())
        # -- transactions (broker/transaction): open half messages, END_TRANSACTION, the check
        self.transactional_message_service = TransactionalMessageService(self)
        self.transactional_message_check_service = TransactionalMessageCheckService(self)
        # -- delayed delivery (broker/server/schedule.py): scheduled records get their deliver time as tagsCode, so the
        # dispatcher must know it before the store starts (recovery dispatches too).
        self.schedule_message_service = ScheduleMessageService(
            self.store, self.put_messages, broker_config.delay_level_table(), root,
            flush_delay_offset_interval_ms=store_config.flush_delay_offset_interval)
        self.store.set_tags_code_hook(self.schedule_message_service.tags_code_of)
        self.store.add_arrival_listener(self.schedule_message_service.on_arrivals)  # a parked unit wakes its level
        # -- ACL 2.0 (broker/auth): users and ACLs under config/, checked before every processor when switched on
        auth = broker_config.auth
        self.auth_metadata = (AuthMetadataManager(AuthStore(config_dir(root))) if auth.metadata_configured else None)
        # -- ACL 1.0 (broker/auth/plain.py): plain_acl.yml's accounts, read now so that a bad file stops the start
        self.plain_acl = PlainPermissionManager(broker_config.rocketmq_home) if broker_config.acl_enable else None
        # to NameServers and, from a slave, its master; signed with innerClientAuthenticationCredentials when set
        self.outer_client = RemotingClient(credentials=auth.inner_client_credentials)
        # -- master and slave: a slave copies its master's metadata (broker/server/slave_synchronize.py)
        self.slave_synchronize = SlaveSynchronize(
            broker_addr=self.broker_addr, client=self.outer_client,
            interval_ms=(broker_config.slave_synchronize_interval if self.dledger_store is None
                         else min(broker_config.slave_synchronize_interval, DLEDGER_SYNC_INTERVAL_MS)),
            topic_config_manager=self.topic_config_manager,
            consumer_offset_manager=self.consumer_offset_manager,
            subscription_group_manager=self.subscription_group_manager,
            schedule_message_service=self.schedule_message_service)
        self._slave_puts_refused = 0
        self.dledger_role_handler = (DLedgerRoleChangeHandler(self, self.dledger_store)
                                     if self.dledger_store is not None else None)
        # SYNC_FLUSH puts wait for the disk: they run in threads so waiting puts share one flush and the event
        # loop keeps serving. ASYNC_FLUSH puts only copy into the page cache and run inline.
        self._put_executor = (ThreadPoolExecutor(16, thread_name_prefix="put")
                              if store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH else None)
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stats: BrokerStats  # made at start(), once the store has recovered
        self.stats_manager = BrokerStatsManager(broker_config.broker_cluster_name)  # statsAll's per-topic items
        # -- metrics (broker_metrics.py): Apache's Prometheus metrics, when metricsExporterType=PROM (imported then
        # only: prometheus-client's import is a tenth of a broker's start)
        self.metrics: BrokerMetricsManager | None = None
        if broker_config.metrics.enabled:
            from broker.server.broker_metrics import BrokerMetricsManager

            self.metrics = BrokerMetricsManager(self)
        self.processors: dict[str, RequestProcessor] = {}  # made at start(), by registry.MODULES name
        self.started = False

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_config.broker_ip1}:{self.broker_config.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        """Where slaves connect for replication: brokerIP2:haListenPort (registered with the NameServer)."""
        return f"{self.broker_config.broker_ip2}:{self.store_config.ha_listen_port}"

    # -- lifecycle --------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store, then serve. A start that fails (a port already taken) closes what it opened and
        raises, so the store is left as a clean shutdown leaves it."""
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(None, self.store.start)
        try:
            await self._start_serving()
        except BaseException:
            await self._close_failed_start()
            raise

    async def _start_serving(self) -> None:
        if self.metrics is not None:  # first, as Apache's: a metrics port taken stops the start before it serves
            await self.metrics.start()
        if self.dledger_store is None:  # DLedger members replicate through DLedger, not HA
            self.ha_service.start(self._loop)
        self.stats = BrokerStats(self.store)
        self.topic_config_manager.load()
        self.subscription_group_manager.load()
        self.consumer_offset_manager.load()
        await self.transactional_message_service.start()  # transactions: rebuilt from the half and op topics
        self.schedule_message_service.load()  # delayed delivery: after the store recovered, before sends come in
        self.processors = registry.register_all(self.server, self._processor_builders())
        self._start_auth()
        await self.server.start()
        self.started = True
        await self._start_role_services()
        if self.dledger_role_handler is not None and self.dledger_store is not None:
            self.dledger_role_handler.start()
            await self.dledger_store.server.start()
        self.every(self.broker_config.flush_consumer_offset_interval / 1000, self._persist_offsets)
        self.every(CLIENT_SCAN_INTERVAL, self._scan_clients)
        if self.plain_acl is not None:  # AclFileWatchService: the ACL files reloaded when they change
            self.every(WATCH_INTERVAL_S, self.plain_acl.poll)
        self.every(1.0, self.stats.sample)
        self.every(SECONDS_S, self.stats_manager.sample_seconds)
        self.every(MINUTES_S, self.stats_manager.sample_minutes)
        self.every(HOURS_S, self.stats_manager.sample_hours)
        if self.dledger_store is None:  # a DLedger member registers once elected, or unelected at the first period
            await register_broker_all(self)
        self.every(self.broker_config.effective_register_name_server_period / 1000,
                   lambda: register_broker_all(self), first=REGISTER_FIRST_S)

    async def shutdown(self) -> None:
        """Unregister, stop serving, persist metadata, flush and close the store (the abort file goes)."""
        if not self.started:
            return
        self.started = False
        await self._stop_dledger()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.schedule_message_service.stop()  # delayed delivery: stops and persists delayOffset.json
        await unregister_broker_all(self)
        await self.server.stop()
        await self.outer_client.close()
        if self.metrics is not None:
            await self.metrics.shutdown()
        self._persist_offsets()
        self.topic_config_manager.persist()
        self.subscription_group_manager.persist()
        if self._put_executor is not None:
            self._put_executor.shutdown()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.ha_service.shutdown)
        await loop.run_in_executor(None, self.store.shutdown)

    async def _close_failed_start(self) -> None:
        """Close what a failed start opened, persisting nothing: its metadata may not have been loaded."""
        self.started = False
        await self._stop_dledger()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.stop()
        await self.outer_client.close()
        if self.metrics is not None:
            await self.metrics.shutdown()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.ha_service.shutdown)
        await loop.run_in_executor(None, self.store.shutdown)

    async def _stop_dledger(self) -> None:
        """The member leaves the group first: no role change comes after this."""
        if self.dledger_store is not None and self.dledger_role_handler is not None:
            await self.dledger_store.server.stop()
            await self.dledger_role_handler.stop()

    def _start_auth(self) -> None:
        """Apache's AuthenticationMetadataManager.initUser, then the request pipeline (ACL 1.0's check, then
        authentication, then authorization)."""
        auth = self.broker_config.auth
        if self.auth_metadata is not None:
            if auth.init_authentication_user is not None:
                self.auth_metadata.init_user(auth.init_authentication_user.username,
                                             auth.init_authentication_user.password)
            if auth.inner_client_credentials is not None:
                self.auth_metadata.init_user(auth.inner_client_credentials.access_key,
                                             auth.inner_client_credentials.secret_key)
        evaluator = (AuthEvaluator(auth, self.auth_metadata)  # config.py refuses enabled without metadata
                     if auth.enabled and self.auth_metadata is not None else None)
        if evaluator is not None or self.plain_acl is not None:
            self.server.set_request_pipeline(AuthPipeline(evaluator, self.plain_acl))

    def every(self, seconds: float, action: Callable[[], object], first: float | None = None) -> None:
        """Run ``action`` (a function or coroutine function) every ``seconds`` until shutdown, the first time after
        ``first`` seconds (default: ``seconds``)."""
        async def loop() -> None:
            await asyncio.sleep(seconds if first is None else first)
            while True:
                try:
                    result = action()
                    if isinstance(result, Awaitable):
                        await result
                except Exception:
                    log.exception("periodic task %s failed", action)
                await asyncio.sleep(seconds)

        self._tasks.append(asyncio.get_running_loop().create_task(loop()))

    def _topic_created(self, _topic_config: object) -> None:
        """A new topic is routed at once, not at the next periodic registration (Java registers right away too)."""
        if self._loop is None or not self.started:
            return
        def register() -> None:
            task = self._loop.create_task(register_broker_all(self))
            self._tasks.append(task)
            task.add_done_callback(self._tasks.remove)

        self._loop.call_soon_threadsafe(register)

    def _persist_offsets(self) -> None:
        self.consumer_offset_manager.persist()

    def _scan_clients(self) -> None:
        self.consumer_manager.scan_expired()
        self.producer_manager.scan_expired()

    # -- master and slave -------------------------------------------------------------------------------------------

    async def _start_role_services(self) -> None:
        """Java's changeSpecialServiceStatus(brokerId == MASTER_ID) and the slave's sync schedule: a master delivers
        delayed messages and checks transactions; a slave does neither (its master does) and copies its master's
        metadata instead. In DLedger mode the role changes decide (the sync schedule waits, paused, till then)."""
        if self.dledger_store is not None:
            self.slave_synchronize.pause()
            self.slave_synchronize.start(self.every)
        elif self.broker_config.broker_id == MASTER_ID:
            await self._change_special_service_status(True)
        elif self.broker_config.broker_role is BrokerRole.SLAVE:
            self.slave_synchronize.start(self.every)

    async def _change_special_service_status(self, should_start: bool) -> None:
        """The master-only services: delayed delivery and a transaction check round every
        transactionCheckInterval."""
        if should_start:
            await self.schedule_message_service.start()
            self.transactional_message_check_service.start()
        else:
            await self.schedule_message_service.stop()
            self.transactional_message_check_service.stop()

    async def change_to_slave(self, broker_id: int) -> None:
        """A DLedger follower serves as a slave: master-only services stop, metadata sync starts, and every
        NameServer hears of it at once (BrokerController.changeToSlave)."""
        log.info("Begin to change to slave brokerName=%s brokerId=%s", self.broker_config.broker_name, broker_id)
        self.broker_config.change_role(broker_id or 1, BrokerRole.SLAVE)  # a slave never keeps id 0
        await self._change_special_service_status(False)
        self.slave_synchronize.resume()
        await register_broker_all(self)
        log.info("Finish to change to slave brokerName=%s brokerId=%s", self.broker_config.broker_name, broker_id)

    async def change_to_master(self, role: BrokerRole) -> None:
        """A DLedger leader serves as the master: metadata sync stops, master-only services start, then brokerId 0
        and an immediate registration (BrokerController.changeToMaster)."""
        if role is BrokerRole.SLAVE:
            return
        log.info("Begin to change to master brokerName=%s", self.broker_config.broker_name)
        self.slave_synchronize.pause()
        # the halves and ops a follower got through the group's log never passed its put path: read the open
        # transactions back from the store (and the synced CID_RMQ_SYS_TRANS offsets), so the checks see them
        await self.transactional_message_service.start()
        await self._change_special_service_status(True)
        self.broker_config.change_role(MASTER_ID, role)
        await register_broker_all(self)
        log.info("Finish to change to master brokerName=%s", self.broker_config.broker_name)

    def on_registered(self, ha_server_addr: str | None, master_addr: str | None) -> None:
        """handleRegisterBrokerResult: what a NameServer answered REGISTER_BROKER about this broker's master."""
        if ha_server_addr:  # a slave follows it (unless haMasterAddress is configured)
            self.ha_service.update_master_address(ha_server_addr)
        self.slave_synchronize.set_master_addr(master_addr)

    def _slave_put_refused(self) -> PutMessageResult:
        """HookUtils.checkBeforePutMessage on a slave: nothing is stored (logged once every 50000 refusals)."""
        if self._slave_puts_refused % 50_000 == 0:
            log.warning("message store is in slave mode, so putMessage is forbidden ")
        self._slave_puts_refused += 1
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason="the broker is a slave")

    # -- the request processors -------------------------------------------------------------------------------------

    def _processor_builders(self) -> dict[str, Callable[[], RequestProcessor]]:
        return {"send": self._send_processor, "pull": self._pull_processor,
                "client_manage": self._client_manage_processor, "consumer_manage": self._consumer_manage_processor,
                "admin": self._admin_processor, "send_back": self._send_back_processor,
                "end_transaction": self._end_transaction_processor,
                "auth_admin": lambda: AuthAdminProcessor(self.auth_metadata),
                "acl_admin": lambda: AclAdminProcessor(
                    self.plain_acl, broker_name=self.broker_config.broker_name, broker_addr=self.broker_addr,
                    cluster_name=self.broker_config.broker_cluster_name)}

    def _put(self, msgs: list[StoreMessage]) -> Awaitable[PutMessageResult]:
        """``put_messages`` looked up at each put, not when a processor was built: what replaces it (a test's slow
        put) reaches every sender."""
        return self.put_messages(msgs)

    def _send_processor(self) -> SendMessageProcessor:
        return SendMessageProcessor(
            broker_config=self.broker_config, store_config=self.store_config,
            topic_config_manager=self.topic_config_manager, subscription_group_manager=self.subscription_group_manager,
            schedule_message_service=self.schedule_message_service,
            transactional_message_service=self.transactional_message_service, put_messages=self._put,
            store_host=self.store.store_host, stats_manager=self.stats_manager, metrics=self.metrics)

    def _pull_processor(self) -> PullMessageProcessor:
        processor = PullMessageProcessor(
            broker_config=self.broker_config, store=self.store, topic_config_manager=self.topic_config_manager,
            subscription_group_manager=self.subscription_group_manager,
            consumer_offset_manager=self.consumer_offset_manager, consumer_manager=self.consumer_manager,
            consumer_filter_manager=self.consumer_filter_manager, stats=self.stats, stats_manager=self.stats_manager,
            metrics=self.metrics)
        processor.start(self.every)
        return processor

    def _client_manage_processor(self) -> ClientManageProcessor:
        processor = ClientManageProcessor(
            broker_config=self.broker_config, store=self.store, topic_config_manager=self.topic_config_manager,
            subscription_group_manager=self.subscription_group_manager, consumer_manager=self.consumer_manager,
            producer_manager=self.producer_manager, consumer_filter_manager=self.consumer_filter_manager)
        processor.attach(self.server)
        return processor

    def _consumer_manage_processor(self) -> ConsumerManageProcessor:
        return ConsumerManageProcessor(
            broker_config=self.broker_config, broker_addr=self.broker_addr, store=self.store,
            topic_config_manager=self.topic_config_manager, subscription_group_manager=self.subscription_group_manager,
            consumer_offset_manager=self.consumer_offset_manager, consumer_manager=self.consumer_manager,
            stats_manager=self.stats_manager)

    def _admin_processor(self) -> ProcessorFamily:
        """Java's AdminBrokerProcessor and QueryMessageProcessor, as four processors by concept."""
        return ProcessorFamily(
            AdminBrokerProcessor(
                broker_config=self.broker_config, store_config=self.store_config, store=self.store, stats=self.stats,
                topic_config_manager=self.topic_config_manager, consumer_manager=self.consumer_manager,
                schedule_message_service=self.schedule_message_service, broker_active=self._special_service_running,
                ha_state=self.ha_service.runtime_state, stats_manager=self.stats_manager,
                register_broker=lambda: register_broker_all(self)),
            TopicAdminProcessor(
                broker_config=self.broker_config, store=self.store, topic_config_manager=self.topic_config_manager,
                consumer_offset_manager=self.consumer_offset_manager,
                register_broker=lambda: register_broker_all(self)),
            GroupAdminProcessor(subscription_group_manager=self.subscription_group_manager,
                                consumer_offset_manager=self.consumer_offset_manager),
            QueryMessageProcessor(store=self.store))

    def _special_service_running(self) -> bool:
        """Java's isSpecialServiceRunning: a started master (brokerId 0) delivers delayed messages and checks
        transactions; a slave does neither, so clusterList shows it as not activated."""
        return self.started and self.broker_config.broker_id == MASTER_ID

    def _send_back_processor(self) -> SendMessageBackProcessor:
        return SendMessageBackProcessor(
            broker_config=self.broker_config, store=self.store, topic_config_manager=self.topic_config_manager,
            subscription_group_manager=self.subscription_group_manager,
            schedule_message_service=self.schedule_message_service, put_messages=self._put, metrics=self.metrics)

    def _end_transaction_processor(self) -> ProcessorFamily:
        """END_TRANSACTION, and rmq's END_TRANSACTION_BATCH."""
        parts = {"broker_config": self.broker_config, "store_config": self.store_config,
                 "transactional_message_service": self.transactional_message_service, "metrics": self.metrics}
        return ProcessorFamily(EndTransactionProcessor(**parts), EndTransactionBatchProcessor(**parts))

    # -- store access for processors ------------------------------------------------------------------------------

    async def put_messages(self, msgs: list[StoreMessage | EncodedRecord]) -> PutMessageResult:
        """Store ``msgs``; on a SYNC_MASTER the answer waits until a slave holds them too (unless the producer
        said not to wait: the WAIT property, as Java's needHandleHA). A slave stores no message."""
        if self.broker_config.broker_role is BrokerRole.SLAVE:
            return self._slave_put_refused()
        if self.dledger_store is not None:  # answered once the DLedger group committed it
            return await self.dledger_store.put_messages_async(msgs)
        if self._put_executor is None:
            result = self.store.put_messages(msgs)
        else:
            result = await asyncio.get_running_loop().run_in_executor(self._put_executor, self.store.put_messages,
                                                                      msgs)
        self.ha_service.notify_appended()
        if (self._sync_master and result.append is not None and result.status.ok
                and _waits_for_slaves(msgs[0])):
            replicated = await self.ha_service.wait_for_slaves(result.append.wrote_offset + result.append.wrote_bytes)
            if replicated is not PutMessageStatus.PUT_OK:
                result = dataclasses.replace(result, status=replicated)
        return result
