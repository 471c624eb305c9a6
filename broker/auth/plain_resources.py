"""ACL 1.0's permissions (``Permission``) and the one table of what each request needs (``PlainAccessResource.parse``,
5.3.2): the resources a request names, each with the permission it needs, and the request codes only an admin
account may send.

A resource is a topic name, or a group as its retry topic (``%RETRY%group``): ``plain_acl.yml`` lists groups that
way too, so one map holds both. Requests this table does not name need no resource: their signature is checked, and
only an admin account may send the admin codes.

Examples:
    >>> from broker.remoting.command import create_request
    >>> needed_resources(create_request(11, {"topic": "T", "consumerGroup": "G"}))
    {'T': 8, '%RETRY%G': 8}
    >>> check_permission(PUB, parse_perm("PUB|SUB")), check_permission(SUB, parse_perm("DENY"))
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.common.errors import AclException
from broker.common.fastjson import decode_json
from broker.common.validation import RMQ_SYS_TRACE_TOPIC, is_retry_topic, parse_group, retry_topic
from broker.remoting.codes import AclV1RequestCode, RequestCode
from broker.remoting.command import RemotingCommand
from broker.remoting.heartbeat import HeartbeatData

# Permission's bits
DENY = 1
ANY = 2
PUB = 4
SUB = 8
PERM_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# Permission.ADMIN_CODE (5.3.2): only an admin account may send these
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC, AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    AclV1RequestCode.DELETE_ACL_CONFIG, AclV1RequestCode.GET_BROKER_CLUSTER_ACL_INFO})

# the frame a parse failure names (PlainAccessResource.parse's catch, 5.3.2)
PARSE_FRAME = "org.apache.rocketmq.acl.plain.PlainAccessResource.parse(PlainAccessResource.java:178)"


def parse_perm(text: str | None) -> int:
    """Permission.parsePermFromString: anything but the four names (or none) is DENY."""
    return DENY if text is None else PERM_NAMES.get(text.strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission: DENY owns nothing; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def is_trace_publish(needed: Mapping[str, int]) -> bool:
    """Trace messages are exempt (validate's step 6): the request needs exactly PUB on ``RMQ_SYS_TRACE_TOPIC``."""
    return needed.get(RMQ_SYS_TRACE_TOPIC) == PUB


def print_resource(resource: str) -> str:
    """PlainAccessResource.printStr: ``topic:<name>``, or ``group:<group>`` for a retry topic."""
    return f"group:{parse_group(resource)}" if is_retry_topic(resource) else f"topic:{resource}"


# -- the request table ------------------------------------------------------------------------------------------------

Needs = list[tuple[str | None, int]]


def _not_null(fields: Mapping[str, str], *names: str) -> None:
    """decodeCommandCustomHeader's @CFNotNull check, with its message."""
    for name in names:
        if fields.get(name) is None:
            raise ValueError(f"the custom field <{name}> is null")


def _group(name: str | None) -> str | None:
    return None if name is None else retry_topic(name)


def _send(key: str) -> Callable[[Mapping[str, str], RemotingCommand], Needs]:
    def needs(f: Mapping[str, str], _: RemotingCommand) -> Needs:
        topic = f.get(key)
        return [(topic, SUB if topic is not None and is_retry_topic(topic) else PUB)]
    return needs


def _heartbeat(_: Mapping[str, str], request: RemotingCommand) -> Needs:
    body = bytes(request.body) if request.body else b""
    if not body:  # HeartbeatData.decode(null) is null: the message is Java 17's NullPointerException's
        raise ValueError('Cannot invoke "org.apache.rocketmq.remoting.protocol.heartbeat.HeartbeatData'
                         '.getConsumerDataSet()" because "heartbeatData" is null')
    heartbeat = HeartbeatData.from_json(decode_json(body.decode("utf-8")))
    needs: Needs = []
    for consumer in heartbeat.consumers:
        needs.append((retry_topic(consumer.group_name), SUB))
        needs.extend((s.topic, SUB) for s in consumer.subscriptions)
    return needs


def _unregister(f: Mapping[str, str], _: RemotingCommand) -> Needs:
    _not_null(f, "clientID")
    return [(_group(f.get("consumerGroup")), SUB)]


def _consumer_list(f: Mapping[str, str], _: RemotingCommand) -> Needs:
    _not_null(f, "consumerGroup")
    return [(_group(f.get("consumerGroup")), SUB)]


def _update_offset(f: Mapping[str, str], _: RemotingCommand) -> Needs:
    _not_null(f, "consumerGroup", "topic", "queueId", "commitOffset")
    return [(_group(f.get("consumerGroup")), SUB), (f.get("topic"), SUB)]


C = RequestCode
REQUEST_RESOURCES: dict[int, Callable[[Mapping[str, str], RemotingCommand], Needs]] = {
    C.SEND_MESSAGE: _send("topic"),
    C.SEND_MESSAGE_V2: _send("b"),
    C.SEND_BATCH_MESSAGE: _send("b"),
    C.RECALL_MESSAGE: lambda f, _: [(f.get("topic"), PUB)],
    C.CONSUMER_SEND_MSG_BACK: lambda f, _: [(_group(f.get("group")), SUB)],
    C.PULL_MESSAGE: lambda f, _: [(f.get("topic"), SUB), (_group(f.get("consumerGroup")), SUB)],
    C.QUERY_MESSAGE: lambda f, _: [(f.get("topic"), SUB)],
    C.HEART_BEAT: _heartbeat,
    C.UNREGISTER_CLIENT: _unregister,
    C.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
    C.UPDATE_CONSUMER_OFFSET: _update_offset,
}


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """The resources ``request`` needs and the permission each needs (a later one for the same resource replaces an
    earlier one, as Java's map put does). AclException (the cause's message) when the request cannot be read."""
    rule = REQUEST_RESOURCES.get(request.code)
    if rule is None:
        return {}
    try:
        needs = rule(request.ext_fields, request)
    except Exception as err:  # Apache wraps any Throwable of the parse: so does this
        message = err.args[0] if isinstance(err, ValueError) and err.args else str(err)
        raise AclException(message, PARSE_FRAME) from err
    return {resource: perm for resource, perm in needs if resource is not None}
