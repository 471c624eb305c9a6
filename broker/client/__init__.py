"""rmq's RocketMQ client: an asyncio producer, lite pull consumer and push consumer, plus a blocking facade.

Modules: ``message`` (Message, MessageExt, results, validation), ``route`` (TopicRouteData and the
route cache), ``protocol`` (sans-IO requests and responses), ``instance`` (MQClientInstance: routes, heartbeats,
rebalance), ``fault`` (latency fault avoidance), ``selector`` (queue selectors and allocation strategies),
``producer``, ``consumer`` (lite pull), ``offsets`` (ProcessQueue, offset stores), ``push_consumer``, and
``blocking`` (plain sockets, for Spark executors and jobs: the face of ``blocking_remoting``, ``blocking_api`` and
``pipeline``), ``concurrently`` and ``orderly`` (the push consumer's two ways of consuming), ``transaction``
(TransactionProducer), ``transaction_protocol`` (transactions on the wire, sans IO: what the Spark sink frames),
``running_info`` (what ``mqadmin consumerStatus`` asks a client), ``trace`` (message trace records, Apache's
format), ``trace_hooks`` (what each event puts in a record), ``trace_batch`` (how records become trace
messages), ``trace_dispatcher`` (the asyncio dispatcher: ``enable_msg_trace`` in the producer's and consumers'
configs) and ``blocking_trace`` (its blocking twin, a thread: the Spark connector's ``enableMsgTrace``).

May import: ``broker.common`` and ``broker.remoting`` (never the server, the store or the NameServer: a Spark
executor imports this room). UNIQ_KEY ids and MessageQueue are ``broker.common.message``'s, the wire bodies
``broker.remoting``'s.

The names below are imported when first used (PEP 562), so importing one module of this room (a Spark executor
importing ``broker.client.blocking``) does not load the asyncio clients.

Examples:
    >>> from broker.client import Message, Producer
    >>> async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:  # doctest: +SKIP
    ...     await producer.send(Message("TopicTest", b"hello"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.common.lazy import lazy_exports

if TYPE_CHECKING:
    from broker.client.blocking import BlockingClient, BlockingRemotingClient
    from broker.client.consumer import LitePullConfig, LitePullConsumer
    from broker.client.fault import MQFaultStrategy
    from broker.client.instance import ClientConfig, MQClientInstance
    from broker.client.message import Message, MessageExt, MessageQueue, PullResult, PullStatus, SendResult, SendStatus
    from broker.client.offsets import ConsumeFromWhere, MessageModel
    from broker.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
    from broker.client.producer import Producer, ProducerConfig
    from broker.client.push_consumer import (
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        PushConsumer,
        PushConsumerConfig,
    )
    from broker.client.route import TopicRouteData
    from broker.client.selector import (
        AllocateMessageQueueAveragely,
        AllocateMessageQueueAveragelyByCircle,
        AllocateMessageQueueConsistentHash,
        MessageQueueSelector,
        SelectMessageQueueByHash,
    )
    from broker.client.transaction import TransactionProducer, TransactionSendResult
    from broker.client.transaction_protocol import LocalTransactionState
    from broker.common.errors import MQBrokerError, MQClientError
    from broker.common.message import create_uniq_id

_HOMES = {
    "BlockingClient": "broker.client.blocking",
    "BlockingRemotingClient": "broker.client.blocking",
    "LitePullConfig": "broker.client.consumer",
    "LitePullConsumer": "broker.client.consumer",
    "MQFaultStrategy": "broker.client.fault",
    "ClientConfig": "broker.client.instance",
    "MQClientInstance": "broker.client.instance",
    "Message": "broker.client.message",
    "MessageExt": "broker.client.message",
    "MessageQueue": "broker.client.message",
    "PullResult": "broker.client.message",
    "PullStatus": "broker.client.message",
    "SendResult": "broker.client.message",
    "SendStatus": "broker.client.message",
    "ConsumeFromWhere": "broker.client.offsets",
    "MessageModel": "broker.client.offsets",
    "ConsumeOrderlyContext": "broker.client.orderly",
    "ConsumeOrderlyStatus": "broker.client.orderly",
    "Producer": "broker.client.producer",
    "ProducerConfig": "broker.client.producer",
    "ConsumeConcurrentlyContext": "broker.client.push_consumer",
    "ConsumeConcurrentlyStatus": "broker.client.push_consumer",
    "PushConsumer": "broker.client.push_consumer",
    "PushConsumerConfig": "broker.client.push_consumer",
    "TopicRouteData": "broker.client.route",
    "AllocateMessageQueueAveragely": "broker.client.selector",
    "AllocateMessageQueueAveragelyByCircle": "broker.client.selector",
    "AllocateMessageQueueConsistentHash": "broker.client.selector",
    "MessageQueueSelector": "broker.client.selector",
    "SelectMessageQueueByHash": "broker.client.selector",
    "LocalTransactionState": "broker.client.transaction_protocol",
    "TransactionProducer": "broker.client.transaction",
    "TransactionSendResult": "broker.client.transaction",
    "MQBrokerError": "broker.common.errors",
    "MQClientError": "broker.common.errors",
    "create_uniq_id": "broker.common.message",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)


__all__ = [
    # clients
    "BlockingClient",
    "BlockingRemotingClient",
    "ClientConfig",
    "LitePullConfig",
    "LitePullConsumer",
    "MQClientInstance",
    "Producer",
    "ProducerConfig",
    "PushConsumer",
    "PushConsumerConfig",
    "TransactionProducer",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "LocalTransactionState",
    "TransactionSendResult",
    # messages and results
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TopicRouteData",
    "create_uniq_id",
    # consuming
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "MessageModel",
    # queue choice
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "MQFaultStrategy",
    "MessageQueueSelector",
    "SelectMessageQueueByHash",
    # errors
    "MQBrokerError",
    "MQClientError",
]
