"""The JSON body of GET_BROKER_HA_STATUS (remoting ``protocol/body/HARuntimeInfo``): a master's slaves, or a
slave's view of its master. The broker writes it, ``mqadmin haStatus`` reads it.

Rule 1: the field names of this body appear here and nowhere else. fastjson writes bean properties in alphabetical
order, so ``to_json`` lists them that way; a boolean getter ``isMaster`` is the property ``master``. Java's
HAClientRuntimeInfo also has a field ``isActivated``, but no getter, so fastjson never writes it. A master's body
still carries an HAClientRuntimeInfo (all zeros, no masterAddr) and a slave's an empty haConnectionInfo, as Java's
freshly built bean does.

Examples:
    >>> from broker.common.fastjson import decode_json, encode_json
    >>> info = HARuntimeInfo(master=True, master_commit_log_max_offset=1024, in_sync_slave_nums=1,
    ...                      ha_connection_info=[HAConnectionRuntimeInfo("127.0.0.1:50000", 1024, 0, True, 24, 1024)])
    >>> text = encode_json(info.to_json())
    >>> text[text.index('"haConnectionInfo"'):]
    '"haConnectionInfo":[{"addr":"127.0.0.1:50000","diff":0,"inSync":true,"slaveAckOffset":1024,"transferFromWhere":1024,\
"transferredByteInSecond":24}],"inSyncSlaveNums":1,"master":true,"masterCommitLogMaxOffset":1024}'
    >>> HARuntimeInfo.from_json(decode_json(text)) == info
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class HAConnectionRuntimeInfo:
    """One slave as its master serves it: what it acknowledged, how far behind, where the master sends from."""

    addr: str
    slave_ack_offset: int
    diff: int
    in_sync: bool
    transferred_byte_in_second: int
    transfer_from_where: int

    def to_json(self) -> dict[str, Any]:
        return {"addr": self.addr, "diff": self.diff, "inSync": self.in_sync, "slaveAckOffset": self.slave_ack_offset,
                "transferFromWhere": self.transfer_from_where,
                "transferredByteInSecond": self.transferred_byte_in_second}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HAConnectionRuntimeInfo:
        return cls(str(data.get("addr", "")), int(data.get("slaveAckOffset", 0)), int(data.get("diff", 0)),
                   bool(data.get("inSync", False)), int(data.get("transferredByteInSecond", 0)),
                   int(data.get("transferFromWhere", 0)))


@dataclass(frozen=True, slots=True)
class HAClientRuntimeInfo:
    """A slave's HAClient: its master's HA address, its CommitLog end, when it last read and reported, in ms."""

    master_addr: str | None = None
    transferred_byte_in_second: int = 0
    max_offset: int = 0
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"lastReadTimestamp": self.last_read_timestamp, "lastWriteTimestamp": self.last_write_timestamp,
                "masterAddr": self.master_addr, "masterFlushOffset": self.master_flush_offset,
                "maxOffset": self.max_offset, "transferredByteInSecond": self.transferred_byte_in_second}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HAClientRuntimeInfo:
        addr = data.get("masterAddr")
        return cls(None if addr is None else str(addr), int(data.get("transferredByteInSecond", 0)),
                   int(data.get("maxOffset", 0)), int(data.get("lastReadTimestamp", 0)),
                   int(data.get("lastWriteTimestamp", 0)), int(data.get("masterFlushOffset", 0)))


@dataclass(slots=True)
class HARuntimeInfo:
    """GET_BROKER_HA_STATUS: a master fills the offsets and ``ha_connection_info``, a slave
    ``ha_client_runtime_info``."""

    master: bool = False
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: list[HAConnectionRuntimeInfo] = field(default_factory=list)
    ha_client_runtime_info: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)

    def to_json(self) -> dict[str, Any]:
        return {"haClientRuntimeInfo": self.ha_client_runtime_info.to_json(),
                "haConnectionInfo": [c.to_json() for c in self.ha_connection_info],
                "inSyncSlaveNums": self.in_sync_slave_nums, "master": self.master,
                "masterCommitLogMaxOffset": self.master_commit_log_max_offset}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HARuntimeInfo:
        client = data.get("haClientRuntimeInfo")
        return cls(bool(data.get("master", False)), int(data.get("masterCommitLogMaxOffset", 0)),
                   int(data.get("inSyncSlaveNums", 0)),
                   [HAConnectionRuntimeInfo.from_json(c) for c in data.get("haConnectionInfo") or ()],
                   HAClientRuntimeInfo() if client is None else HAClientRuntimeInfo.from_json(client))
