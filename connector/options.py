"""``format("rmq")`` options, parsed once at query start into frozen dataclasses.

Names follow Spark's Kafka connector where the meaning is the same (``startingOffsets``, ``maxOffsetsPerTrigger``,
``failOnDataLoss``...). Spark hands options over case-insensitively (lower-cased keys); every option is looked up by
its documented name, and an option nobody knows fails the query with the list of the known ones, because a typo
that silently changes nothing (``startingOffset``) is worse than an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.common.errors import ConnectorOptionError
from broker.common.validation import (
    RMQ_SYS_TRACE_TOPIC,
    TOPIC_MAX_LENGTH,
    VALID_NAME_PATTERN,
    is_topic_or_group_illegal,
)
from broker.remoting.signing import SessionCredentials

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


class OptionReader:
    """Typed access to Spark's options by their documented (camelCase) names; rejects unknown names."""

    def __init__(self, options: Mapping[str, str], known: Iterable[str], what: str) -> None:
        self._values = {str(k).lower(): str(v) for k, v in options.items()}
        self._names = {name.lower(): name for name in known}
        self._what = what
        unknown = sorted(k for k in self._values if k not in self._names and k not in _SPARK_OWNED)
        if unknown:
            known_names = ", ".join(sorted(self._names.values()))
            raise ConnectorOptionError(f"unknown {what} option(s) {', '.join(unknown)}; known options: {known_names}")

    def has(self, name: str) -> bool:
        return name.lower() in self._values

    def str(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self._values.get(name.lower())
        if value is None or value.strip() == "":
            if required:
                raise ConnectorOptionError(f"the {self._what} option {name} is required")
            return default
        return value.strip()

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        text = self.str(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConnectorOptionError(f"option {name} must be an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise ConnectorOptionError(f"option {name} must be >= {minimum}, got {value}")
        return value

    def bool(self, name: str, default: bool) -> bool:
        text = self.str(name)
        if text is None:
            return default
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConnectorOptionError(f"option {name} must be true or false, got {text!r}")


# Options Spark itself passes to data sources next to the user's (writeStream's checkpointLocation, save's path).
_SPARK_OWNED = frozenset({"path", "checkpointlocation", "queryname"})
# The keys every request is signed with (ACL), on source and sink alike. Spark's plans redact options whose names
# match spark.redaction.regex (secret, access key); the parsed SessionCredentials' repr leaves the secret out.
CREDENTIAL_OPTIONS = ("accessKey", "secretKey")


def credentials(opts: OptionReader) -> SessionCredentials | None:
    """accessKey and secretKey, both or neither. An error names the option missing, never the secret's value."""
    access_key, secret_key = opts.str("accessKey"), opts.str("secretKey")
    if access_key is None and secret_key is None:
        return None
    if access_key is None or secret_key is None:
        missing = "secretKey" if secret_key is None else "accessKey"
        raise ConnectorOptionError(f"the options accessKey and secretKey go together: {missing} is missing")
    return SessionCredentials(access_key, secret_key)


# Message trace, on source and sink alike: Apache's clients' names (the producer's and consumers' enableMsgTrace
# and customizedTraceTopic constructor arguments).
TRACE_OPTIONS = ("enableMsgTrace", "customizedTraceTopic")


def trace_topic(opts: OptionReader) -> str | None:
    """The topic trace records go to (customizedTraceTopic, else RMQ_SYS_TRACE_TOPIC) with enableMsgTrace=true;
    None without it, and a topic given without it is refused (it would trace nothing)."""
    enabled = opts.bool("enableMsgTrace", False)
    topic = opts.str("customizedTraceTopic")
    if topic is None:
        return RMQ_SYS_TRACE_TOPIC if enabled else None
    if not enabled:
        raise ConnectorOptionError(f"option customizedTraceTopic ({topic!r}) applies only to enableMsgTrace=true")
    check_topic_name("option customizedTraceTopic", topic)
    return topic


def check_topic_name(what: str, topic: str) -> None:
    """A topic the broker would refuse (Topic validation's pattern and length), named with ``what`` it came from."""
    if is_topic_or_group_illegal(topic) or len(topic) > TOPIC_MAX_LENGTH:
        raise ConnectorOptionError(f"{what} {topic!r} is not a valid topic name (allowed: {VALID_NAME_PATTERN}, "
                                   f"at most {TOPIC_MAX_LENGTH} characters)")


# -- source options (connector/source.py) -----------------------------------------------------------------------------

# Which topics a source may read. Explicit ``topic``/``topics`` may name any topic except the broker's internal
# stores of messages that are not (yet) visible to consumers: half and op-half messages of transactions, delayed
# messages waiting in SCHEDULE_TOPIC_XXXX, the timer wheel. A retry or DLQ topic (%RETRY%g, %DLQ%g) may be named
# explicitly (reading dead letters is a real use); ``topicPattern`` only ever matches ordinary user topics.
_INTERNAL_TOPICS = frozenset({
    "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC",
    "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer",
})
EARLIEST, LATEST = -2, -1  # the Kafka connector's markers in JSON offsets
FILTER_TYPES = ("TAG", "SQL92")
DEFAULT_PULL_BATCH_SIZE = 1024  # the broker caps each pull (maxTransferCountOnMessageInMemory, 32 by default)
DEFAULT_PULL_TIMEOUT_MS = 10_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

SOURCE_OPTIONS = (
    "namesrvAddr", "topic", "topics", "topicPattern", "subscribe", "subscribePattern", "assign", "startingOffsets",
    "startingTimestamp", "startingOffsetsByTimestamp", "endingOffsets", "endingTimestamp", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "failOnDataLoss", "filter", "filterType", "consumerGroup",
    "pullBatchSize", "pullTimeoutMs", "minPartitions", *CREDENTIAL_OPTIONS, *TRACE_OPTIONS,
)
# What to read: exactly one of these. subscribe and subscribePattern are the Kafka connector's names of topics and
# topicPattern; assign names queues, as Kafka's names partitions.
SUBSCRIPTIONS = ("topic", "topics", "topicPattern", "subscribe", "subscribePattern", "assign")
_STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
_BATCH_ONLY = ("endingOffsets", "endingTimestamp")


def parse_duration_ms(name: str, text: str) -> int:
    """"15m", "30s", "500ms", "2h", or bare milliseconds."""
    match = _DURATION.match(text)
    if not match:
        raise ConnectorOptionError(f"option {name} must be a duration such as 30s, 15m or 500ms, got {text!r}")
    return int(match.group(1)) * _DURATION_MS[(match.group(2) or "ms").lower()]


def _json_option(name: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise ConnectorOptionError(f"option {name} is not valid JSON ({err}): {text!r}") from None
    if not isinstance(value, dict):
        raise ConnectorOptionError(f"option {name} must be a JSON object, got {text!r}")
    return value


def parse_queue_json(name: str, text: str, *, allowed: tuple[int, ...]) -> dict[tuple[str, str, int], int]:
    """``{"topic": {"brokerName": {"queueId": value}}}`` as {(topic, brokerName, queueId): value}. Offsets are >= 0
    or one of ``allowed`` markers (-2 earliest, -1 latest); timestamps are >= 0 (``allowed`` empty)."""
    result: dict[tuple[str, str, int], int] = {}
    for topic, brokers in _json_option(name, text).items():
        if not isinstance(brokers, dict):
            raise ConnectorOptionError(f"option {name}: topic {topic!r} must map broker names to queues, "
                                       f"got {brokers!r}")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ConnectorOptionError(f"option {name}: {topic}/{broker} must map queue ids to values, "
                                           f"got {queues!r}")
            for queue_id, value in queues.items():
                if not str(queue_id).isdigit():
                    raise ConnectorOptionError(f"option {name}: queue id {queue_id!r} of {topic}/{broker} "
                                               "is not a number")
                if isinstance(value, bool) or not isinstance(value, int) or (value < 0 and value not in allowed):
                    markers = " or ".join(str(a) for a in allowed)
                    raise ConnectorOptionError(f"option {name}: {topic}/{broker}/{queue_id} must be >= 0"
                                               f"{' or ' + markers if markers else ''}, got {value!r}")
                result[(str(topic), str(broker), int(queue_id))] = value
    return result


def parse_assign(text: str) -> tuple[tuple[str, str, int], ...]:
    """``assign``: ``{"topic": {"brokerName": [queueId, ...]}}``, the queues to read (Kafka's ``assign`` lists
    partitions; a RocketMQ queue is a broker's queue id)."""
    queues: set[tuple[str, str, int]] = set()
    for topic, brokers in _json_option("assign", text).items():
        if not isinstance(brokers, dict) or not brokers:
            raise ConnectorOptionError(f"option assign: topic {topic!r} must map broker names to lists of queue ids, "
                                       f"got {brokers!r}")
        for broker, ids in brokers.items():
            if (not isinstance(ids, list) or not ids
                    or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids)):
                raise ConnectorOptionError(f"option assign: {topic}/{broker} must be a non-empty list of queue ids "
                                           f"(integers >= 0), got {ids!r}")
            queues.update((str(topic), str(broker), i) for i in ids)
    if not queues:
        raise ConnectorOptionError("option assign names no queue")
    return tuple(sorted(queues))


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where reading starts or ends: ``kind`` is earliest | latest | offsets | timestamp | timestamps; ``per_queue``
    holds the JSON's values by (topic, brokerName, queueId) for offsets/timestamps, ``timestamp`` the one timestamp.
    Queues the JSON does not name use ``default`` (earliest or latest)."""

    kind: str
    per_queue: tuple[tuple[tuple[str, str, int], int], ...] = ()
    timestamp: int | None = None

    @property
    def table(self) -> dict[tuple[str, str, int], int]:
        return dict(self.per_queue)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything ``spark.read(Stream).format("rmq")`` was told, checked once when the query starts.

    Three things behave as in Kafka's connector or the broker decides them, on purpose:

    - ``startingOffsets=latest`` (a stream's default) starts at the end of each queue when the query first starts:
      the first micro-batch is empty, and messages sent after that point are read from the next one on.
    - ``pullBatchSize`` is what a PULL_MESSAGE asks for; the broker answers at most
      ``maxTransferCountOnMessageInMemory`` messages (32 by default; conf/broker.conf raises it to 1024) and
      ``maxTransferBytesOnMessageInMemory`` bytes per pull (Apache's broker also caps messages no longer in the page
      cache by ``maxTransferCountOnMessageInDisk``, 8); a partition simply pulls more often.
    - ``filterType=SQL92`` needs ``enablePropertyFilter=true`` on every broker read (conf/broker.conf sets it);
      a broker without it refuses the pull and the query fails naming it.
    """

    namesrv_addr: str
    topics: tuple[str, ...]  # empty when topic_pattern is set
    topic_pattern: str | None
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only; None for streams
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    filter: str | None
    filter_type: str
    consumer_group: str | None
    pull_batch_size: int  # asked per pull; the broker caps it (maxTransferCountOnMessageInMemory)
    pull_timeout_ms: int
    min_partitions: int | None
    streaming: bool
    assigned: tuple[tuple[str, str, int], ...] = ()  # the ``assign`` option's (topic, brokerName, queueId), sorted
    credentials: SessionCredentials | None = None  # accessKey/secretKey: every request is signed with them
    trace_topic: str | None = None  # enableMsgTrace: SubBefore/SubAfter of every batch handed to Spark go there

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        what = "streaming source" if streaming else "batch source"
        opts = OptionReader(options, SOURCE_OPTIONS, what)
        wrong = _STREAM_ONLY if not streaming else _BATCH_ONLY
        misplaced = [name for name in wrong if opts.has(name)]
        if misplaced:
            where = "streaming queries (readStream)" if not streaming else "batch queries (read)"
            raise ConnectorOptionError(f"option(s) {', '.join(misplaced)} apply only to {where}")
        namesrv = opts.str("namesrvAddr", required=True)
        topics, pattern, assigned = cls._subscription(opts)
        starting = cls._starting(opts, streaming)
        ending = None if streaming else cls._ending(opts)
        max_rows = opts.int("maxOffsetsPerTrigger", minimum=1)
        min_rows = opts.int("minOffsetsPerTrigger", minimum=1)
        if opts.has("maxTriggerDelay") and min_rows is None:
            raise ConnectorOptionError("option maxTriggerDelay needs minOffsetsPerTrigger")
        if max_rows is not None and min_rows is not None and min_rows > max_rows:
            raise ConnectorOptionError(f"minOffsetsPerTrigger ({min_rows}) is more than maxOffsetsPerTrigger "
                                       f"({max_rows})")
        delay_text = opts.str("maxTriggerDelay")
        delay = parse_duration_ms("maxTriggerDelay", delay_text) if delay_text else DEFAULT_MAX_TRIGGER_DELAY_MS
        filter_expr = opts.str("filter")
        filter_type = (opts.str("filterType") or "TAG").upper()
        if filter_type not in FILTER_TYPES:
            raise ConnectorOptionError(f"option filterType must be TAG or SQL92, got {opts.str('filterType')!r}")
        if opts.has("filterType") and filter_expr is None:
            raise ConnectorOptionError("option filterType needs filter (the tag or SQL92 expression)")
        group = opts.str("consumerGroup")
        if group is not None and (is_topic_or_group_illegal(group) or len(group) > 255):
            raise ConnectorOptionError(f"option consumerGroup {group!r} is not a valid group name "
                                       f"(allowed: {VALID_NAME_PATTERN}, at most 255 characters)")
        return cls(
            namesrv_addr=namesrv, topics=topics, topic_pattern=pattern, starting=starting, ending=ending,
            max_offsets_per_trigger=max_rows, min_offsets_per_trigger=min_rows, max_trigger_delay_ms=delay,
            fail_on_data_loss=opts.bool("failOnDataLoss", True), filter=filter_expr, filter_type=filter_type,
            consumer_group=group, pull_batch_size=opts.int("pullBatchSize", DEFAULT_PULL_BATCH_SIZE, minimum=1),
            pull_timeout_ms=opts.int("pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, minimum=1),
            min_partitions=opts.int("minPartitions", minimum=1), streaming=streaming, assigned=assigned,
            credentials=credentials(opts), trace_topic=trace_topic(opts),
        )

    @classmethod
    def _subscription(cls, opts: OptionReader) -> tuple[tuple[str, ...], str | None, tuple[tuple[str, str, int], ...]]:
        """(topics, topicPattern, assigned queues) from the one subscription option given."""
        given = [name for name in SUBSCRIPTIONS if opts.has(name)]
        if len(given) != 1:
            raise ConnectorOptionError(f"exactly one of the options {', '.join(SUBSCRIPTIONS)} is required"
                                       + (f"; got {', '.join(given)}" if given else ""))
        name = given[0]
        if name in ("topicPattern", "subscribePattern"):
            pattern = opts.str(name, required=True)
            try:
                re.compile(pattern)
            except re.error as err:
                raise ConnectorOptionError(f"option {name} {pattern!r} is not a valid regex: {err}") from None
            return (), pattern, ()
        if name == "assign":
            assigned = parse_assign(opts.str("assign", required=True))
            topics = tuple(dict.fromkeys(topic for topic, _, _ in assigned))
            cls._check_topics(topics)
            return topics, None, assigned
        text = opts.str(name, required=True)
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise ConnectorOptionError(f"option {name} names no topic")
        cls._check_topics(topics)
        return topics, None, ()

    @staticmethod
    def _check_topics(topics: tuple[str, ...]) -> None:
        for topic in topics:
            check_topic_name("topic", topic)
            if topic in _INTERNAL_TOPICS:
                raise ConnectorOptionError(f"topic {topic} is a broker-internal store of messages consumers must "
                                           "not see (half or delayed messages); it cannot be read")

    @staticmethod
    def _starting(opts: OptionReader, streaming: bool) -> OffsetSpec:
        given = [n for n in ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp") if opts.has(n)]
        if len(given) > 1:
            raise ConnectorOptionError(f"options {', '.join(given)} contradict each other: give only one")
        if opts.has("startingTimestamp"):
            return OffsetSpec("timestamp", timestamp=opts.int("startingTimestamp", minimum=0))
        if opts.has("startingOffsetsByTimestamp"):
            table = parse_queue_json("startingOffsetsByTimestamp", opts.str("startingOffsetsByTimestamp"), allowed=())
            return OffsetSpec("timestamps", tuple(sorted(table.items())))
        text = opts.str("startingOffsets", "latest" if streaming else "earliest")
        if text.lower() in ("earliest", "latest"):
            if text.lower() == "latest" and not streaming:
                raise ConnectorOptionError("startingOffsets=latest is not allowed for a batch query (it would read "
                                           "nothing); use earliest, JSON offsets or a timestamp")
            return OffsetSpec(text.lower())
        table = parse_queue_json("startingOffsets", text, allowed=(EARLIEST, LATEST))
        if not streaming and LATEST in table.values():
            raise ConnectorOptionError("startingOffsets: -1 (latest) is not allowed for a batch query")
        return OffsetSpec("offsets", tuple(sorted(table.items())))

    @staticmethod
    def _ending(opts: OptionReader) -> OffsetSpec:
        if opts.has("endingOffsets") and opts.has("endingTimestamp"):
            raise ConnectorOptionError("options endingOffsets, endingTimestamp contradict each other: give only one")
        if opts.has("endingTimestamp"):
            return OffsetSpec("timestamp", timestamp=opts.int("endingTimestamp", minimum=0))
        text = opts.str("endingOffsets", "latest")
        if text.lower() == "latest":
            return OffsetSpec("latest")
        if text.lower() == "earliest":
            raise ConnectorOptionError("endingOffsets=earliest is not allowed (it would read nothing)")
        table = parse_queue_json("endingOffsets", text, allowed=(LATEST,))
        return OffsetSpec("offsets", tuple(sorted(table.items())))


# -- sink options (connector/sink.py) ---------------------------------------------------------------------------------

SINK_OPTIONS = (
    "namesrvAddr", "topic", "sinkId", "decisionTopic", "checkImmunitySeconds", "maxInFlight", "sendTimeoutMs",
    "resolverIdleTimeoutSeconds", "resolverDir", "masterWaitTimeoutMs", "guarantee", "faultInjection",
    *CREDENTIAL_OPTIONS, *TRACE_OPTIONS,
)
# Sink options the README does not list: fault injection for the suite's failure tests.
UNDOCUMENTED_SINK_OPTIONS = ("faultInjection",)
SINK_ID_PATTERN = r"[A-Za-z0-9_-]{1,64}"
DEFAULT_DECISION_TOPIC = "RMQ_SINK_DECISIONS"
DEFAULT_CHECK_IMMUNITY_S = 120  # the driver commits halves younger than half of it; older ones the check commits
DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_SEND_TIMEOUT_MS = 10_000
DEFAULT_RESOLVER_IDLE_S = 900
# What the sink promises (option ``guarantee``): exactly once through half messages and the decision log, or at
# least once through plain batches (no half message, no decision, no resolver: a retried task sends its rows again).
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly-once", "at-least-once"
GUARANTEES = (EXACTLY_ONCE, AT_LEAST_ONCE)
# Options only the exactly-once protocol reads: refused beside guarantee=at-least-once, where they would do nothing.
_EXACTLY_ONCE_ONLY = ("decisionTopic", "checkImmunitySeconds", "resolverIdleTimeoutSeconds", "resolverDir")
# A master restarted after a crash is back within seconds to a minute; a task or commit that needs it waits this
# long (a slave cannot take half messages, decisions or END_TRANSACTION), then fails naming the brokerName.
DEFAULT_MASTER_WAIT_MS = 30_000


@dataclass(frozen=True)
class SinkOptions:
    """``df.write[Stream].format("rmq")`` options (see connector/sink.py for the protocol they drive).

    ``sink_id`` is the sink identity the decisions are recorded under: the ``sinkId`` option, else (streaming) one
    derived from the absolute ``checkpointLocation`` Spark passes, else (batch) a fresh id per job. ``fault`` is the
    parsed ``faultInjection`` JSON (tests only)."""

    namesrv_addr: str
    topic: str | None
    sink_id: str
    sink_id_explicit: bool
    streaming: bool
    decision_topic: str = DEFAULT_DECISION_TOPIC
    check_immunity_s: int = DEFAULT_CHECK_IMMUNITY_S
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    resolver_idle_timeout_s: int = DEFAULT_RESOLVER_IDLE_S
    resolver_dir: str | None = None
    master_wait_ms: int = DEFAULT_MASTER_WAIT_MS
    guarantee: str = EXACTLY_ONCE
    fault: Mapping[str, object] | None = None
    credentials: SessionCredentials | None = None  # accessKey/secretKey: tasks, the driver and the resolver sign
    trace_topic: str | None = None  # enableMsgTrace: Pub of every row, EndTransaction of the driver's ends go there

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: object | None = None, *, streaming: bool) -> SinkOptions:
        import hashlib
        import os
        import uuid

        reader = OptionReader(options, SINK_OPTIONS, "rmq sink")
        namesrv = reader.str("namesrvAddr", required=True)
        topic = reader.str("topic")
        if topic is not None:
            check_topic_name("topic option", topic)
        if schema is not None:
            # here, not at the top: the source's driver process (Spark starts one per streaming query) parses
            # SourceOptions only, and the columns module pulls in the decoder and the decision log
            from connector.columns import check_sink_schema

            check_sink_schema(schema, topic)
        guarantee = _guarantee(reader)
        sink_id, explicit = reader.str("sinkId"), True
        if sink_id is not None:
            if not re.fullmatch(SINK_ID_PATTERN, sink_id):
                raise ConnectorOptionError(f"option sinkId must match {SINK_ID_PATTERN}, got {sink_id!r}")
        elif streaming and guarantee == EXACTLY_ONCE:
            checkpoint = options.get("checkpointLocation") or options.get("checkpointlocation")
            if not checkpoint:
                raise ConnectorOptionError(
                    "the rmq sink needs a stable identity for exactly-once delivery: set the option sinkId, or "
                    "writeStream.option('checkpointLocation', ...) (the session-wide "
                    "spark.sql.streaming.checkpointLocation is not passed to data sources)")
            location = str(checkpoint)
            if "://" not in location and not location.startswith("file:"):
                location = os.path.abspath(location)
            sink_id, explicit = "ckpt-" + hashlib.sha256(location.encode()).hexdigest()[:24], False
        else:
            sink_id, explicit = "job-" + uuid.uuid4().hex, False
        decision_topic = reader.str("decisionTopic", DEFAULT_DECISION_TOPIC)
        check_topic_name("option decisionTopic", decision_topic)
        fault = None if (text := reader.str("faultInjection")) is None else _json_option("faultInjection", text)
        return cls(
            namesrv_addr=namesrv, topic=topic, sink_id=sink_id, sink_id_explicit=explicit, streaming=streaming,
            decision_topic=decision_topic,
            check_immunity_s=reader.int("checkImmunitySeconds", DEFAULT_CHECK_IMMUNITY_S, minimum=1),
            max_in_flight=reader.int("maxInFlight", DEFAULT_MAX_IN_FLIGHT, minimum=1),
            send_timeout_ms=reader.int("sendTimeoutMs", DEFAULT_SEND_TIMEOUT_MS, minimum=1),
            resolver_idle_timeout_s=reader.int("resolverIdleTimeoutSeconds", DEFAULT_RESOLVER_IDLE_S, minimum=1),
            resolver_dir=reader.str("resolverDir"),
            master_wait_ms=reader.int("masterWaitTimeoutMs", DEFAULT_MASTER_WAIT_MS, minimum=0), guarantee=guarantee,
            fault=fault, credentials=credentials(reader), trace_topic=trace_topic(reader))

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == EXACTLY_ONCE

    @property
    def producer_group(self) -> str:
        """The producer group of the sink's half messages: the broker asks this group's producer (the resolver)."""
        return f"RMQ_SINK_{self.sink_id}"


def _guarantee(reader: OptionReader) -> str:
    """The ``guarantee`` option, lower-cased; the exactly-once options are refused beside at-least-once."""
    text = reader.str("guarantee", EXACTLY_ONCE)
    guarantee = text.lower()
    if guarantee not in GUARANTEES:
        raise ConnectorOptionError(f"option guarantee must be {' or '.join(GUARANTEES)}, got {text!r}")
    given = [name for name in _EXACTLY_ONCE_ONLY if reader.has(name)]
    if guarantee == AT_LEAST_ONCE and given:
        raise ConnectorOptionError(f"option(s) {', '.join(given)} apply only to guarantee={EXACTLY_ONCE} (an "
                                   f"{AT_LEAST_ONCE} sink sends plain messages: no half message, decision or resolver)")
    return guarantee
