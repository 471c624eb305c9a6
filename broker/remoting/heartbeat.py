"""HEART_BEAT's body: HeartbeatData, its ConsumerData and ProducerData, and SubscriptionData (remoting
``protocol/heartbeat``), shared by the client that writes them and the broker that reads them.

Rule 1: the JSON shapes of these bodies are defined here and nowhere else. fastjson writes bean properties in
alphabetical order, so ``to_json`` lists them that way. A GET_CONSUMER_CONNECTION_LIST answer carries the same
SubscriptionData, which the admin tools read with ``SubscriptionData.from_json``.

Examples:
    >>> sub = SubscriptionData("TopicTest", "TagA||TagB", tags_set=["TagA", "TagB"], code_set=[2598919, 2598920],
    ...                        sub_version=1)
    >>> consumer = ConsumerData("GID", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", [sub])
    >>> HeartbeatData("10.0.0.1@123", [consumer], ["PID"]).to_json()["producerDataSet"]
    [{'groupName': 'PID'}]
    >>> SubscriptionData.from_json(sub.to_json()) == sub
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.common.clock import now_ms
from broker.common.errors import FilterExpressionError, RemoteProtocolError
from broker.common.message import java_hash

SUB_ALL = "*"  # SubscriptionData.SUB_ALL: every message of the topic
EXPRESSION_TAG = "TAG"  # ExpressionType.TAG
EXPRESSION_SQL92 = "SQL92"  # ExpressionType.SQL92
TAG_SEPARATOR = "||"


@dataclass(slots=True)
class SubscriptionData:
    """What a consumer group reads of one topic: the expression, its tags and their hash codes (TAG expressions),
    and ``sub_version``, the time the client built it (Java's default, currentTimeMillis), which tells the broker
    which of two subscriptions is newer."""

    topic: str
    sub_string: str = SUB_ALL
    expression_type: str = EXPRESSION_TAG
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=now_ms)
    class_filter_mode: bool = False

    def matches_tag(self, tags: str | None) -> bool:
        """PullAPIWrapper's client-side filter: the broker filters by tag hash, collisions are dropped here."""
        return not self.tags_set or (tags is not None and tags in self.tags_set)

    def to_json(self) -> dict[str, Any]:
        """The properties fastjson writes, in its (alphabetical) order."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SubscriptionData:
        """Defaults for what is missing (``sub_version`` 0: a body without one is older than any subscription);
        ValueError/TypeError for a malformed entry."""
        topic = data.get("topic")
        if not isinstance(topic, str):
            raise ValueError(f"subscription without a topic: {dict(data)!r}")
        return cls(
            topic=topic,
            sub_string=str(data.get("subString") or SUB_ALL),
            expression_type=str(data.get("expressionType") or EXPRESSION_TAG),
            tags_set=[str(tag) for tag in data.get("tagsSet") or ()],
            code_set=[int(code) for code in data.get("codeSet") or ()],
            sub_version=int(data.get("subVersion") or 0),
            class_filter_mode=bool(data.get("classFilterMode", False)),
        )


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: no type at all also means TAG."""
    return not expression_type or expression_type == EXPRESSION_TAG


def parse_subscription(topic: str, sub_string: str | None,
                       expression_type: str | None = None) -> SubscriptionData | None:
    """FilterAPI.build, as both sides read an expression: "*" (or empty) is every message; a TAG expression is
    tags split at "||", trimmed and de-duplicated, with their String.hashCode; another type is kept as text. None
    where Java throws (an expression made only of separators, or an empty non-TAG expression)."""
    if not is_tag_type(expression_type):
        return SubscriptionData(topic, sub_string, expression_type) if sub_string else None
    if not sub_string or sub_string == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, EXPRESSION_TAG)
    parts = sub_string.split(TAG_SEPARATOR)
    while parts and parts[-1] == "":  # String.split drops trailing empty strings; nothing left is an error
        parts.pop()
    if not parts:
        return None
    tags = list(dict.fromkeys(tag.strip() for tag in parts if tag.strip()))
    return SubscriptionData(topic, sub_string, EXPRESSION_TAG, tags_set=tags, code_set=[java_hash(t) for t in tags])


def build_subscription_data(topic: str, sub_expression: str | None) -> SubscriptionData:
    """FilterAPI.buildSubscriptionData: a consumer's TAG expression; FilterExpressionError where Java throws.

    Examples:
        >>> build_subscription_data("T", "TagA || TagB").tags_set
        ['TagA', 'TagB']
    """
    subscription = parse_subscription(topic, sub_expression)
    if subscription is None:
        raise FilterExpressionError(f"subscription expression {sub_expression!r} of topic {topic} holds no tag")
    return subscription


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """One consumer group of a client: how it consumes and what it subscribes to.

    ``consume_type`` is CONSUME_ACTIVELY (pull) or CONSUME_PASSIVELY (push), ``message_model`` CLUSTERING or
    BROADCASTING; both are kept as text, since a newer client may send other values."""

    group_name: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: Sequence[SubscriptionData] = ()
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"consumeFromWhere": self.consume_from_where, "consumeType": self.consume_type,
                "groupName": self.group_name, "messageModel": self.message_model,
                "subscriptionDataSet": [s.to_json() for s in self.subscriptions], "unitMode": self.unit_mode}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsumerData:
        return cls(
            group_name=str(data["groupName"]),
            consume_type=str(data.get("consumeType")),
            message_model=str(data.get("messageModel")),
            consume_from_where=str(data.get("consumeFromWhere")),
            subscriptions=tuple(SubscriptionData.from_json(s) for s in data.get("subscriptionDataSet") or ()),
            unit_mode=bool(data.get("unitMode", False)),
        )


@dataclass(frozen=True, slots=True)
class ProducerData:
    """One producer group of a client."""

    group_name: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProducerData:
        return cls(str(data["groupName"]))


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """A client's heartbeat: its id, its consumer groups and its producer groups. ``heartbeat_fingerprint`` is 0 in
    a V1 heartbeat, which always carries the subscriptions; a V2 heartbeat (useHeartbeatV2) may leave them out
    (``without_sub``) when their fingerprint did not change."""

    client_id: str
    consumers: Sequence[ConsumerData] = ()
    producer_groups: Sequence[str] = ()
    heartbeat_fingerprint: int = 0
    without_sub: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"clientID": self.client_id, "consumerDataSet": [c.to_json() for c in self.consumers],
                "heartbeatFingerprint": self.heartbeat_fingerprint,
                "producerDataSet": [ProducerData(g).to_json() for g in self.producer_groups],
                "withoutSub": self.without_sub}

    @classmethod
    def from_json(cls, body: Any) -> HeartbeatData:
        """The decoded JSON body; RemoteProtocolError when it is not a HeartbeatData."""
        try:
            return cls(
                client_id=str(body["clientID"]),
                consumers=tuple(ConsumerData.from_json(c) for c in body.get("consumerDataSet") or ()),
                producer_groups=tuple(ProducerData.from_json(p).group_name for p in body.get("producerDataSet") or ()),
                heartbeat_fingerprint=int(body.get("heartbeatFingerprint") or 0),
                without_sub=bool(body.get("withoutSub", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise RemoteProtocolError(f"malformed HeartbeatData body: {err!r}") from err
