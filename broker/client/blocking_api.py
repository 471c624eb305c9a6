"""One blocking RocketMQ call per function (the role of Java's MQClientAPIImpl), given a ``BlockingRemotingClient``
connected to the right address: ``get_route`` (a NameServer), ``get_min_offset``, ``get_max_offset``,
``search_offset``, ``pull``, ``send_one``, ``send_batch`` and ``create_topic`` (a broker). The requests and their
answers are ``client/protocol.py``'s; ``blocking.BlockingClient`` finds the addresses.

Examples:
    >>> with BlockingRemotingClient("127.0.0.1:10911") as broker:  # doctest: +SKIP
    ...     mq = MessageQueue("TopicTest", "broker-a", 0)
    ...     result = pull(broker, "my_group", mq, get_min_offset(broker, mq), 32, decode=True)
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.client import protocol
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.message import (
    Message,
    MessageBatch,
    MessageQueue,
    PullResult,
    SendResult,
    check_message,
    compress_body,
    set_uniq_id,
)
from broker.client.route import TopicRouteData
from broker.common.errors import ClientErrorCode, MQClientError, RemotingError
from broker.common.topic import TopicConfig
from broker.remoting.exchange import DEFAULT_TIMEOUT_MS
from broker.remoting.heartbeat import build_subscription_data


def get_route(namesrv_addr: str | Sequence[BlockingRemotingClient], topic: str,
              timeout_ms: float = DEFAULT_TIMEOUT_MS) -> TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC from the first NameServer that answers ("a:9876;b:9876", or open clients).
    MQClientError with the NameServer's code (TOPIC_NOT_EXIST) when the topic has no route."""
    if isinstance(namesrv_addr, str):
        clients = [BlockingRemotingClient(a.strip()) for a in namesrv_addr.split(";") if a.strip()]
        try:
            return get_route(clients, topic, timeout_ms)
        finally:
            for client in clients:
                client.close()
    if not namesrv_addr:
        raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION, "No name server address, please set it.")
    error: Exception | None = None
    for client in namesrv_addr:
        try:
            return protocol.parse_route_response(client.invoke(protocol.get_route_request(topic), timeout_ms))
        except RemotingError as err:
            error = err
    raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION, f"no NameServer answered: {error}") from error


def get_min_offset(client: BlockingRemotingClient, mq: MessageQueue, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
    return protocol.parse_offset_response(client.invoke(protocol.min_offset_request(mq), timeout_ms), client.address)


def get_max_offset(client: BlockingRemotingClient, mq: MessageQueue, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
    """The queue's max offset: one past its last message (what a consumer reads up to)."""
    return protocol.parse_offset_response(client.invoke(protocol.max_offset_request(mq), timeout_ms), client.address)


def search_offset(client: BlockingRemotingClient, mq: MessageQueue, timestamp_ms: int, boundary_type: str = "LOWER",
                  timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
    request = protocol.search_offset_request(mq, timestamp_ms, boundary_type)
    return protocol.parse_offset_response(client.invoke(request, timeout_ms), client.address)


def pull(client: BlockingRemotingClient, group: str, mq: MessageQueue, offset: int, max_nums: int, *,
         sub_expression: str = "*", timeout_ms: float = DEFAULT_TIMEOUT_MS, decode: bool = False) -> PullResult:
    """One PULL_MESSAGE without suspending; ``result.body`` holds the records, ``result.messages`` is filled only
    with ``decode`` (then tag collisions are filtered out as Java's client does)."""
    subscription = build_subscription_data(mq.topic, sub_expression)
    request = protocol.pull_message_request(group, mq, offset, max_nums, subscription=subscription)
    result = protocol.parse_pull_response(client.invoke(request, timeout_ms), client.address)
    if decode:
        protocol.decode_pull_result(result, mq, subscription)
    return result


def send_one(client: BlockingRemotingClient, producer_group: str, msg: Message, mq: MessageQueue, *,
             timeout_ms: float = DEFAULT_TIMEOUT_MS, compress_over: int = 4096) -> SendResult:
    """SEND_MESSAGE_V2 of one message to ``mq`` (the client must be connected to its broker's master)."""
    check_message(msg)
    set_uniq_id(msg)
    body, sys_flag = msg.body, 0
    if len(body) >= compress_over:
        body, sys_flag = compress_body(body)
    header = protocol.send_message_header(producer_group, msg, mq, sys_flag, batch=False)
    response = client.invoke(protocol.send_message_request(header, body), timeout_ms)
    return protocol.parse_send_response(response, mq.topic, mq.broker_name, client.address, [msg.uniq_id or ""])


def send_batch(client: BlockingRemotingClient, producer_group: str, msgs: Sequence[Message] | MessageBatch,
               mq: MessageQueue, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> SendResult:
    """SEND_BATCH_MESSAGE: all of ``msgs`` into ``mq`` with consecutive offsets."""
    batch = msgs if isinstance(msgs, MessageBatch) else MessageBatch(msgs)
    check_message(batch)
    header = protocol.send_message_header(producer_group, batch, mq, 0, batch=True)
    response = client.invoke(protocol.send_message_request(header, batch.body, batch=True), timeout_ms)
    return protocol.parse_send_response(response, mq.topic, mq.broker_name, client.address,
                                        protocol.uniq_ids_of(batch.messages))


def create_topic(client: BlockingRemotingClient, topic: str, *, queue_nums: int = 1, perm: int = 6,
                 timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker ``client`` talks to (as mqadmin updateTopic -b does); the broker then
    registers the topic with its NameServers."""
    request = protocol.create_topic_request(TopicConfig(topic, queue_nums, queue_nums, perm))
    protocol.expect_success(client.invoke(request, timeout_ms), client.address)
