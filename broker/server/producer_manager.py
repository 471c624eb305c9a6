"""Producer groups and their clients (Java's ProducerManager), fed by HEART_BEAT and UNREGISTER_CLIENT and cleaned
as consumer_manager.py cleans consumers; the transaction check asks one of a group's clients.
"""

from __future__ import annotations

import logging

from broker.common.clock import now_ms
from broker.remoting.connection import RemotingConnection
from broker.server.consumer_manager import CHANNEL_EXPIRED_TIMEOUT_MS, ChannelCloser, ClientChannelInfo

log = logging.getLogger(__name__)


class ProducerManager:
    """Producer groups by name (Java's ProducerManager); the transaction check asks one of a group's clients."""

    def __init__(self, *, channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self.groups: dict[str, dict[RemotingConnection, ClientChannelInfo]] = {}
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self._closer = ChannelCloser()

    def register_producer(self, group: str, channel: ClientChannelInfo) -> None:
        channels = self.groups.setdefault(group, {})
        known = channels.get(channel.connection)
        if known is None or known.client_id != channel.client_id:
            channels[channel.connection] = channel
            log.info("new producer connected, group: %s channel: %s", group, channel.address)
        else:
            known.last_update_timestamp = channel.last_update_timestamp

    def unregister_producer(self, group: str, connection: RemotingConnection) -> bool:
        channels = self.groups.get(group)
        if channels is None or channels.pop(connection, None) is None:
            return False
        if not channels:
            del self.groups[group]
        return True

    def connection_closed(self, connection: RemotingConnection) -> bool:
        removed = False
        for group in list(self.groups):
            removed = self.unregister_producer(group, connection) or removed
        return removed

    def scan_expired(self, now: int | None = None) -> list[ClientChannelInfo]:
        now = now_ms() if now is None else now
        expired = []
        for group, channels in list(self.groups.items()):
            for conn, channel in list(channels.items()):
                if conn.closed or now - channel.last_update_timestamp > self.channel_expired_timeout_ms:
                    self.unregister_producer(group, conn)
                    self._closer.close(conn)
                    expired.append(channel)
        return expired

    def any_channel(self, group: str) -> ClientChannelInfo | None:
        """A live client of ``group`` (the most recently heard from), for CHECK_TRANSACTION_STATE."""
        channels = [c for c in self.groups.get(group, {}).values() if not c.connection.closed]
        return max(channels, key=lambda c: c.last_update_timestamp, default=None)

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        return next((c for channels in self.groups.values() for c in channels.values() if c.client_id == client_id),
                    None)

    def producer_table(self) -> dict[str, list[ClientChannelInfo]]:
        """Every group's clients (GET_ALL_PRODUCER_INFO)."""
        return {group: list(channels.values()) for group, channels in self.groups.items()}
