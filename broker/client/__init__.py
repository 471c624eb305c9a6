"""rmq's RocketMQ client: an asyncio producer, lite pull consumer and push consumer, plus a blocking facade.

Modules: ``message`` (Message, MessageExt, results, validation), ``route`` (TopicRouteData and the
route cache), ``protocol`` (sans-IO requests and responses), ``instance`` (MQClientInstance: routes, heartbeats,
rebalance), ``fault`` (latency fault avoidance), ``selector`` (queue selectors and allocation strategies),
``producer``, ``consumer`` (lite pull), ``offsets`` (ProcessQueue, offset stores), ``push_consumer``, and
``blocking`` (plain sockets, for Spark executors and jobs: the face of ``blocking_remoting``, ``blocking_api`` and
``pipeline``), ``concurrently`` and ``orderly`` (the push consumer's two ways of consuming), ``transaction``
(TransactionProducer), ``running_info`` (what ``mqadmin consumerStatus`` asks a client).

May import: ``broker.common`` and ``broker.remoting`` (never the server, the store or the NameServer: a Spark
executor imports this room). UNIQ_KEY ids and MessageQueue are ``broker.common.message``'s, the wire bodies
``broker.remoting``'s.

Examples:
    >>> from broker.client import Message, Producer
    >>> async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:  # doctest: +SKIP
    ...     await producer.send(Message("TopicTest", b"hello"))
"""

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
from broker.client.transaction import LocalTransactionState, TransactionProducer, TransactionSendResult
from broker.common.errors import MQBrokerError, MQClientError
from broker.common.message import create_uniq_id

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
