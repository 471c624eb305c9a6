"""Topic routes as a client sees them: TopicRouteData from the NameServer, the queues it yields for publishing and
for subscribing, and the route cache shared by producers and consumers.

The route data classes themselves (QueueData, BrokerData, TopicRouteData and their JSON) are defined once, in
broker/remoting/route.py, and re-exported here; this module holds the route-to-queues rules
(MQClientInstance.topicRouteData2TopicPublishInfo / topicRouteData2TopicSubscribeInfo) and the client's caches.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.client.message import MessageQueue
from broker.common.errors import ClientErrorCode, MQClientError
from broker.common.topic import is_readable, is_writeable
from broker.remoting.route import MASTER_ID, BrokerData, QueueData, TopicRouteData

__all__ = ["MASTER_ID", "BrokerData", "FindBrokerResult", "PullFromWhichNode", "QueueData", "RouteTable",
           "SendQueueIndex", "TopicPublishInfo", "TopicRouteData", "find_broker_address_in_subscribe", "no_route_info",
           "publish_queues", "subscribe_queues"]

FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"  # FAQUrl.NO_TOPIC_ROUTE_INFO (every FAQ constant)


def publish_queues(topic: str, route: TopicRouteData) -> tuple[list[MessageQueue], bool]:
    """topicRouteData2TopicPublishInfo: (queues in send order, is an order topic). Writable queues of brokers that
    have a master, brokers sorted by name; ``orderTopicConf`` ("broker-a:4;broker-b:4") wins when set."""
    if route.order_topic_conf:
        queues = []
        for item in route.order_topic_conf.split(";"):
            broker_name, _, nums = item.partition(":")
            queues += [MessageQueue(topic, broker_name, i) for i in range(int(nums))]
        return queues, True
    queues = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        broker = route.broker(qd.broker_name)
        if is_writeable(qd.perm) and broker is not None and MASTER_ID in broker.broker_addrs:
            queues += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
    return queues, False


def no_route_info(topic: str) -> MQClientError:
    """What a send finds when the topic has no queue to write to: no route, or no brokerName of it with a master
    (sendDefaultImpl's error, with FAQUrl.suggestTodo)."""
    return MQClientError(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                         f"No route info of this topic: {topic}\nSee {FAQ_URL} for further details.")


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """topicRouteData2TopicSubscribeInfo: every readable queue, sorted (Java returns a set; callers sort it)."""
    return sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas if is_readable(qd.perm)
                  for i in range(qd.read_queue_nums))


class FindBrokerResult(NamedTuple):
    """MQClientInstance.FindBrokerResult: where to call, and whether that is a slave (a pull to a slave carries no
    commit offset: only a master stores it)."""

    broker_addr: str
    slave: bool


def find_broker_address_in_subscribe(addrs: Mapping[int, str] | None, broker_id: int = MASTER_ID, *,
                                     only_this_broker: bool = False) -> FindBrokerResult | None:
    """MQClientInstance.findBrokerAddressInSubscribe over one brokerName's ``{brokerId: address}``: ``broker_id``;
    for a slave id missing, the next id; then (unless ``only_this_broker``) the first replica, which in Java's
    HashMap of small Long keys is the lowest id: the master when there is one, else the first slave."""
    if not addrs:
        return None
    addr = addrs.get(broker_id)
    slave = broker_id != MASTER_ID
    if addr is None and slave:
        addr = addrs.get(broker_id + 1)
    if addr is None and not only_this_broker:
        first = min(addrs)
        addr, slave = addrs[first], first != MASTER_ID
    return FindBrokerResult(addr, slave) if addr is not None else None


class PullFromWhichNode:
    """PullAPIWrapper.pullFromWhichNodeTable: per queue, the broker id the last pull response suggested
    (suggestWhichBrokerId). The broker decides where the next pull goes; a queue never pulled goes to the master.

    Examples:
        >>> nodes = PullFromWhichNode()
        >>> mq = MessageQueue("T", "broker-a", 0)
        >>> nodes.recalculate(mq)
        0
        >>> nodes.update(mq, 1)
        >>> nodes.recalculate(mq)
        1
    """

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}

    def recalculate(self, mq: MessageQueue) -> int:
        """recalculatePullFromWhichNode (connectBrokerByUser is not supported: no defaultBrokerId)."""
        return self._table.get(mq, MASTER_ID)

    def update(self, mq: MessageQueue, broker_id: int) -> None:
        """updatePullFromWhichNode, from every pull response (processPullResult)."""
        self._table[mq] = broker_id


class SendQueueIndex:
    """ThreadLocalIndex: a counter that starts at a random value and stays non-negative, so producers do not all
    start on queue 0."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._index = self._rng.getrandbits(32) - 2**31

    def increment_and_get(self) -> int:
        self._index = ((self._index + 1 + 2**31) % 2**32) - 2**31  # Java int overflow
        return self._index & 0x7FFFFFFF

    def reset(self) -> None:
        self._index = self._rng.randrange(2**31 - 1)


QueueFilter = Callable[[MessageQueue], bool]


@dataclass(slots=True)
class TopicPublishInfo:
    """The queues a producer may send a topic's messages to (impl/producer/TopicPublishInfo)."""

    message_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_topic_router_info: bool = False
    route: TopicRouteData | None = None
    send_which_queue: SendQueueIndex = field(default_factory=SendQueueIndex)

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        queues, order = publish_queues(topic, route)
        return cls(queues, order, True, route)

    def ok(self) -> bool:
        return bool(self.message_queues)

    def select_one_message_queue(self, *filters: QueueFilter) -> MessageQueue | None:
        """Round robin; with filters, the next queue that passes all of them within one lap, else None."""
        queues = self.message_queues
        if not queues:
            return None
        if not filters:
            return queues[self.send_which_queue.increment_and_get() % len(queues)]
        for _ in range(len(queues)):
            mq = queues[self.send_which_queue.increment_and_get() % len(queues)]
            if all(f(mq) for f in filters):
                return mq
        return None

    def write_queue_nums_by_broker(self, broker_name: str) -> int:
        for qd in self.route.queue_datas if self.route else ():
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


class RouteTable:
    """The client's route cache (MQClientInstance.topicRouteTable and brokerAddrTable): the last route of each topic
    and the addresses of every broker seen in any route."""

    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}

    def update(self, topic: str, route: TopicRouteData) -> bool:
        """Store ``route``; True when it differs from the cached one (Java's topicRouteDataChanged)."""
        changed = self.routes.get(topic) != route
        if changed:
            self.update_brokers(route)
            self.routes[topic] = route
        return changed

    def update_brokers(self, route: TopicRouteData) -> None:
        for broker in route.broker_datas:
            self.broker_addrs[broker.broker_name] = dict(broker.broker_addrs)

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master's address: only the master takes writes."""
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int = MASTER_ID, *,
                                         only_this_broker: bool = False) -> FindBrokerResult | None:
        """The given replica, else (unless ``only_this_broker``) another one: find_broker_address_in_subscribe."""
        return find_broker_address_in_subscribe(self.broker_addrs.get(broker_name), broker_id,
                                                only_this_broker=only_this_broker)

    def any_broker_address(self, topic: str) -> str | None:
        """findBrokerAddrByTopic: a random broker of the topic, its master if it has one."""
        route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        return random.choice(route.broker_datas).select_broker_addr()

    def master_addresses(self) -> dict[str, str]:
        """broker name -> master address, for heartbeats."""
        return {name: addrs[MASTER_ID] for name, addrs in self.broker_addrs.items() if MASTER_ID in addrs}

    def all_addresses(self) -> list[tuple[str, int, str]]:
        return [(name, broker_id, addr) for name, addrs in self.broker_addrs.items()
                for broker_id, addr in addrs.items()]
