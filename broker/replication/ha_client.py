"""HAClient: a slave following its master's CommitLog (RocketMQ's DefaultHAClient).

It connects to the master's HA address (haMasterAddress, or the one the NameServer names once the master is
registered), reports its CommitLog max offset, and appends what the master sends at exactly that offset: the files
end up byte-identical, and the slave's own dispatch builds its ConsumeQueues and IndexFile from them. It reports
again after every read that appended bytes, and at least every haSendHeartbeatInterval. A frame that is not at its
CommitLog end, or silence for haHousekeepingInterval, closes the connection; it connects again 5 s later.

What ``mqadmin haStatus`` shows of a slave is kept as Java keeps it: the bytes read in the last second (headers
included), and the times in ms of the last read and the last report. The read time is also set at each attempt to
connect and is 0 while a connection is being closed; both start at the client's creation.
"""

from __future__ import annotations

import logging
import socket
import time

from broker.common.clock import now_ms
from broker.common.errors import HAProtocolError
from broker.replication.flow import FlowMonitor
from broker.replication.protocol import REPORT, TransferDecoder
from broker.store.config import FlushDiskType, MessageStoreConfig
from broker.store.message_store import MessageStore
from broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

RECONNECT_WAIT_S = 5.0  # Java's closeMasterAndWait / a failed connectMaster
CONNECT_TIMEOUT_S = 3.0
SOCKET_TIMEOUT_S = 1.0


def split_address(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


class HAClient(ServiceThread):
    name = "HAClient"

    def __init__(self, store: MessageStore, config: MessageStoreConfig) -> None:
        super().__init__()
        self.store = store
        self.config = config
        self.master_address = config.ha_master_address or None
        self.connected_to: str | None = None
        self.last_read_timestamp = now_ms()  # ms, for HA status (Java's lastReadTimestamp)
        self.last_write_timestamp = now_ms()  # ms of the last report (Java's lastWriteTimestamp)
        self.reported_offset = -1
        self.flow = FlowMonitor()  # bytes read from the master

    def update_master_address(self, addr: str | None) -> None:
        if addr != self.master_address:
            log.info("update master ha address, OLD: %s NEW: %s", self.master_address, addr)
            self.master_address = addr
            self.wakeup()

    def run(self) -> None:
        while not self.is_stopped():
            addr = self.master_address
            if not addr:
                self.wait_for_running(RECONNECT_WAIT_S)
                continue
            self.last_read_timestamp = now_ms()  # Java's connectMaster sets it whether or not the connect succeeds
            try:
                with socket.create_connection(split_address(addr), timeout=CONNECT_TIMEOUT_S) as sock:
                    log.info("HAClient connect to master %s", addr)
                    self.connected_to = addr
                    self._follow(sock, addr)
            except HAProtocolError as err:
                log.error("HAClient: %s; closing the connection with master %s", err, addr)
            except OSError as err:
                log.warning("HAClient: connection with master %s: %s", addr, err)
            finally:
                if self.connected_to is not None:
                    self.last_read_timestamp = 0  # Java's closeMaster
                self.connected_to = None
            if not self.is_stopped():
                self.wait_for_running(RECONNECT_WAIT_S)

    def _report(self, sock: socket.socket, offset: int) -> None:
        sock.sendall(REPORT.pack(offset))
        self.reported_offset = offset
        self.last_write_timestamp = now_ms()

    def _follow(self, sock: socket.socket, addr: str) -> None:
        """Report, then append the master's frames until the connection fails, goes silent or we stop."""
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        store = self.store
        heartbeat_ms = self.config.ha_send_heartbeat_interval
        housekeeping_s = self.config.ha_housekeeping_interval / 1000
        sync_flush = self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        decoder = TransferDecoder()
        self._report(sock, store.max_phy_offset)
        last_read = time.monotonic()
        while not self.is_stopped() and self.master_address == addr:
            if now_ms() - self.last_write_timestamp > heartbeat_ms:
                self._report(sock, self.reported_offset)
            try:
                count = sock.recv_into(decoder.receive_into())
            except TimeoutError:
                if time.monotonic() - last_read > housekeeping_s:
                    log.warning("HAClient, housekeeping: nothing from master %s for %.0f s", addr, housekeeping_s)
                    return
                continue
            if not count:
                log.info("HAClient: master %s closed the connection", addr)
                return
            last_read = time.monotonic()
            self.flow.add(count)
            self.last_read_timestamp = now_ms()
            decoder.received(count)
            if self._append(decoder):
                if sync_flush:
                    store.flush_commit_log()
                self._report(sock, store.max_phy_offset)

    def _append(self, decoder: TransferDecoder) -> bool:
        """Append the bytes of every whole frame received, in one go; True when there were any. Each frame must
        start at this slave's CommitLog end (any, while the slave holds nothing), as Java's dispatchReadRequest
        checks."""
        start = end = self.store.max_phy_offset
        chunks = []
        for offset, body in decoder.frames():
            if end != 0 and offset != end:
                raise HAProtocolError(f"master pushed offset {offset}, not this slave's CommitLog end {end}")
            if body:
                if not chunks:
                    start = offset
                chunks.append(body)
                end = offset + len(body)
        if chunks and not self.store.append_to_commit_log(start, chunks):
            file_size = self.config.mapped_file_size_commit_log
            raise HAProtocolError(f"cannot append {end - start} bytes at {start}: does the master use the same "
                                  f"mappedFileSizeCommitLog ({file_size})?")
        return bool(chunks)
