"""Which resources, and which actions on them, each request needs: Apache's ``DefaultAuthorizationContextBuilder``.

Rule 1: this is the one table from request code to what it needs. ``EXPLICIT`` holds the codes Apache's builder
decides by hand (a retry topic stands for its group; heartbeats and queue locks name theirs in the body); every other
code goes by ``ANNOTATED``, the ``@RocketMQAction``/``@RocketMQResource`` annotations of the header class Apache
registers for it (generated from rocketmq-remoting 5.5.0's sources; ``tests/unit/auth`` re-reads them from the
sources jar and compares). A code in neither table (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, GET_BROKER_CONFIG...) has
no header class there: its requests are authenticated but never authorized, as on Apache's broker.

Examples:
    >>> [(c.resource.key, [a.label for a in c.actions]) for c in contexts(
    ...     create_request(RequestCode.PULL_MESSAGE, {"AccessKey": "u", "topic": "T", "consumerGroup": "G"}),
    ...     "127.0.0.1", "DefaultCluster")]
    [('Topic:T', ['Sub']), ('Group:G', ['Sub'])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from broker.auth.model import Action, Resource, ResourcePattern, ResourceType
from broker.common.errors import AuthorizationError
from broker.common.fastjson import decode_json
from broker.common.validation import is_retry_topic
from broker.remoting.codes import RequestCode
from broker.remoting.command import RemotingCommand, create_request  # noqa: F401  (create_request: the example)
from broker.remoting.heartbeat import HeartbeatData
from broker.remoting.signing import ACCESS_KEY

A, C, R = Action, RequestCode, ResourceType


@dataclass(frozen=True, slots=True)
class AuthorizationContext:
    """One check: may ``username`` (None: the request named no user) do any of ``actions`` on ``resource``, from
    ``source_ip``? ``code`` is the request's, for ``authorizationWhitelist``."""

    username: str | None
    resource: Resource
    actions: tuple[Action, ...]
    source_ip: str
    code: int


@dataclass(frozen=True, slots=True)
class ResourceField:
    """A header field annotated ``@RocketMQResource``: its (ext field) name, resource type, splitter, and the value
    the header class gives it when the request leaves it out (Java's field initializer)."""

    name: str
    resource_type: ResourceType
    splitter: str = ""
    default: str | None = None


@dataclass(frozen=True, slots=True)
class HeaderRule:
    """A header class's ``@RocketMQAction``: its class-level resource type (CLUSTER gives ``Cluster:<name>`` when no
    resource field is set), its actions, and its resource fields in declaration order."""

    header: str
    class_resource: ResourceType | None
    actions: tuple[Action, ...]
    fields: tuple[ResourceField, ...]


F, H = ResourceField, HeaderRule

ANNOTATED: dict[int, HeaderRule] = {
    C.SEND_MESSAGE: H('SendMessageRequestHeader', None, (A.PUB,), (F('topic', R.TOPIC),)),
    C.PULL_MESSAGE: H('PullMessageRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.QUERY_MESSAGE: H('QueryMessageRequestHeader', None, (A.SUB, A.GET), (F('topic', R.TOPIC),)),
    C.QUERY_CONSUMER_OFFSET: H(
        'QueryConsumerOffsetRequestHeader', None, (A.GET,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.UPDATE_CONSUMER_OFFSET: H(
        'UpdateConsumerOffsetRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.UPDATE_AND_CREATE_TOPIC: H('CreateTopicRequestHeader', None, (A.CREATE,), (F('topic', R.TOPIC),)),
    C.UPDATE_AND_CREATE_TOPIC_LIST: H('CreateTopicListRequestHeader', None, (A.CREATE,), ()),
    C.GET_ALL_TOPIC_CONFIG: H('GetAllTopicConfigRequestHeader', R.TOPIC, (A.GET,), ()),
    C.SEARCH_OFFSET_BY_TIMESTAMP: H('SearchOffsetRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.GET_MAX_OFFSET: H('GetMaxOffsetRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.GET_MIN_OFFSET: H('GetMinOffsetRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.GET_EARLIEST_MSG_STORETIME: H('GetEarliestMsgStoretimeRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.VIEW_MESSAGE_BY_ID: H('ViewMessageRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.HEART_BEAT: H('HeartbeatRequestHeader', R.GROUP, (A.PUB, A.SUB), ()),
    C.UNREGISTER_CLIENT: H('UnregisterClientRequestHeader', None, (A.PUB, A.SUB), (F('consumerGroup', R.GROUP),)),
    C.CONSUMER_SEND_MSG_BACK: H(
        'ConsumerSendMsgBackRequestHeader', None, (A.SUB,), (F('group', R.GROUP), F('originTopic', R.TOPIC))),
    C.END_TRANSACTION: H('EndTransactionRequestHeader', None, (A.PUB,), (F('topic', R.TOPIC),)),
    C.GET_CONSUMER_LIST_BY_GROUP: H(
        'GetConsumerListByGroupRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP),)),
    C.CHECK_TRANSACTION_STATE: H('CheckTransactionStateRequestHeader', None, (A.PUB,), (F('topic', R.TOPIC),)),
    C.NOTIFY_CONSUMER_IDS_CHANGED: H(
        'NotifyConsumerIdsChangedRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP),)),
    C.LOCK_BATCH_MQ: H('LockBatchMqRequestHeader', None, (A.SUB,), ()),
    C.UNLOCK_BATCH_MQ: H('UnlockBatchMqRequestHeader', None, (A.SUB,), ()),
    C.PUT_KV_CONFIG: H('PutKVConfigRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.GET_KV_CONFIG: H('GetKVConfigRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.DELETE_KV_CONFIG: H('DeleteKVConfigRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.REGISTER_BROKER: H('RegisterBrokerRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.UNREGISTER_BROKER: H('UnRegisterBrokerRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.GET_ROUTEINFO_BY_TOPIC: H('GetRouteInfoRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: H('GetAllSubscriptionGroupRequestHeader', R.GROUP, (A.GET,), ()),
    C.GET_TOPIC_STATS_INFO: H('GetTopicStatsInfoRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.GET_CONSUMER_CONNECTION_LIST: H(
        'GetConsumerConnectionListRequestHeader', None, (A.GET,), (F('consumerGroup', R.GROUP),)),
    C.GET_PRODUCER_CONNECTION_LIST: H('GetProducerConnectionListRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.WIPE_WRITE_PERM_OF_BROKER: H('WipeWritePermOfBrokerRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.DELETE_SUBSCRIPTIONGROUP: H(
        'DeleteSubscriptionGroupRequestHeader', None, (A.DELETE,), (F('groupName', R.GROUP),)),
    C.GET_CONSUME_STATS: H(
        'GetConsumeStatsRequestHeader', None, (A.GET,),
          (F('consumerGroup', R.GROUP), F('topic', R.TOPIC), F('topicList', R.TOPIC, ';'))),
    C.DELETE_TOPIC_IN_BROKER: H('DeleteTopicRequestHeader', None, (A.DELETE,), (F('topic', R.TOPIC),)),
    C.DELETE_TOPIC_IN_NAMESRV: H(
        'DeleteTopicFromNamesrvRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.REGISTER_TOPIC_IN_NAMESRV: H('RegisterTopicRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.GET_KVLIST_BY_NAMESPACE: H('GetKVListByNamespaceRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.INVOKE_BROKER_TO_RESET_OFFSET: H(
        'ResetOffsetRequestHeader', None, (A.UPDATE,), (F('group', R.GROUP), F('topic', R.TOPIC))),
    C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: H(
        'GetConsumerStatusRequestHeader', None, (A.GET,), (F('topic', R.TOPIC), F('group', R.GROUP))),
    C.GET_TOPICS_BY_CLUSTER: H('GetTopicsByClusterRequestHeader', R.TOPIC, (A.LIST,), ()),
    C.QUERY_TOPIC_CONSUME_BY_WHO: H('QueryTopicConsumeByWhoRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.QUERY_CONSUME_TIME_SPAN: H(
        'QueryConsumeTimeSpanRequestHeader', None, (A.GET,), (F('topic', R.TOPIC), F('group', R.GROUP))),
    C.GET_CONSUMER_RUNNING_INFO: H(
        'GetConsumerRunningInfoRequestHeader', None, (A.GET,), (F('consumerGroup', R.GROUP),)),
    C.QUERY_CORRECTION_OFFSET: H(
        'QueryCorrectionOffsetHeader', None, (A.GET,),
          (F('filterGroups', R.GROUP, ','), F('compareGroup', R.GROUP), F('topic', R.TOPIC))),
    C.CONSUME_MESSAGE_DIRECTLY: H(
        'ConsumeMessageDirectlyResultRequestHeader', None, (A.SUB,),
          (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.SEND_MESSAGE_V2: H('SendMessageRequestHeaderV2', None, (A.PUB,), (F('b', R.TOPIC),)),
    C.CLONE_GROUP_OFFSET: H(
        'CloneGroupOffsetRequestHeader', None, (A.UPDATE,), (F('destGroup', R.GROUP), F('topic', R.TOPIC))),
    C.VIEW_BROKER_STATS_DATA: H('ViewBrokerStatsDataRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.GET_BROKER_CONSUME_STATS: H('GetConsumeStatsInBrokerHeader', R.CLUSTER, (A.GET,), ()),
    C.QUERY_CONSUME_QUEUE: H(
        'QueryConsumeQueueRequestHeader', None, (A.GET,), (F('topic', R.TOPIC), F('consumerGroup', R.GROUP))),
    C.QUERY_DATA_VERSION: H('QueryDataVersionRequestHeader', R.CLUSTER, (A.GET,), (F('clusterName', R.CLUSTER),)),
    C.RESUME_CHECK_HALF_MESSAGE: H('ResumeCheckHalfMessageRequestHeader', None, (A.UPDATE,), (F('topic', R.TOPIC),)),
    C.PUSH_REPLY_MESSAGE_TO_CLIENT: H(
        'ReplyMessageRequestHeader', None, (A.SUB,), (F('producerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.ADD_WRITE_PERM_OF_BROKER: H('AddWritePermOfBrokerRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.GET_ALL_PRODUCER_INFO: H('GetAllProducerInfoRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.QUERY_TOPICS_BY_CONSUMER: H('QueryTopicsByConsumerRequestHeader', None, (A.GET,), (F('group', R.GROUP),)),
    C.QUERY_SUBSCRIPTION_BY_CONSUMER: H(
        'QuerySubscriptionByConsumerRequestHeader', None, (A.GET,), (F('group', R.GROUP), F('topic', R.TOPIC))),
    C.GET_TOPIC_CONFIG: H('GetTopicConfigRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: H(
        'GetSubscriptionGroupConfigRequestHeader', None, (A.GET,), (F('group', R.GROUP),)),
    C.UPDATE_AND_GET_GROUP_FORBIDDEN: H(
        'UpdateGroupForbiddenRequestHeader', None, (A.UPDATE,), (F('group', R.GROUP), F('topic', R.TOPIC))),
    C.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: H(
        'CheckRocksdbCqWriteProgressRequestHeader', None, (A.GET,), (F('topic', R.TOPIC),)),
    C.EXPORT_ROCKSDB_CONFIG_TO_JSON: H('ExportRocksDBConfigToJsonRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.RECALL_MESSAGE: H('RecallMessageRequestHeader', None, (A.PUB,), (F('topic', R.TOPIC),)),
    C.GET_BROKER_MEMBER_GROUP: H('GetBrokerMemberGroupRequestHeader', None, (A.GET,), (F('clusterName', R.CLUSTER),)),
    C.ADD_BROKER: H('AddBrokerRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.REMOVE_BROKER: H('RemoveBrokerRequestHeader', R.CLUSTER, (A.UPDATE,), (F('brokerClusterName', R.CLUSTER),)),
    C.BROKER_HEARTBEAT: H('BrokerHeartbeatRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.NOTIFY_MIN_BROKER_ID_CHANGE: H('NotifyMinBrokerIdChangeRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.EXCHANGE_BROKER_HA_INFO: H('ExchangeHAInfoRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.RESET_MASTER_FLUSH_OFFSET: H('ResetMasterFlushOffsetHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.CONTROLLER_ALTER_SYNC_STATE_SET: H('AlterSyncStateSetRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.CONTROLLER_ELECT_MASTER: H(
        'ElectMasterRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER, default=""),)),
    C.CONTROLLER_REGISTER_BROKER: H(
        'RegisterBrokerToControllerRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.CONTROLLER_GET_REPLICA_INFO: H('GetReplicaInfoRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.NOTIFY_BROKER_ROLE_CHANGED: H('NotifyBrokerRoleChangedRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.CLEAN_BROKER_DATA: H(
        'CleanControllerBrokerDataRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.CONTROLLER_GET_NEXT_BROKER_ID: H(
        'GetNextBrokerIdRequestHeader', R.CLUSTER, (A.GET,), (F('clusterName', R.CLUSTER),)),
    C.CONTROLLER_APPLY_BROKER_ID: H(
        'ApplyBrokerIdRequestHeader', R.CLUSTER, (A.UPDATE,), (F('clusterName', R.CLUSTER),)),
    C.AUTH_CREATE_USER: H('CreateUserRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.AUTH_UPDATE_USER: H('UpdateUserRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.AUTH_DELETE_USER: H('DeleteUserRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.AUTH_GET_USER: H('GetUserRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.AUTH_LIST_USER: H('ListUsersRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.AUTH_CREATE_ACL: H('CreateAclRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.AUTH_UPDATE_ACL: H('UpdateAclRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.AUTH_DELETE_ACL: H('DeleteAclRequestHeader', R.CLUSTER, (A.UPDATE,), ()),
    C.AUTH_GET_ACL: H('GetAclRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.AUTH_LIST_ACL: H('ListAclsRequestHeader', R.CLUSTER, (A.GET,), ()),
    C.POP_MESSAGE: H('PopMessageRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.ACK_MESSAGE: H('AckMessageRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.PEEK_MESSAGE: H('PeekMessageRequestHeader', None, (A.SUB,), (F('topic', R.TOPIC), F('consumerGroup', R.GROUP))),
    C.CHANGE_MESSAGE_INVISIBLETIME: H(
        'ChangeInvisibleTimeRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.NOTIFICATION: H('NotificationRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.POLLING_INFO: H('PollingInfoRequestHeader', None, (A.GET,), (F('consumerGroup', R.GROUP), F('topic', R.TOPIC))),
    C.NOTIFY_UNSUBSCRIBE_LITE: H('NotifyUnsubscribeLiteRequestHeader', None, (A.SUB,), (F('consumerGroup', R.GROUP),)),
}

Needs = Iterator[tuple[Resource, tuple[Action, ...]]]


def _topic_or_retry_group(topic: str | None, topic_actions: tuple[Action, ...],
                          group_actions: tuple[Action, ...]) -> Needs:
    if topic is not None and is_retry_topic(topic):
        yield Resource.of_group(topic), group_actions
    else:
        yield Resource.of_topic(topic), topic_actions


def _route(f: dict[str, str], _: RemotingCommand) -> Needs:
    return _topic_or_retry_group(f.get("topic"), (A.PUB, A.SUB, A.GET), (A.SUB, A.GET))


def _send(f: dict[str, str], _: RemotingCommand) -> Needs:
    return _topic_or_retry_group(f.get("topic"), (A.PUB,), (A.SUB,))


def _send_v2(f: dict[str, str], _: RemotingCommand) -> Needs:
    return _topic_or_retry_group(f.get("b"), (A.PUB,), (A.SUB,))


def _topic_pub(f: dict[str, str], _: RemotingCommand) -> Needs:
    yield Resource.of_topic(f.get("topic")), (A.PUB,)


def _end_transaction(f: dict[str, str], _: RemotingCommand) -> Needs:
    """A 4.9 client's header has no topic: nothing is checked then."""
    if (f.get("topic") or "").strip():
        yield Resource.of_topic(f["topic"]), (A.PUB,)


def _send_back(f: dict[str, str], _: RemotingCommand) -> Needs:
    yield Resource.of_group(f.get("group")), (A.SUB,)


def _topic_then_group(actions: tuple[Action, ...]) -> Callable[[dict[str, str], RemotingCommand], Needs]:
    """PULL_MESSAGE, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET: the topic (unless a retry topic), the group."""
    def needs(f: dict[str, str], _: RemotingCommand) -> Needs:
        topic = f.get("topic")
        if topic is None or not is_retry_topic(topic):
            yield Resource.of_topic(topic), actions
        yield Resource.of_group(f.get("consumerGroup")), actions
    return needs


def _query_message(f: dict[str, str], _: RemotingCommand) -> Needs:
    yield Resource.of_topic(f.get("topic")), (A.SUB, A.GET)


def _heartbeat(_: dict[str, str], request: RemotingCommand) -> Needs:
    heartbeat = HeartbeatData.from_json(decode_json(bytes(request.body).decode("utf-8")))
    for consumer in heartbeat.consumers:
        yield Resource.of_group(consumer.group_name), (A.SUB,)
        for subscription in consumer.subscriptions:
            if not is_retry_topic(subscription.topic):
                yield Resource.of_topic(subscription.topic), (A.SUB,)


def _unregister(f: dict[str, str], _: RemotingCommand) -> Needs:
    if (f.get("consumerGroup") or "").strip():
        yield Resource.of_group(f["consumerGroup"]), (A.SUB,)


def _consumer_list(f: dict[str, str], _: RemotingCommand) -> Needs:
    yield Resource.of_group(f.get("consumerGroup")), (A.SUB, A.GET)


def _lock_batch(_: dict[str, str], request: RemotingCommand) -> Needs:
    body = decode_json(bytes(request.body).decode("utf-8"))
    yield Resource.of_group(body.get("consumerGroup")), (A.SUB,)
    for mq in body.get("mqSet") or ():
        if not is_retry_topic(mq["topic"]):
            yield Resource.of_topic(mq["topic"]), (A.SUB,)


EXPLICIT: dict[int, Callable[[dict[str, str], RemotingCommand], Needs]] = {
    C.GET_ROUTEINFO_BY_TOPIC: _route,
    C.SEND_MESSAGE: _send,
    C.SEND_MESSAGE_V2: _send_v2,
    C.SEND_BATCH_MESSAGE: _send_v2,
    C.RECALL_MESSAGE: _topic_pub,
    C.END_TRANSACTION: _end_transaction,
    C.CONSUMER_SEND_MSG_BACK: _send_back,
    C.PULL_MESSAGE: _topic_then_group((A.SUB,)),
    C.QUERY_MESSAGE: _query_message,
    C.HEART_BEAT: _heartbeat,
    C.UNREGISTER_CLIENT: _unregister,
    C.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
    C.QUERY_CONSUMER_OFFSET: _topic_then_group((A.SUB, A.GET)),
    C.UPDATE_CONSUMER_OFFSET: _topic_then_group((A.SUB, A.UPDATE)),
    C.LOCK_BATCH_MQ: _lock_batch,
    C.UNLOCK_BATCH_MQ: _lock_batch,
}


def _annotated(rule: HeaderRule, f: dict[str, str], cluster_name: str) -> Needs:
    """``buildContextByAnnotation``: a context per set resource field (a retry topic stands for its group), else
    the class-level cluster."""
    found = False
    for field in rule.fields:
        value = f.get(field.name, field.default)
        if value is None:
            continue
        values = [v for v in _split(value, field.splitter)] if field.splitter else [value]
        for item in values:
            found = True
            if field.resource_type is R.TOPIC and is_retry_topic(item):
                yield Resource.of_group(item), rule.actions
            else:
                yield Resource(field.resource_type, item, ResourcePattern.LITERAL), rule.actions
    if not found and rule.class_resource is R.CLUSTER:
        yield Resource.of_cluster(cluster_name), rule.actions


def _split(value: str, separators: str) -> list[str]:
    """Commons-lang ``StringUtils.split``: any of ``separators`` splits, empty pieces are dropped."""
    pieces, current = [], ""
    for char in value:
        if char in separators:
            if current:
                pieces.append(current)
            current = ""
        else:
            current += char
    return [*pieces, current] if current else pieces


def contexts(request: RemotingCommand, source_ip: str, cluster_name: str) -> list[AuthorizationContext]:
    """What ``request`` from ``source_ip`` needs, in Apache's order; a request without ext fields needs nothing.
    A body or header that cannot be read is refused (``parse authorization context error.``)."""
    fields = dict(request.ext_fields)
    if not fields:
        return []
    username = fields.get(ACCESS_KEY)
    explicit = EXPLICIT.get(request.code)
    rule = ANNOTATED.get(request.code)
    try:
        if explicit is not None:
            needs = list(explicit(fields, request))
        elif rule is not None:
            needs = list(_annotated(rule, fields, cluster_name))
        else:
            needs = []
    except Exception as err:  # any unreadable body: Apache wraps every Throwable the same way
        raise AuthorizationError("parse authorization context error.") from err
    return [AuthorizationContext(username, resource, actions, source_ip, request.code) for resource, actions in needs]
