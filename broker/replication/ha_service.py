"""HAService: a broker's replication (RocketMQ's DefaultHAService).

Every broker listens on haListenPort (AcceptSocketService) and serves each slave that connects with an
HAConnection; a SLAVE also runs an HAClient that follows its master. What slaves acknowledge is tracked here:
``push2slave_max_offset`` for status, and the offset enough slaves hold for SYNC_MASTER puts to wait on.

SYNC_MASTER, deliberately stricter than Apache 5.x: 5.x waits for slaves only when inSyncReplicas > 1, so a broker
configured SYNC_MASTER with the defaults acknowledges at once. Here a SYNC_MASTER put always waits for at least
one slave (inSyncReplicas copies, the master's included, and never fewer than two): the answer is PUT_OK once
they hold it, FLUSH_SLAVE_TIMEOUT after slaveTimeout, and SLAVE_NOT_AVAILABLE at once when too few slaves are
connected and within haMaxGapNotInSync (RocketMQ 4.x's answer). The message is stored on the master in every case.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading

from broker.replication.group_transfer import GroupTransferService
from broker.replication.ha_client import HAClient
from broker.replication.ha_connection import SOCKET_TIMEOUT_S, HAConnection
from broker.replication.runtime import ClientState, ConnectionState, HAState
from broker.store.config import BrokerRole, MessageStoreConfig
from broker.store.message_store import MessageStore
from broker.store.results import PutMessageStatus
from broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)


class AcceptSocketService(ServiceThread):
    """Accepts slaves on haListenPort; each becomes an HAConnection."""

    name = "AcceptSocketService"

    def __init__(self, service: HAService, host: str, port: int) -> None:
        super().__init__()
        self.service = service
        self.server = socket.create_server((host, port), reuse_port=False)
        self.server.settimeout(SOCKET_TIMEOUT_S)
        self.port = self.server.getsockname()[1]

    def run(self) -> None:
        try:
            while not self.is_stopped():
                try:
                    sock, addr = self.server.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.is_stopped():
                        return
                    raise
                log.info("HAService receive new connection, %s:%s", *addr[:2])
                self.service.add_connection(HAConnection(self.service, sock, f"{addr[0]}:{addr[1]}"))
        finally:
            self.server.close()


class HAService:
    def __init__(self, store: MessageStore, config: MessageStoreConfig, role: BrokerRole,
                 bind_host: str = "0.0.0.0") -> None:
        self.store = store
        self.config = config
        self.role = role
        self.bind_host = bind_host
        self.connections: list[HAConnection] = []
        self._lock = threading.Lock()
        self.push2slave_max_offset = 0
        self.group_transfer = GroupTransferService()
        # Copies a SYNC_MASTER put waits for, the master's included: at least one slave (see the module docstring).
        self.need_acks = max(config.in_sync_replicas, 2)
        self.ha_client = HAClient(store, config) if role is BrokerRole.SLAVE else None
        self._acceptor: AcceptSocketService | None = None
        self.transferred_bytes = 0  # sent to slaves since start

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.group_transfer.start(loop)
        self._acceptor = AcceptSocketService(self, self.bind_host, self.config.ha_listen_port)
        self._acceptor.start()
        if self.ha_client is not None:
            self.ha_client.start()

    def shutdown(self) -> None:
        if self.ha_client is not None:
            self.ha_client.shutdown()
        if self._acceptor is not None:
            self._acceptor.shutdown()
        for conn in list(self.connections):
            conn.shutdown()
        self.group_transfer.release_all()

    # -- connections ------------------------------------------------------------------------------------------------

    def add_connection(self, conn: HAConnection) -> None:
        with self._lock:
            self.connections.append(conn)
        conn.start()

    def remove_connection(self, conn: HAConnection) -> None:
        with self._lock:
            if conn in self.connections:
                self.connections.remove(conn)

    def notify_appended(self) -> None:
        """Records were appended: slaves' writers send them now rather than at their next idle wake-up."""
        for conn in self.connections:
            conn.wakeup()

    def transferred(self, count: int) -> None:
        self.transferred_bytes += count

    # -- acknowledgements ---------------------------------------------------------------------------------------------

    def notify_transfer_some(self, offset: int) -> None:
        """A slave holds everything below ``offset`` (Java's notifyTransferSome): raise push2SlaveMaxOffset and
        release the SYNC_MASTER puts that now have enough copies."""
        with self._lock:
            self.push2slave_max_offset = max(self.push2slave_max_offset, offset)
            acks = sorted((c.slave_ack_offset for c in self.connections), reverse=True)
        slaves_needed = self.need_acks - 1
        if len(acks) >= slaves_needed:
            self.group_transfer.replicated(acks[slaves_needed - 1])

    def in_sync_slaves(self) -> int:
        """Connected slaves within haMaxGapNotInSync of this CommitLog's end."""
        end = self.store.max_phy_offset
        gap = self.config.ha_max_gap_not_in_sync
        return sum(1 for c in self.connections if c.slave_ack_offset >= 0 and end - c.slave_ack_offset < gap)

    async def wait_for_slaves(self, next_offset: int) -> PutMessageStatus:
        """A SYNC_MASTER put's replication: PUT_OK once enough slaves hold the bytes below ``next_offset``."""
        if self.in_sync_slaves() < self.need_acks - 1:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if await self.group_transfer.wait(next_offset, self.config.slave_timeout / 1000):
            return PutMessageStatus.PUT_OK
        return PutMessageStatus.FLUSH_SLAVE_TIMEOUT

    # -- the slave's side ---------------------------------------------------------------------------------------------

    def update_master_address(self, ha_address: str | None) -> None:
        """A slave learns (or loses) its master's HA address; haMasterAddress in the config wins over it."""
        if self.ha_client is not None and not self.config.ha_master_address:
            self.ha_client.update_master_address(ha_address)

    # -- status -----------------------------------------------------------------------------------------------------

    def runtime_state(self) -> HAState:
        """GET_BROKER_HA_STATUS (Java's getRuntimeInfo): a SLAVE reports its HAClient, any other role its slaves."""
        put_where = self.store.max_phy_offset
        client = self.ha_client
        if client is not None:
            checkpoint = self.store.checkpoint
            return HAState(master=False, client=ClientState(
                master_addr=client.master_address, max_offset=put_where,
                last_read_timestamp=client.last_read_timestamp, last_write_timestamp=client.last_write_timestamp,
                transferred_byte_in_second=client.flow.transferred_byte_in_second(),
                master_flush_offset=checkpoint.value.master_flushed_offset if checkpoint is not None else 0))
        with self._lock:
            connections = list(self.connections)
        gap = self.config.ha_max_gap_not_in_sync
        states = tuple(ConnectionState(
            addr=c.client_address, slave_ack_offset=c.slave_ack_offset, diff=put_where - c.slave_ack_offset,
            in_sync=put_where - c.slave_ack_offset < gap,  # Java's isInSyncSlave: no check of a first report
            transferred_byte_in_second=c.flow.transferred_byte_in_second(),
            transfer_from_where=c.next_transfer_from_where) for c in connections)
        return HAState(master=True, master_commit_log_max_offset=put_where,
                       in_sync_slave_nums=sum(s.in_sync for s in states), connections=states)

    @property
    def ha_port(self) -> int:
        return self._acceptor.port if self._acceptor is not None else self.config.ha_listen_port

    def slave_fall_behind_bytes(self) -> int:
        """How far the furthest-behind connected slave lags this CommitLog's end (0 without slaves)."""
        end = self.store.max_phy_offset
        return max((end - max(c.slave_ack_offset, 0) for c in self.connections), default=0)
