"""HAConnection: one slave as its master serves it (RocketMQ's DefaultHAConnection), two threads on one socket.

ReadSocketService reads the slave's reports: the first says where to start, each one acknowledges what the slave
holds (what SYNC_MASTER puts wait for). WriteSocketService sends the CommitLog from there in frames of at most
haTransferBatchSize bytes, straight from the mapped files, and a heartbeat after haSendHeartbeatInterval without
data. A slave that reports nothing for haHousekeepingInterval, or reports an offset this master cannot serve
(beyond its end, below its first file), loses the connection; the slave connects again and says where it is.

Its FlowMonitor counts what Java's counts: the 12-byte frame headers written (data frames and heartbeats), not the
CommitLog bytes after them, so ``mqadmin haStatus`` on a master shows the same #TransferSpeed as Apache's.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from broker.common.errors import HAProtocolError
from broker.replication.flow import FlowMonitor
from broker.replication.protocol import MASTER_READ_BUFFER_SIZE, TRANSFER_HEADER, ReportDecoder, heartbeat
from broker.store.service_thread import ServiceThread

if TYPE_CHECKING:
    from broker.replication.ha_service import HAService

log = logging.getLogger(__name__)

SOCKET_TIMEOUT_S = 1.0  # how often a blocked thread looks whether it should stop (Java's selector.select(1000))
IDLE_WAIT_S = 0.1  # a writer with nothing to send waits this long unless a put wakes it (Java: 100 ms)


def send_all(sock: socket.socket, parts: list, stopped: threading.Event) -> None:
    """Send ``parts`` whole (one ``sendmsg``, no copy), going on after partial sends and timeouts until done or
    ``stopped``."""
    views = [memoryview(p) for p in parts]
    while views:
        try:
            sent = sock.sendmsg(views)
        except TimeoutError:
            if stopped.is_set():
                raise ConnectionAbortedError("stopped") from None
            continue
        while sent:
            if sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


class HAConnection:
    def __init__(self, service: HAService, sock: socket.socket, client_address: str) -> None:
        self.service = service
        self.sock = sock
        self.client_address = client_address
        self.slave_request_offset = -1  # where the slave asked to start (its first report)
        self.slave_ack_offset = -1  # what the slave holds (its last report)
        self.next_transfer_from_where = -1  # the next offset to send (Java's getTransferFromWhere)
        self.flow = FlowMonitor()  # frame header bytes sent (see the module docstring)
        self.created = time.time()
        self._closed = threading.Event()
        self._reader = ReadSocketService(self)
        self._writer = WriteSocketService(self)
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def wakeup(self) -> None:
        """Data was appended: the writer should look now rather than at its next idle wake-up."""
        self._writer.wakeup()

    def close(self, reason: str = "") -> None:
        """Close the socket (both threads then end) and leave the service; safe from any thread, any number of
        times."""
        if self._closed.is_set():
            return
        self._closed.set()
        if reason:
            log.info("HA connection with slave %s closed: %s", self.client_address, reason)
        self._reader.make_stop()
        self._writer.make_stop()
        self._writer.wakeup()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.service.remove_connection(self)

    def shutdown(self) -> None:
        """Close and wait for both threads (the broker's shutdown)."""
        self.close()
        self._reader.shutdown()
        self._writer.shutdown()

    def acknowledged(self, offset: int) -> None:
        """A report from the slave: ``offset`` is what it holds."""
        store = self.service.store
        if offset > store.max_phy_offset:
            raise HAProtocolError(f"slave reports offset {offset}, beyond this master's CommitLog end "
                                  f"{store.max_phy_offset}")
        if offset < 0:
            raise HAProtocolError(f"slave reports a negative offset {offset}")
        self.slave_ack_offset = offset
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            self._writer.wakeup()
        self.service.notify_transfer_some(offset)


class ReadSocketService(ServiceThread):
    name = "HAReadSocketService"

    def __init__(self, connection: HAConnection) -> None:
        super().__init__()
        self.connection = connection

    def run(self) -> None:
        conn = self.connection
        decoder = ReportDecoder()
        housekeeping = conn.service.config.ha_housekeeping_interval / 1000
        last_read = time.monotonic()
        reason = "slave closed the connection"
        try:
            while not self.is_stopped():
                try:
                    data = conn.sock.recv(MASTER_READ_BUFFER_SIZE)
                except TimeoutError:
                    if time.monotonic() - last_read > housekeeping:
                        reason = f"housekeeping: nothing from the slave for {housekeeping:.0f} s"
                        break
                    continue
                if not data:
                    break
                last_read = time.monotonic()
                offset = decoder.received(data)
                if offset is not None:
                    conn.acknowledged(offset)
        except HAProtocolError as err:
            reason = str(err)
            log.warning("HA slave %s: %s", conn.client_address, reason)
        except OSError as err:
            reason = f"read failed: {err}"
        conn.close("" if self.is_stopped() else reason)


class WriteSocketService(ServiceThread):
    name = "HAWriteSocketService"

    def __init__(self, connection: HAConnection) -> None:
        super().__init__()
        self.connection = connection

    def run(self) -> None:
        conn = self.connection
        try:
            self._transfer()
        except HAProtocolError as err:
            log.warning("HA slave %s: %s", conn.client_address, err)
            conn.close(str(err))
        except OSError as err:  # includes a close from the reader
            conn.close("" if self.is_stopped() else f"write failed: {err}")

    def _first_offset(self) -> int:
        """Where to start: the slave's offset, or for an empty slave the start of this master's last file."""
        conn = self.connection
        store = conn.service.store
        if conn.slave_request_offset == 0:
            end = store.max_phy_offset
            return max(0, end - end % conn.service.config.mapped_file_size_commit_log)
        if conn.slave_request_offset < store.min_phy_offset:
            raise HAProtocolError(f"slave is at offset {conn.slave_request_offset}, below this master's first "
                                  f"CommitLog offset {store.min_phy_offset}: what it misses is deleted here, so its "
                                  f"store must be rebuilt")
        return conn.slave_request_offset

    def _transfer(self) -> None:
        conn = self.connection
        config = conn.service.config
        store = conn.service.store
        stopped = self._stopped
        while conn.slave_request_offset < 0:  # the slave's first report says where to start
            if self.is_stopped():
                return
            self.wait_for_running(SOCKET_TIMEOUT_S)
        conn.next_transfer_from_where = self._first_offset()
        log.info("master transfers data from %d to slave %s (slave requested %d)", conn.next_transfer_from_where,
                 conn.client_address, conn.slave_request_offset)
        heartbeat_s = config.ha_send_heartbeat_interval / 1000
        batch = config.ha_transfer_batch_size
        last_write = time.monotonic()
        while not self.is_stopped():
            data = store.commit_log_data(conn.next_transfer_from_where, batch)
            if data is None:
                if time.monotonic() - last_write > heartbeat_s:
                    send_all(conn.sock, [heartbeat(conn.next_transfer_from_where)], stopped)
                    conn.flow.add(TRANSFER_HEADER.size)
                    last_write = time.monotonic()
                self.wait_for_running(IDLE_WAIT_S)
                continue
            offset = conn.next_transfer_from_where
            send_all(conn.sock, [TRANSFER_HEADER.pack(offset, len(data)), data], stopped)
            conn.flow.add(TRANSFER_HEADER.size)
            conn.next_transfer_from_where = offset + len(data)
            last_write = time.monotonic()
            conn.service.transferred(len(data))
