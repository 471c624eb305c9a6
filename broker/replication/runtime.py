"""What GET_BROKER_HA_STATUS reports, as plain values (Java's DefaultHAService.getRuntimeInfo): a master's slaves,
or a slave's view of its master. The broker turns them into the HARuntimeInfo body (``broker.remoting.ha_bodies``):
this room knows no wire bodies, the broker no HA internals.

Timestamps are epoch milliseconds and speeds bytes in the last whole second, as Java's fields are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """One slave as its master serves it (HAConnectionRuntimeInfo). ``slave_ack_offset`` and
    ``transfer_from_where`` are -1 until the slave's first report."""

    addr: str
    slave_ack_offset: int
    diff: int  # the master's CommitLog end minus what the slave acknowledged
    in_sync: bool  # diff below haMaxGapNotInSync (Java's isInSyncSlave)
    transferred_byte_in_second: int
    transfer_from_where: int


@dataclass(frozen=True, slots=True)
class ClientState:
    """A slave's HAClient (HAClientRuntimeInfo). ``master_addr`` is the master's HA address, None until known."""

    master_addr: str | None
    max_offset: int  # this slave's CommitLog end
    last_read_timestamp: int
    last_write_timestamp: int
    transferred_byte_in_second: int
    master_flush_offset: int  # the checkpoint's masterFlushedOffset: 0 unless a controller-mode sync set it


@dataclass(frozen=True, slots=True)
class HAState:
    """A master's form (``client`` None) or a slave's (``connections`` empty, offsets 0), as Java fills one."""

    master: bool
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    connections: tuple[ConnectionState, ...] = ()
    client: ClientState | None = None
