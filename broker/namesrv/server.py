"""NamesrvController: the NameServer process's parts wired together, and its liveness scan.

A RemotingServer answers with NamesrvProcessor's table; the route table hears of every closed connection (Java's
BrokerHousekeepingService: a broker whose connection closes is unregistered at once); every
``scanNotActiveBrokerInterval`` ms the scan drops brokers silent for longer than their heartbeat timeout (120 s, or
the ``heartbeatTimeoutMillis`` of their registration) and closes their connections. Several NameServers are simply
several independent processes: brokers register with each.

Examples:
    >>> async with NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1")) as namesrv:
    ...     print(namesrv.address)  # doctest: +SKIP
    127.0.0.1:41234
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from broker.common.clock import now_ms
from broker.common.properties import write_config_file
from broker.common.tasks import cancel_and_wait
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.kv_config import KVConfigManager
from broker.namesrv.processor import NamesrvProcessor
from broker.namesrv.route_table import RouteInfoManager
from broker.remoting.connection import RemotingConnection
from broker.remoting.server import RemotingServer

if TYPE_CHECKING:
    from broker.namesrv.metrics import NamesrvMetricsManager

log = logging.getLogger(__name__)


class NamesrvController:
    def __init__(self, config: NamesrvConfig, *, clock: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.route_info_manager = RouteInfoManager(
            clock=clock,
            support_acting_master=config.support_acting_master,
            delete_topic_with_broker_registration=config.delete_topic_with_broker_registration,
        )
        self.kv_config_manager = KVConfigManager(config.kv_config_path)
        self.processor = NamesrvProcessor(self)
        self.remoting_server = RemotingServer(
            config.bind_address,
            config.listen_port,
            processors=self.processor.processors(),
            on_connection_closed=self._on_connection_closed,
        )
        self._scan_task: asyncio.Task[None] | None = None
        self.metrics: NamesrvMetricsManager | None = None
        if config.metrics.enabled:  # metricsExporterType=PROM (prometheus-client imported then only)
            from broker.namesrv.metrics import NamesrvMetricsManager

            self.metrics = NamesrvMetricsManager(self)

    @property
    def port(self) -> int:
        return self.remoting_server.port

    @property
    def address(self) -> str:
        return self.remoting_server.address

    async def start(self) -> NamesrvController:
        """Load kvConfig.json, listen, start the liveness scan. Raises MetadataCorrupt for an unreadable KV file,
        OSError when the port cannot be bound, ConfigError when the metrics port cannot."""
        self.kv_config_manager.load()
        await self.remoting_server.start()
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except BaseException:
                await self.remoting_server.stop()
                raise
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan")
        return self

    async def stop(self) -> None:
        await cancel_and_wait(self._scan_task)
        self._scan_task = None
        await self.remoting_server.stop()
        if self.metrics is not None:
            await self.metrics.shutdown()

    async def __aenter__(self) -> NamesrvController:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def update_config(self, props: Mapping[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG: the new values apply from the next request (the port and paths stay as bound), and
        are written to configStorePath (the ``-c`` file, else ~/namesrv/namesrv.properties, as Java's
        Configuration.persist), so the NameServer starts again with them. Java rewrites that file with every setting;
        rmq sets only the keys changed, in place (``write_config_file``), so the file keeps its comments and order.
        A file that cannot be written is logged; the change stays live (Java does the same)."""
        self.config = self.config.updated(props)
        routes = self.route_info_manager
        routes.support_acting_master = self.config.support_acting_master
        routes.delete_topic_with_broker_registration = self.config.delete_topic_with_broker_registration
        log.info("namesrv config updated: %s", dict(props))
        try:
            write_config_file(self.config.config_store_path, props)
        except OSError:
            log.exception("namesrv config: the change is live but %s could not be written",
                          self.config.config_store_path)

    def _on_connection_closed(self, conn: RemotingConnection) -> None:
        self.route_info_manager.on_channel_destroy(conn)

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)
            await self.scan_not_active_broker()

    async def scan_not_active_broker(self) -> None:
        """One liveness scan: expired brokers are unregistered and their connections closed."""
        for channel in self.route_info_manager.scan_not_active_broker():
            if isinstance(channel, RemotingConnection):
                await channel.close()
