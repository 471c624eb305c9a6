"""Topic and group name rules: RocketMQ's TopicValidator, and the system topic and group names.

Rule 1: every name rule and every reserved topic or group name lives in this module. The checks return a
``ValidateResult`` instead of raising, because the processors turn a rejection into a response remark, and the
remarks are Java's own text so that clients see the same messages as with Apache's broker.

The charset ``^[%|a-zA-Z0-9_-]+$`` is also what keeps names safe as directory names (``consumequeue/{topic}``): it
has no '.', '/', '\\' or NUL, so no accepted name can be "..", absolute, or reach outside the store.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- reserved topics (TopicValidator, MixAll, PopAckConstants) --------------------------------------------------------
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"  # the template for auto-created topics; exists when autoCreateTopicEnable
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC = "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC"
RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC = "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RMQ_SYS_ROCKSDB_OFFSET_TOPIC = "CHECKPOINT_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYNC_BROKER_MEMBER_GROUP_PREFIX = SYSTEM_TOPIC_PREFIX + "SYNC_BROKER_MEMBER_"
REVIVE_TOPIC_PREFIX = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
TIMER_TOPIC = SYSTEM_TOPIC_PREFIX + "wheel_timer"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC,
        RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
        RMQ_SYS_ROCKSDB_OFFSET_TOPIC,
    }
)
# Topics a client may never send to: they are written only by the broker itself.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC,
        RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)

# -- reserved groups (MixAll) -----------------------------------------------------------------------------------------
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"
# The instance name (a client id's part after "@", then the process id) of the Spark source's driver when it commits a
# query's offsets to its consumerGroup: how the console tells a Spark query's group from other pull consumers.
SPARK_SOURCE_INSTANCE_PREFIX = "rmq-spark-source-"

PREDEFINED_GROUPS = frozenset(
    {
        DEFAULT_CONSUMER_GROUP,
        DEFAULT_PRODUCER_GROUP,
        TOOLS_CONSUMER_GROUP,
        SCHEDULE_CONSUMER_GROUP,
        FILTERSRV_CONSUMER_GROUP,
        MONITOR_CONSUMER_GROUP,
        CLIENT_INNER_PRODUCER_GROUP,
        SELF_TEST_PRODUCER_GROUP,
        SELF_TEST_CONSUMER_GROUP,
        ONS_HTTP_PROXY_GROUP,
        CID_ONSAPI_PERMISSION_GROUP,
        CID_ONSAPI_OWNER_GROUP,
        CID_ONSAPI_PULL_GROUP,
        CID_SYS_RMQ_TRANS,
    }
)

# -- the rules --------------------------------------------------------------------------------------------------------
VALID_NAME_PATTERN = "^[%|a-zA-Z0-9_-]+$"
TOPIC_MAX_LENGTH = 127
# Groups are shorter because they become part of retry and DLQ topic names (%RETRY%group, %RETRY%group_topic).
GROUP_MAX_LENGTH = 120
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255
_VALID_CHARS = frozenset("%|_-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, slots=True)
class ValidateResult:
    """TopicValidator.ValidateResult: ``remark`` is empty when ``valid``, else the text for the response remark."""

    valid: bool
    remark: str = ""

    def __bool__(self) -> bool:
        return self.valid


VALID = ValidateResult(True)


def is_topic_or_group_illegal(name: str) -> bool:
    """True if ``name`` has a character outside ``^[%|a-zA-Z0-9_-]+$`` (the empty string is not illegal here)."""
    return not _VALID_CHARS.issuperset(name)


def _is_blank(name: str | None) -> bool:
    return name is None or not name.strip()


def validate_topic(topic: str | None) -> ValidateResult:
    """TopicValidator.validateTopic: blank, then charset, then length (255 for %RETRY%/%DLQ% topics, else 127).

    Examples:
        >>> validate_topic("TopicTest").valid
        True
        >>> validate_topic("../x").remark
        'The specified topic: ../x, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$'
    """
    if topic is None or _is_blank(topic):
        return ValidateResult(False, "The specified topic is blank.")
    if is_topic_or_group_illegal(topic):
        return ValidateResult(
            False, f"The specified topic: {topic}, contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        )
    if is_retry_topic(topic) or is_dlq_topic(topic):
        if len(topic) > RETRY_OR_DLQ_TOPIC_MAX_LENGTH:
            return ValidateResult(
                False,
                f"The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max length: "
                f"{RETRY_OR_DLQ_TOPIC_MAX_LENGTH}",
            )
    elif len(topic) > TOPIC_MAX_LENGTH:
        return ValidateResult(
            False, f"The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
        )
    return VALID


def validate_group(group: str | None) -> ValidateResult:
    """TopicValidator.validateGroup: blank, then charset, then at most 120 characters.

    Examples:
        >>> validate_group("%RETRY%group").valid
        True
    """
    if group is None or _is_blank(group):
        return ValidateResult(False, "The specified group is blank.")
    if is_topic_or_group_illegal(group):
        return ValidateResult(
            False, f"The specified group: {group}, contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        )
    if len(group) > GROUP_MAX_LENGTH:
        return ValidateResult(
            False, f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
        )
    return VALID


def is_system_topic(topic: str) -> bool:
    """A reserved topic or one under ``rmq_sys_``. TopicConfigManager adds the cluster- and broker-named topics it
    creates (Java keeps them in one mutable global set; here each manager knows its own)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


def is_predefined_group(group: str) -> bool:
    return group in PREDEFINED_GROUPS


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def parse_group(retry_topic: str) -> str:
    """KeyBuilder.parseGroup: the group of a retry topic ("%RETRY%group", or POP retry v2's "%RETRY%group+topic").

    Examples:
        >>> parse_group("%RETRY%GID_orders"), parse_group("%RETRY%GID_orders+TopicTest")
        ('GID_orders', 'GID_orders')
    """
    parts = retry_topic.split("+")
    head = parts[0] if len(parts) == 2 else retry_topic
    return head[len(RETRY_GROUP_TOPIC_PREFIX):]


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster_name: str) -> str:
    return f"{cluster_name}_{REPLY_TOPIC_POSTFIX}"


def revive_topic(cluster_name: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster_name


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
