"""Who is connected: consumer groups with their clients and subscriptions (ProducerManager keeps producers).

RocketMQ keeps these in ConsumerManager and ProducerManager, fed by HEART_BEAT and UNREGISTER_CLIENT, cleaned when a
connection closes (``connection_closed``, Java's doChannelCloseEvent) or when a client stays silent for
channelExpiredTimeout (``scan_expired``, Java's scanNotActiveChannel: it also closes that connection). When the set of
clients or the subscriptions of a clustering group change, ``on_change(group, connections)`` runs with every
connection still in the group (Java's ConsumerGroupEvent.CHANGE), so the broker can tell them to rebalance
(NOTIFY_CONSUMER_IDS_CHANGED, broker/server/processors/client_manage.py).

Examples:
    >>> manager = ConsumerManager(on_change=lambda group, connections: print(group, len(connections)))
    >>> manager.register_consumer("GID", channel, CONSUME_PASSIVELY, CLUSTERING, "CONSUME_FROM_LAST_OFFSET",
    ...                           [SubscriptionData("TopicTest")])  # doctest: +SKIP
    GID 1
    True
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.common.clock import now_ms
from broker.remoting.codes import LanguageCode
from broker.remoting.connection import RemotingConnection
from broker.remoting.heartbeat import SubscriptionData

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_TIMEOUT_MS = 120_000  # BrokerConfig.channelExpiredTimeout
SUBSCRIPTION_EXPIRED_TIMEOUT_MS = 600_000  # BrokerConfig.subscriptionExpiredTimeout (compensated subscriptions)

# ConsumeType and MessageModel as the heartbeat spells them (kept as text: a newer client may send other values).
CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull consumers
CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push consumers
CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"


@dataclass(slots=True, eq=False)
class ClientChannelInfo:
    """One client on one connection (Java's ClientChannelInfo); ``version`` is the client's MQVersion ordinal."""

    connection: RemotingConnection
    client_id: str
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = field(default_factory=now_ms)

    @property
    def address(self) -> str:
        """``ip:port`` of the client (RemotingHelper.parseChannelRemoteAddr)."""
        return self.connection.remote_address


@dataclass(slots=True, eq=False)
class ConsumerGroupInfo:
    """A consumer group's clients (by connection) and its subscriptions (by topic)."""

    group_name: str
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    channels: dict[RemotingConnection, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_timestamp: int = field(default_factory=now_ms)

    @property
    def is_broadcasting(self) -> bool:
        return self.message_model == BROADCASTING

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]

    def connections(self) -> list[RemotingConnection]:
        return list(self.channels)

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        return next((info for info in self.channels.values() if info.client_id == client_id), None)

    def update_channel(self, info: ClientChannelInfo, consume_type: str, message_model: str,
                       consume_from_where: str) -> bool:
        """Record a heartbeat of ``info``; True when its connection is new to the group."""
        self.consume_type, self.message_model, self.consume_from_where = consume_type, message_model, \
            consume_from_where
        known = self.channels.get(info.connection)
        added = known is None
        if added:
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group_name, consume_type,
                     message_model, info.address)
        elif known.client_id != info.client_id:
            log.error("consumer channel of group %s changed its clientId from %s to %s", self.group_name,
                      known.client_id, info.client_id)
        if added or known.client_id != info.client_id:
            self.channels[info.connection] = known = info
        self.last_update_timestamp = now_ms()
        known.last_update_timestamp = self.last_update_timestamp
        return added

    def update_subscription(self, subscriptions: Iterable[SubscriptionData]) -> bool:
        """True when a topic was added or dropped; a newer subVersion of a known topic replaces it silently."""
        changed = False
        topics = set()
        for sub in subscriptions:
            topics.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in topics]:
            log.warning("subscription changed, group: %s remove topic %s", self.group_name, topic)
            del self.subscriptions[topic]
            changed = True
        self.last_update_timestamp = now_ms()
        return changed


ConsumerIdsChangeListener = Callable[[str, list[RemotingConnection]], None]
"""``(group, connections)``: the clients of a clustering group changed; ``connections`` are those that remain."""


class ChannelCloser:
    """Closes connections of clients that went silent; the tasks are kept until done."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def close(self, connection: RemotingConnection) -> None:
        if connection.closed:
            return
        try:
            task = asyncio.get_running_loop().create_task(connection.close())
        except RuntimeError:  # no loop (a synchronous test): the caller drops the channel all the same
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class ConsumerManager:
    """Consumer groups by name (Java's ConsumerManager)."""

    def __init__(self, on_change: ConsumerIdsChangeListener | None = None, *,
                 channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS,
                 subscription_expired_timeout_ms: int = SUBSCRIPTION_EXPIRED_TIMEOUT_MS) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.on_change = on_change
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self.subscription_expired_timeout_ms = subscription_expired_timeout_ms
        self._topic_groups: dict[str, set[str]] = {}  # every group that subscribed a topic while online
        self._compensation: dict[str, ConsumerGroupInfo] = {}  # pull consumers known only from their pulls
        self._closer = ChannelCloser()

    # -- registration ------------------------------------------------------------------------------------------

    def register_consumer(self, group: str, channel: ClientChannelInfo, consume_type: str, message_model: str,
                          consume_from_where: str, subscriptions: list[SubscriptionData], *,
                          notify: bool = True) -> bool:
        """Record a heartbeat with subscriptions; True when the group's clients or topics changed. ``notify`` is
        the group's notifyConsumerIdsChangedEnable."""
        info = self._group(group, consume_type, message_model, consume_from_where)
        for sub in subscriptions:
            self._topic_groups.setdefault(sub.topic, set()).add(group)
        added = info.update_channel(channel, consume_type, message_model, consume_from_where)
        changed = info.update_subscription(subscriptions)
        if (added or changed) and notify and not info.is_broadcasting:
            self._changed(group, info)
        return added or changed

    def register_consumer_without_sub(self, group: str, channel: ClientChannelInfo, consume_type: str,
                                      message_model: str, consume_from_where: str, *, notify: bool = True) -> bool:
        """A heartbeat V2 that left the subscriptions out (unchanged since the last full one)."""
        info = self._group(group, consume_type, message_model, consume_from_where)
        for topic in info.subscriptions:
            self._topic_groups.setdefault(topic, set()).add(group)
        added = info.update_channel(channel, consume_type, message_model, consume_from_where)
        if added and notify and not info.is_broadcasting:
            self._changed(group, info)
        return added

    def _group(self, group: str, consume_type: str, message_model: str, consume_from_where: str) -> ConsumerGroupInfo:
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
        return info

    def unregister_consumer(self, group: str, connection: RemotingConnection, *, notify: bool = True) -> bool:
        """UNREGISTER_CLIENT: drop the client on ``connection``; True when it was registered."""
        info = self.groups.get(group)
        if info is None:
            return False
        removed = info.channels.pop(connection, None) is not None
        if removed:
            log.info("unregister a consumer of group %s: %s", group, connection.remote_address)
        self._drop_if_empty(group, info)
        if notify and not info.is_broadcasting:
            self._changed(group, info)
        return removed

    def connection_closed(self, connection: RemotingConnection) -> bool:
        """The connection is gone: drop its clients from every group and tell the remaining ones."""
        removed = False
        for group, info in list(self.groups.items()):
            if info.channels.pop(connection, None) is None:
                continue
            removed = True
            log.warning("remove closed channel %s from consumer group %s", connection.remote_address, group)
            self._drop_if_empty(group, info)
            if not info.is_broadcasting:
                self._changed(group, info)
        return removed

    def scan_expired(self, now: int | None = None) -> list[ClientChannelInfo]:
        """Drop clients silent for longer than channelExpiredTimeout and close their connections (no rebalance
        notice, as in Java). A closed connection still listed is handled as its close event would have been."""
        now = now_ms() if now is None else now
        for conn in {c for info in self.groups.values() for c in info.channels if c.closed}:
            self.connection_closed(conn)
        expired = []
        for group, info in list(self.groups.items()):
            for conn, channel in list(info.channels.items()):
                if now - channel.last_update_timestamp > self.channel_expired_timeout_ms:
                    log.warning("SCAN: remove expired channel %s from consumer group %s", channel.address, group)
                    del info.channels[conn]
                    self._closer.close(conn)
                    expired.append(channel)
            self._drop_if_empty(group, info)
        self._remove_expired_compensation(now)
        return expired

    def _drop_if_empty(self, group: str, info: ConsumerGroupInfo) -> None:
        if not info.channels and self.groups.get(group) is info:
            del self.groups[group]
            log.info("no consumer of group %s is connected any more; group removed", group)
            for topic in info.subscriptions:
                groups = self._topic_groups.get(topic)
                if groups is not None:
                    groups.discard(group)
                    if not groups:
                        del self._topic_groups[topic]

    def _changed(self, group: str, info: ConsumerGroupInfo) -> None:
        if self.on_change is not None:
            try:
                self.on_change(group, info.connections())
            except Exception:  # a listener's bug must not undo the registration
                log.exception("consumer ids change listener failed for group %s", group)

    # -- lookups -----------------------------------------------------------------------------------------------

    def get(self, group: str) -> ConsumerGroupInfo | None:
        """The group's online clients (getConsumerGroupInfo); None when none is connected."""
        return self.groups.get(group)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.groups.get(group)
        return info.find_channel(client_id) if info is not None else None

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        """From the online group, else from what pulls compensated (findSubscriptionData)."""
        for table in (self.groups, self._compensation):
            info = table.get(group)
            if info is not None and topic in info.subscriptions:
                return info.subscriptions[topic]
        return None

    def find_subscription_data_count(self, group: str) -> int:
        info = self.groups.get(group)
        return len(info.subscriptions) if info is not None else 0

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        """Groups that subscribed ``topic`` and still have a client online."""
        return set(self._topic_groups.get(topic, ()))

    def groups_of_topic(self, topic: str) -> list[str]:
        return sorted(self.query_topic_consume_by_who(topic))

    # -- compensation (pull consumers that send no subscription in their heartbeat) -----------------------------

    def compensate_basic_consumer_info(self, group: str, consume_type: str, message_model: str) -> None:
        info = self._compensation.setdefault(group, ConsumerGroupInfo(group))
        info.consume_type, info.message_model = consume_type, message_model

    def compensate_subscribe_data(self, group: str, topic: str, subscription: SubscriptionData) -> None:
        self._compensation.setdefault(group, ConsumerGroupInfo(group)).subscriptions[topic] = subscription

    def _remove_expired_compensation(self, now: int) -> None:
        """A compensated subscription expires subscriptionExpiredTimeout after its subVersion (its creation)."""
        for group, info in list(self._compensation.items()):
            for topic, sub in list(info.subscriptions.items()):
                if now - sub.sub_version > self.subscription_expired_timeout_ms:
                    del info.subscriptions[topic]
            if not info.subscriptions:
                del self._compensation[group]
