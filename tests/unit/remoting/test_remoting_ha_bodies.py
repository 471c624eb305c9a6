"""HARuntimeInfo, GET_BROKER_HA_STATUS's body: the broker writes it and ``mqadmin haStatus`` reads it with one
definition (broker/remoting/ha_bodies.py), in fastjson's form (tests/interop/test_official_mqadmin_ha.py holds it to
what Apache's master and slave send)."""

from __future__ import annotations

from broker.common.fastjson import decode_json, encode_json
from broker.remoting.ha_bodies import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo

# A master with two slaves, one of which has not reported yet (Java's -1s), as fastjson writes the bean.
MASTER_TEXT = (
    '{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,"maxOffset":0,'
    '"transferredByteInSecond":0},"haConnectionInfo":[{"addr":"127.0.0.1:51234","diff":0,"inSync":true,'
    '"slaveAckOffset":4096,"transferFromWhere":4096,"transferredByteInSecond":24},{"addr":"127.0.0.1:51240",'
    '"diff":4097,"inSync":true,"slaveAckOffset":-1,"transferFromWhere":-1,"transferredByteInSecond":0}],'
    '"inSyncSlaveNums":2,"master":true,"masterCommitLogMaxOffset":4096}'
)
# A slave: no connections, no master offsets, its HAClient filled.
SLAVE_TEXT = (
    '{"haClientRuntimeInfo":{"lastReadTimestamp":1764172800123,"lastWriteTimestamp":1764172801456,'
    '"masterAddr":"127.0.0.1:10912","masterFlushOffset":0,"maxOffset":4096,"transferredByteInSecond":2060},'
    '"haConnectionInfo":[],"inSyncSlaveNums":0,"master":false,"masterCommitLogMaxOffset":0}'
)

MASTER = HARuntimeInfo(master=True, master_commit_log_max_offset=4096, in_sync_slave_nums=2, ha_connection_info=[
    HAConnectionRuntimeInfo("127.0.0.1:51234", 4096, 0, True, 24, 4096),
    HAConnectionRuntimeInfo("127.0.0.1:51240", -1, 4097, True, 0, -1)])
SLAVE = HARuntimeInfo(ha_client_runtime_info=HAClientRuntimeInfo(
    master_addr="127.0.0.1:10912", transferred_byte_in_second=2060, max_offset=4096,
    last_read_timestamp=1764172800123, last_write_timestamp=1764172801456))


def test_master_body_is_fastjsons_text_and_reads_back() -> None:
    assert encode_json(MASTER.to_json()) == MASTER_TEXT
    assert HARuntimeInfo.from_json(decode_json(MASTER_TEXT)) == MASTER


def test_slave_body_is_fastjsons_text_and_reads_back() -> None:
    assert encode_json(SLAVE.to_json()) == SLAVE_TEXT
    assert HARuntimeInfo.from_json(decode_json(SLAVE_TEXT)) == SLAVE


def test_a_slave_without_a_master_address_leaves_it_out() -> None:
    """fastjson drops null properties; a reader gets None back (haStatus prints "null")."""
    info = HARuntimeInfo(ha_client_runtime_info=HAClientRuntimeInfo(max_offset=7))
    text = encode_json(info.to_json())
    assert "masterAddr" not in text
    assert HARuntimeInfo.from_json(decode_json(text)).ha_client_runtime_info.master_addr is None


def test_missing_properties_read_as_javas_defaults() -> None:
    """A body with only some properties (an older or trimmed writer) reads as a fresh Java bean would."""
    info = HARuntimeInfo.from_json({"master": True, "haConnectionInfo": [{"addr": "h:1"}]})
    assert info == HARuntimeInfo(master=True, ha_connection_info=[HAConnectionRuntimeInfo("h:1", 0, 0, False, 0, 0)])
