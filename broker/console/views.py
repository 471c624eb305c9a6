"""The JSON forms the console answers with, for what the admin calls return: messages, send results, queues.

Names are the camelCase of RocketMQ's own fields (``queueOffset``, ``storeTimestamp``), times epoch milliseconds.
A body travels as base64 (``body``) and, when it is UTF-8, as text too (``bodyText``); the page shows it as text,
pretty-printed JSON or hex.
"""

from __future__ import annotations

import base64
from collections.abc import Set as AbstractSet
from typing import Any

from broker.client.message import MessageExt, MessageQueue, SendResult
from broker.common.validation import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SPARK_SOURCE_INSTANCE_PREFIX,
    is_system_topic,
)
from broker.tools.results import MessageTrack


def topic_type(topic: str, cluster_topics: AbstractSet[str] = frozenset()) -> str:
    """RETRY, DLQ, SYSTEM (reserved topics, and those named after a cluster or a broker, given in
    ``cluster_topics``) or NORMAL."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "RETRY"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "DLQ"
    if is_system_topic(topic) or topic in cluster_topics:
        return "SYSTEM"
    return "NORMAL"


def is_spark_client(client_id: str) -> bool:
    """A client id ("ip@instance") of a Spark query's driver committing its offsets (connector/offsets.py)."""
    return client_id.partition("@")[2].startswith(SPARK_SOURCE_INSTANCE_PREFIX)


def queue_view(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def message_summary(msg: MessageExt, broker_names: dict[str, str] | None = None) -> dict[str, Any]:
    """One row of a lookup's results; a message read by index (which carries no broker name) is named after the
    broker at its store host, from ``broker_names`` (address -> name)."""
    broker_name = msg.broker_name or (broker_names or {}).get(msg.store_host, "")
    return {
        "msgId": msg.msg_id, "offsetMsgId": msg.offset_msg_id, "topic": msg.topic, "brokerName": broker_name,
        "queueId": msg.queue_id, "queueOffset": msg.queue_offset, "tags": msg.tags, "keys": msg.keys,
        "storeTimestamp": msg.store_timestamp, "bornTimestamp": msg.born_timestamp, "bodySize": len(msg.body),
        "reconsumeTimes": msg.reconsume_times,
    }


def message_detail(msg: MessageExt, broker_names: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything the record holds: the summary, the hosts, offsets and flags, the properties and the body."""
    try:
        text: str | None = msg.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        **message_summary(msg, broker_names),
        "commitLogOffset": msg.commit_log_offset, "bornHost": msg.born_host, "storeHost": msg.store_host,
        "sysFlag": msg.sys_flag, "flag": msg.flag, "bodyCrc": msg.body_crc, "storeSize": msg.store_size,
        "preparedTransactionOffset": msg.prepared_transaction_offset,
        "properties": dict(sorted(msg.properties.items())),
        "body": base64.b64encode(msg.body).decode("ascii"), "bodyText": text,
    }


def track_view(track: MessageTrack) -> dict[str, Any]:
    return {"consumerGroup": track.consumer_group, "trackType": track.track_type.value,
            "exceptionDesc": track.exception_desc}


def send_result_view(result: SendResult) -> dict[str, Any]:
    return {"sendStatus": result.send_status.value, "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id,
            **queue_view(result.message_queue), "queueOffset": result.queue_offset}
