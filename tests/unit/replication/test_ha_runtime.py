"""What GET_BROKER_HA_STATUS reports: HAService's state (Java's DefaultHAService.getRuntimeInfo) on a master and on a
slave, and the HARuntimeInfo body the broker makes of it."""

from __future__ import annotations

from types import SimpleNamespace

from broker.remoting.ha_bodies import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
from broker.replication.flow import FlowMonitor
from broker.replication.ha_service import HAService
from broker.replication.runtime import ClientState, ConnectionState, HAState
from broker.server.processors.admin import ha_runtime_info
from broker.store.config import BrokerRole, MessageStoreConfig
from broker.store.layout import Checkpoint

GAP = 1000  # haMaxGapNotInSync


def fake_store(end: int, master_flushed_offset: int = 0) -> SimpleNamespace:
    checkpoint = SimpleNamespace(value=Checkpoint(master_flushed_offset=master_flushed_offset))
    return SimpleNamespace(max_phy_offset=end, checkpoint=checkpoint)


def connection(addr: str, ack: int, next_offset: int, sent: int = 0) -> SimpleNamespace:
    clock = iter([0.0, 0.0, 1.5])  # created, the add, then a read one second on: ``sent`` is the last second's
    flow = FlowMonitor(lambda: next(clock))
    flow.add(sent)
    return SimpleNamespace(client_address=addr, slave_ack_offset=ack, next_transfer_from_where=next_offset, flow=flow)


def service(role: BrokerRole, store: SimpleNamespace, **config: object) -> HAService:
    return HAService(store, MessageStoreConfig(store_path_root_dir="/nonexistent", ha_max_gap_not_in_sync=GAP,
                                               **config), role)  # type: ignore[arg-type]


def test_a_master_reports_each_slave_and_counts_those_in_sync() -> None:
    ha = service(BrokerRole.ASYNC_MASTER, fake_store(5000))
    ha.connections = [connection("127.0.0.1:50001", 5000, 5000, 36),  # caught up
                      connection("127.0.0.1:50002", 3000, 3200),  # 2000 behind: falls behind
                      connection("127.0.0.1:50003", -1, -1)]  # no report yet
    state = ha.runtime_state()
    assert state == HAState(master=True, master_commit_log_max_offset=5000, in_sync_slave_nums=1, connections=(
        ConnectionState("127.0.0.1:50001", 5000, 0, True, 36, 5000),
        ConnectionState("127.0.0.1:50002", 3000, 2000, False, 0, 3200),
        ConnectionState("127.0.0.1:50003", -1, 5001, False, 0, -1)))


def test_a_slave_that_has_not_reported_counts_in_sync_on_a_small_master_as_in_java() -> None:
    """isInSyncSlave compares the gap only: -1 is within haMaxGapNotInSync of a CommitLog end below it."""
    ha = service(BrokerRole.SYNC_MASTER, fake_store(10))
    ha.connections = [connection("127.0.0.1:50003", -1, -1)]
    state = ha.runtime_state()
    assert state.in_sync_slave_nums == 1 and state.connections[0].diff == 11 and state.connections[0].in_sync


def test_a_slave_reports_its_client() -> None:
    ha = service(BrokerRole.SLAVE, fake_store(4096, master_flushed_offset=77), ha_master_address="127.0.0.1:10912")
    client = ha.ha_client
    assert client is not None
    client.last_read_timestamp, client.last_write_timestamp = 1_700_000_000_123, 1_700_000_000_456
    state = ha.runtime_state()
    assert state == HAState(master=False, client=ClientState("127.0.0.1:10912", 4096, 1_700_000_000_123,
                                                             1_700_000_000_456, 0, 77))


def test_the_broker_writes_the_state_as_java_fills_the_bean() -> None:
    master = HAState(master=True, master_commit_log_max_offset=5000, in_sync_slave_nums=1,
                     connections=(ConnectionState("127.0.0.1:50001", 5000, 0, True, 36, 5000),))
    assert ha_runtime_info(master) == HARuntimeInfo(
        master=True, master_commit_log_max_offset=5000, in_sync_slave_nums=1,
        ha_connection_info=[HAConnectionRuntimeInfo("127.0.0.1:50001", 5000, 0, True, 36, 5000)])
    slave = HAState(master=False, client=ClientState(None, 4096, 1, 2, 3, 0))
    assert ha_runtime_info(slave) == HARuntimeInfo(ha_client_runtime_info=HAClientRuntimeInfo(
        master_addr=None, transferred_byte_in_second=3, max_offset=4096, last_read_timestamp=1,
        last_write_timestamp=2, master_flush_offset=0))
