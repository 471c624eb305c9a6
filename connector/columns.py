"""The sink's input columns, and how a DataFrame read with ``format("rmq")`` maps onto them.

Rule 1: which columns the sink takes, which it ignores, and which properties a send never copies from its input are
decided here and nowhere else (the sink's tasks, its schema check at query start and jobs/replay.py import them).

Spark's Kafka sink takes ``topic, key, value, headers, partition`` and ignores any other column. The rmq sink takes
``body, topic, tags, keys, properties, shardingKey, delayLevel``, ignores the columns only a read produces
(``brokerName, queueId, queueOffset, msgId, offsetMsgId, bornTimestamp, storeTimestamp, bornHost, storeHost,
reconsumeTimes, sysFlag``: where and when the broker stored a message, which a new send decides afresh), and rejects
any other column: a misspelt ``tag`` silently sent without its tags is worse than an error. So
``spark.read.format("rmq")...load()`` can be written back with ``format("rmq")`` as it is.

A read's ``properties`` also hold the system properties the producer and the broker set (UNIQ_KEY, MIN_OFFSET,
MAX_OFFSET, CLUSTER, TRAN_MSG, the sink's own RMQ_SINK_*...). A send sets those itself, so the sink drops them from
every row's ``properties`` (``user_properties``); KEYS and TAGS come from the ``keys`` and ``tags`` columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.common import message as mc
from broker.common.errors import ConnectorOptionError
from connector.decisions import PROPERTY_SINK_BATCH, PROPERTY_SINK_ID, PROPERTY_SINK_RUN
from connector.records import ARROW_SCHEMA

SINK_COLUMNS = frozenset({"body", "topic", "tags", "keys", "properties", "shardingKey", "delayLevel"})
# The source's columns that say where and when a message was stored: the sink ignores them.
SOURCE_ONLY_COLUMNS = frozenset(ARROW_SCHEMA.names) - SINK_COLUMNS

# Properties a send sets itself (from columns, or per message, producer or broker): never copied from the input row.
# A fresh UNIQ_KEY too: the sink tells its half messages apart by it, and copies of one message (read from a topic
# and its retry topic, say) would share the original's.
SYSTEM_PROPERTIES = (
    mc.PROPERTY_KEYS, mc.PROPERTY_TAGS, mc.PROPERTY_SHARDING_KEY, mc.PROPERTY_DELAY_TIME_LEVEL,
    mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, mc.PROPERTY_WAIT_STORE_MSG_OK, mc.PROPERTY_TRANSACTION_PREPARED,
    mc.PROPERTY_PRODUCER_GROUP, mc.PROPERTY_MIN_OFFSET, mc.PROPERTY_MAX_OFFSET, mc.PROPERTY_REAL_TOPIC,
    mc.PROPERTY_REAL_QUEUE_ID, mc.PROPERTY_CLUSTER, mc.PROPERTY_MSG_REGION, mc.PROPERTY_TRACE_SWITCH,
    mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, mc.PROPERTY_TRANSACTION_ID, mc.PROPERTY_TRANSACTION_CHECK_TIMES,
    mc.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, mc.PROPERTY_CONSUME_START_TIMESTAMP, mc.PROPERTY_RETRY_TOPIC,
    mc.PROPERTY_ORIGIN_MESSAGE_ID, mc.PROPERTY_RECONSUME_TIME, mc.PROPERTY_MAX_RECONSUME_TIMES,
    # the transactional sink's bookkeeping on messages it wrote (connector/decisions.py): a new send stamps its own
    PROPERTY_SINK_ID, PROPERTY_SINK_BATCH, PROPERTY_SINK_RUN,
)
_SYSTEM = frozenset(SYSTEM_PROPERTIES)


def user_properties(properties: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """A row's ``properties`` without the system properties (Arrow hands a map over as a list of pairs)."""
    items = properties.items() if isinstance(properties, Mapping) else properties
    return {k: v for k, v in items if k not in _SYSTEM}


def check_sink_schema(schema: object, topic: str | None) -> None:
    """The input columns the sink knows, with the types it can send; anything else fails at query start."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        ShortType,
        StringType,
        StructType,
    )

    if not isinstance(schema, StructType):
        return
    fields = {f.name: f.dataType for f in schema.fields}
    unknown = sorted(set(fields) - SINK_COLUMNS - SOURCE_ONLY_COLUMNS)
    if unknown:
        raise ConnectorOptionError(f"the rmq sink does not know the column(s) {', '.join(unknown)}; its columns are "
                                   f"{', '.join(sorted(SINK_COLUMNS))} (body required), and it ignores the "
                                   f"columns only a read has ({', '.join(sorted(SOURCE_ONLY_COLUMNS))})")
    if "body" not in fields:
        raise ConnectorOptionError("the rmq sink needs a body column (binary or string); the input has "
                                   f"{', '.join(fields) or 'no columns'}")
    expected = {"body": (BinaryType, StringType), "tags": (StringType,), "keys": (StringType,),
                "shardingKey": (StringType,), "delayLevel": (IntegerType, LongType, ShortType)}
    if topic is None:  # the topic option overrides the column: its type does not matter then
        expected["topic"] = (StringType,)
    for name, types in expected.items():
        if name in fields and not isinstance(fields[name], types):
            allowed = " or ".join(t.typeName() for t in types)
            raise ConnectorOptionError(f"the rmq sink column {name} must be {allowed}, got "
                                       f"{fields[name].simpleString()}")
    props = fields.get("properties")
    if props is not None and not (isinstance(props, MapType) and isinstance(props.keyType, StringType)
                                  and isinstance(props.valueType, StringType)):
        raise ConnectorOptionError(f"the rmq sink column properties must be map<string,string>, got "
                                   f"{props.simpleString()}")
    if topic is None and "topic" not in fields:
        raise ConnectorOptionError("the rmq sink needs a topic: set the option topic or give the input a topic column")
