"""SlaveSynchronize: a slave copies its master's metadata over remoting (Java's broker/slave/SlaveSynchronize, 5.3.3).

Sync is one-way: only the slave asks, the master never pushes. What is copied, and how:

    GET_ALL_TOPIC_CONFIG              topics: replaced (deletions included) when the master's DataVersion differs
    GET_ALL_CONSUMER_OFFSET           consumer offsets: the master's topic@group entries over ours, its DataVersion
    GET_ALL_DELAY_OFFSET              delayOffset.json: the master's text, read back by the schedule service
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG  subscription groups: replaced when the master's DataVersion differs

Java also syncs message request modes (GET_ALL_MESSAGE_REQUEST_MODE) and, with the timer wheel, timer metrics and
its checkpoint: rmq keeps neither (no QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE processor, no timer wheel), so
there is nothing to copy them into, and they are skipped. Java reads topics over the master's VIP channel (port - 2);
rmq listens on one port, and Apache's master answers on both, so the plain address is used.

The master's address comes from the NameServer's answer to REGISTER_BROKER (``set_master_addr``, through
BrokerController.on_registered). A master that cannot be reached, or answers an error, is logged; the next sync tries
again. Java's schedule: checked every 3 s from 10 s after start, a full sync once 60 s passed since the last one
(counted from the broker's start, so the first sync comes about a minute in); ``slaveSynchronizeInterval`` (ours)
replaces the 60 s, and the check period and first delay shrink with it (a quarter of it, and it, at most).

Examples:
    >>> sync = SlaveSynchronize(broker_addr="127.0.0.1:10921", client=client, interval_ms=60_000, ...)  # doctest: +SKIP
    >>> sync.set_master_addr("127.0.0.1:10911"); sync.start(controller.every)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.common.errors import broker_error
from broker.common.fastjson import decode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request

if TYPE_CHECKING:
    from broker.remoting.client import RemotingClient
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.schedule import ScheduleMessageService

log = logging.getLogger(__name__)

SYNC_TIMEOUT_MS = 3000  # BrokerOuterAPI's invokeSync timeout for each GET_ALL_* call
CHECK_PERIOD_S = 3.0  # Java's fixed rate
FIRST_CHECK_S = 10.0  # Java's initial delay

# BrokerController.every: run an action every so many seconds until the broker shuts down.
Every = Callable[[float, Callable[[], object]], None]


class SlaveSynchronize:
    def __init__(self, *, broker_addr: str, client: RemotingClient, interval_ms: int,
                 topic_config_manager: TopicConfigManager, consumer_offset_manager: ConsumerOffsetManager,
                 subscription_group_manager: SubscriptionGroupManager,
                 schedule_message_service: ScheduleMessageService) -> None:
        self.broker_addr = broker_addr
        self.client = client
        self.interval_s = interval_ms / 1000
        self.topic_config_manager = topic_config_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.subscription_group_manager = subscription_group_manager
        self.schedule_message_service = schedule_message_service
        self.master_addr: str | None = None
        self._created = time.monotonic()
        self._first_check_s = min(FIRST_CHECK_S, self.interval_s)
        self.last_sync = self._created  # Java's lastSyncTimeMs starts when the BrokerController is made
        self.syncs = 0
        self.active = True  # a DLedger member syncs only while it is a follower (pause / resume)

    def pause(self) -> None:
        """Stop syncing (a DLedger member became leader) and forget the master."""
        self.active = False
        self.set_master_addr(None)

    def resume(self) -> None:
        """Sync again (a DLedger member became follower); the master comes with the next registration's answer."""
        self.active = True
        self.set_master_addr(None)

    def set_master_addr(self, master_addr: str | None) -> None:
        if master_addr != self.master_addr:
            log.info("Update master address from %s to %s", self.master_addr, master_addr)
            self.master_addr = master_addr

    # -- the schedule -----------------------------------------------------------------------------------------------

    def start(self, every: Every) -> None:
        """Check every min(3 s, interval / 4), the first check min(10 s, interval) after the broker was made."""
        every(min(CHECK_PERIOD_S, self.interval_s / 4), self.check)

    async def check(self) -> None:
        now = time.monotonic()
        if not self.active or now - self._created < self._first_check_s or now - self.last_sync <= self.interval_s:
            return
        await self.sync_all()
        self.last_sync = time.monotonic()

    async def sync_all(self) -> None:
        await self.sync_topic_config()
        await self.sync_consumer_offset()
        await self.sync_delay_offset()
        await self.sync_subscription_group_config()
        self.syncs += 1

    # -- each table -------------------------------------------------------------------------------------------------

    def _master(self) -> str | None:
        """The master to ask, None when it is unknown (or this broker itself)."""
        master = self.master_addr
        return master if master is not None and master != self.broker_addr else None

    async def _fetch(self, master: str, code: RequestCode) -> bytes:
        response = await self.client.invoke(master, create_request(code), SYNC_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response.code, response.remark, master)
        return response.body

    async def _fetch_json(self, master: str, code: RequestCode) -> Any:
        return decode_json((await self._fetch(master, code)).decode())

    async def sync_topic_config(self) -> None:
        master = self._master()
        if master is None:
            return
        try:
            manager = self.topic_config_manager
            configs, version = manager.decode(await self._fetch_json(master, RequestCode.GET_ALL_TOPIC_CONFIG))
            await asyncio.to_thread(manager.sync_from_master, configs, version)
            log.info("Update slave topic config from master, %s", master)
        except Exception:
            log.exception("SyncTopicConfig Exception, %s", master)

    async def sync_consumer_offset(self) -> None:
        master = self._master()
        if master is None:
            return
        try:
            manager = self.consumer_offset_manager
            table, version = manager.decode(await self._fetch_json(master, RequestCode.GET_ALL_CONSUMER_OFFSET))
            await asyncio.to_thread(manager.sync_from_master, table, version)
            log.info("Update slave consumer offset from master, %s", master)
        except Exception:
            log.exception("SyncConsumerOffset Exception, %s", master)

    async def sync_delay_offset(self) -> None:
        master = self._master()
        if master is None:
            return
        try:
            text = (await self._fetch(master, RequestCode.GET_ALL_DELAY_OFFSET)).decode()
            if text:
                await asyncio.to_thread(self.schedule_message_service.sync_delay_offset, text)
            log.info("Update slave delay offset from master, %s", master)
        except Exception:
            log.exception("SyncDelayOffset Exception, %s", master)

    async def sync_subscription_group_config(self) -> None:
        master = self._master()
        if master is None:
            return
        try:
            manager = self.subscription_group_manager
            data = await self._fetch_json(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            groups, _forbidden, version = manager.decode(data)  # Java's wrapper has no forbidden table to copy
            if await asyncio.to_thread(manager.sync_from_master, groups, version):
                log.info("Update slave Subscription Group from master, %s", master)
        except Exception:
            log.exception("SyncSubscriptionGroup Exception, %s", master)
