"""What a query needs of the broker's access control, and the one error that says so when the broker refuses.

Rule 1: the connector's words for a refusal live here. A refusal is ACL 2.0's NO_PERMISSION (``username cannot be
null.``, ``User:u has no permission to access Topic:T ...``) or ACL 1.0's SYSTEM_ERROR carrying an AclException; a
NO_PERMISSION that says a topic or broker is ``forbidden`` (its perm, not the caller's rights) is not one.

A write's driver asks before any task sends (``check_publish``): an END_TRANSACTION ROLLBACK of no half message
(commitLogOffset -1) to each master of the topic. The broker checks PUB on its topic first, exactly as for a send,
then finds nothing to end and answers SYSTEM_ERROR; it stores nothing. (ACL 1.0 checks only the signature of
END_TRANSACTION: a user without PUB then fails at its tasks' first send, with the same error.)

The needs are Apache's (``DefaultAuthorizationContextBuilder`` and the request headers' annotations): a read asks for
queue offsets (GET on the topic) and pulls (SUB on the topic and on the consumer group the pulls name); a write sends
(PUB on the topic). The error names the access key but never the secret.

Examples:
    >>> need = Need("reading topic T as consumer group G", "GET and SUB on Topic:T and SUB on Group:G")
    >>> print(access_denied(need, NoPermission(16, "username cannot be null.", "127.0.0.1:10911"), None))
    reading topic T as consumer group G needs GET and SUB on Topic:T and SUB on Group:G; the broker at \
127.0.0.1:10911 refused: username cannot be null.; set the accessKey and secretKey options (the query's requests \
were not signed)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.client import protocol
from broker.client.blocking import BlockingClient
from broker.common.errors import (  # noqa: F401  (NoPermission: the example)
    AccessDenied,
    MQBrokerError,
    MQClientError,
    NoPermission,
    RemotingError,
    broker_error,
)
from broker.common.message import TRANSACTION_ROLLBACK_TYPE
from broker.common.validation import DEFAULT_CONSUMER_GROUP
from broker.remoting.codes import ResponseCode
from broker.remoting.signing import SessionCredentials

if TYPE_CHECKING:
    from connector.options import SinkOptions

ACL1_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


@dataclass(frozen=True, slots=True)
class Need:
    """What the query does (``doing``) and the grants it takes (``grants``), in Apache's action and resource names."""

    doing: str
    grants: str


def read_need(topics: tuple[str, ...], pattern: str | None, consumer_group: str | None) -> Need:
    group = consumer_group or DEFAULT_CONSUMER_GROUP
    names = ", ".join(topics) if topics else f"the topics matching {pattern}"
    resources = " and ".join(f"Topic:{t}" for t in topics) if topics else f"each topic matching {pattern}"
    return Need(f"reading {'topic ' if topics else ''}{names} as consumer group {group}",
                f"GET and SUB on {resources} and SUB on Group:{group}")


def write_need(topic: str) -> Need:
    return Need(f"writing to topic {topic}", f"PUB on Topic:{topic}")


def is_refusal(err: BaseException) -> bool:
    """Whether ``err`` is the broker's access control saying no (not a topic's or broker's perm)."""
    if not isinstance(err, MQBrokerError):
        return False
    remark = err.remark or ""
    if err.code == ResponseCode.NO_PERMISSION:
        return "forbidden" not in remark
    return err.code == ResponseCode.SYSTEM_ERROR and remark.startswith(ACL1_EXCEPTION)


def access_denied(need: Need, err: MQBrokerError, credentials: SessionCredentials | None) -> AccessDenied:
    """The error of a refused ``need``: the grants, the broker's own words, and what to change."""
    if credentials is None:
        advice = "set the accessKey and secretKey options (the query's requests were not signed)"
    else:
        advice = f"grant them to the user of accessKey {credentials.access_key}"
    where = f" at {err.address}" if err.address else ""
    return AccessDenied(f"{need.doing} needs {need.grants}; the broker{where} refused: {err.remark}; {advice}")


PROBE_OFFSET = -1  # no half message is there: the broker's end finds nothing and stores nothing


def check_publish(opts: SinkOptions, topic: str) -> None:
    """Raise AccessDenied when a master of ``topic`` refuses this sink PUB; anything else (no route yet, a broker
    away, its "nothing to end" answer) is left to the tasks, which meet and report it themselves."""
    with BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms, credentials=opts.credentials) as client:
        try:
            masters = sorted({(mq.broker_name, client.broker_addr(mq)) for mq in client.fetch_publish_queues(topic)})
        except (MQClientError, RemotingError):
            return
        for broker_name, addr in masters:
            request = protocol.end_transaction_request(
                opts.producer_group, topic=topic, broker_name=broker_name, msg_id="0" * 32,
                commit_log_offset=PROBE_OFFSET, queue_offset=0, transaction_id=None,
                commit_or_rollback=TRANSACTION_ROLLBACK_TYPE, remark="rmq sink: access check, ends nothing")
            try:
                response = client.client(addr).invoke(request, opts.send_timeout_ms)
            except RemotingError:
                continue
            err = broker_error(response.code, response.remark, addr)
            if is_refusal(err):
                raise access_denied(write_need(topic), err, opts.credentials)
