"""Which header class the broker parses for each request code a client can send, and plausible ext fields for it.

The processors each parse their own header (``Header.from_ext`` at the top of each handler); the fuzz campaign needs
the same choice for every code at once, so it is listed here from those handlers. Codes with no header class of
their own (GET_BROKER_CONFIG, GET_ALL_TOPIC_CONFIG, ...) get the resource fields ACL 2.0 reads from them.
"""

from __future__ import annotations

import dataclasses
import typing

from broker.auth.actions import ANNOTATED
from broker.common.properties import to_camel
from broker.remoting import headers as h
from broker.remoting.codes import AclV1RequestCode, RequestCode, RmqRequestCode
from broker.remoting.headers.base import Header

C = RequestCode
Parse = tuple[type[Header], dict[str, str] | None]  # a header class and its wire-name override

HEADER_CLASSES: dict[int, tuple[Parse, ...]] = {
    C.SEND_MESSAGE: ((h.SendMessageRequestHeader, None),),
    C.SEND_MESSAGE_V2: ((h.SendMessageRequestHeader, h.SendMessageRequestHeader.V2_WIRE),),
    C.SEND_BATCH_MESSAGE: ((h.SendMessageRequestHeader, h.SendMessageRequestHeader.V2_WIRE),),
    C.PULL_MESSAGE: ((h.PullMessageRequestHeader, None),),
    C.QUERY_MESSAGE: ((h.QueryMessageRequestHeader, None), (h.UniqueKeyQueryHeader, None),
                      (h.QueryMessageIndexHeader, None)),
    C.VIEW_MESSAGE_BY_ID: ((h.ViewMessageRequestHeader, None),),
    C.END_TRANSACTION: ((h.EndTransactionRequestHeader, None),),
    RmqRequestCode.END_TRANSACTION_BATCH: ((h.EndTransactionBatchRequestHeader, None),),
    C.CONSUMER_SEND_MSG_BACK: ((h.ConsumerSendMsgBackRequestHeader, None),),
    C.QUERY_CONSUMER_OFFSET: ((h.QueryConsumerOffsetRequestHeader, None),),
    C.UPDATE_CONSUMER_OFFSET: ((h.UpdateConsumerOffsetRequestHeader, None),),
    C.GET_MAX_OFFSET: ((h.TopicQueueHeader, None),),
    C.GET_MIN_OFFSET: ((h.TopicQueueHeader, None),),
    C.GET_EARLIEST_MSG_STORETIME: ((h.TopicQueueHeader, None),),
    C.SEARCH_OFFSET_BY_TIMESTAMP: ((h.SearchOffsetRequestHeader, None),),
    C.QUERY_CONSUME_QUEUE: ((h.QueryConsumeQueueRequestHeader, None),),
    C.VIEW_BROKER_STATS_DATA: ((h.ViewBrokerStatsDataRequestHeader, None),),
    C.UNREGISTER_CLIENT: ((h.UnregisterClientRequestHeader, None),),
    C.GET_CONSUMER_LIST_BY_GROUP: ((h.ConsumerGroupHeader, None),),
    C.GET_CONSUMER_CONNECTION_LIST: ((h.ConsumerGroupHeader, None),),
    C.GET_PRODUCER_CONNECTION_LIST: ((h.GetProducerConnectionListRequestHeader, None),),
    C.GET_CONSUMER_RUNNING_INFO: ((h.GetConsumerRunningInfoRequestHeader, None),),
    C.CONSUME_MESSAGE_DIRECTLY: ((h.ConsumeMessageDirectlyResultRequestHeader, None),),
    C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: ((h.GetConsumerStatusRequestHeader, None),),
    C.INVOKE_BROKER_TO_RESET_OFFSET: ((h.ResetOffsetRequestHeader, None),),
    C.CLONE_GROUP_OFFSET: ((h.CloneGroupOffsetRequestHeader, None),),
    C.QUERY_CORRECTION_OFFSET: ((h.QueryCorrectionOffsetHeader, None),),
    C.GET_CONSUME_STATS: ((h.GetConsumeStatsRequestHeader, None), (h.ConsumeStatsTopicListHeader, None)),
    C.GET_BROKER_CONSUME_STATS: ((h.GetConsumeStatsInBrokerHeader, None),),
    C.QUERY_CONSUME_TIME_SPAN: ((h.QueryConsumeTimeSpanRequestHeader, None),),
    C.QUERY_TOPIC_CONSUME_BY_WHO: ((h.TopicHeader, None),),
    C.QUERY_TOPICS_BY_CONSUMER: ((h.GroupHeader, None),),
    C.QUERY_SUBSCRIPTION_BY_CONSUMER: ((h.QuerySubscriptionByConsumerRequestHeader, None),),
    C.UPDATE_AND_CREATE_TOPIC: ((h.CreateTopicRequestHeader, None),),
    C.DELETE_TOPIC_IN_BROKER: ((h.TopicHeader, None),),
    C.GET_TOPIC_CONFIG: ((h.TopicHeader, None),),
    C.GET_TOPIC_STATS_INFO: ((h.TopicHeader, None),),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: ((h.GroupHeader, None),),
    C.DELETE_SUBSCRIPTIONGROUP: ((h.DeleteSubscriptionGroupRequestHeader, None),),
    C.UPDATE_AND_GET_GROUP_FORBIDDEN: ((h.UpdateGroupForbiddenRequestHeader, None),),
    C.AUTH_CREATE_USER: ((h.UserRequestHeader, None),),
    C.AUTH_UPDATE_USER: ((h.UserRequestHeader, None),),
    C.AUTH_DELETE_USER: ((h.UserRequestHeader, None),),
    C.AUTH_GET_USER: ((h.UserRequestHeader, None),),
    C.AUTH_LIST_USER: ((h.ListUsersRequestHeader, None),),
    C.AUTH_CREATE_ACL: ((h.AclRequestHeader, None),),
    C.AUTH_UPDATE_ACL: ((h.AclRequestHeader, None),),
    C.AUTH_DELETE_ACL: ((h.DeleteAclRequestHeader, None),),
    C.AUTH_GET_ACL: ((h.AclRequestHeader, None),),
    C.AUTH_LIST_ACL: ((h.ListAclsRequestHeader, None),),
    AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ((h.CreateAccessConfigRequestHeader, None),),
    AclV1RequestCode.DELETE_ACL_CONFIG: ((h.DeleteAccessConfigRequestHeader, None),),
    AclV1RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ((h.UpdateGlobalWhiteAddrsConfigRequestHeader, None),),
}

_SAMPLE_TEXT = {"topic": "TopicA", "b": "TopicA", "consumerGroup": "G1", "group": "G1", "producerGroup": "PG",
                "a": "PG", "c": "TBW102", "clusterName": "DefaultCluster", "username": "alice",
                "subject": "User:alice", "accessKey": "RocketMQ", "globalWhiteAddrs": "10.10.*"}


def _sample(name: str, kind: type) -> str:
    if kind is bool:
        return "false"
    if kind is int:
        return "4" if name in ("d", "defaultTopicQueueNums", "maxMsgNums") else "0"
    return _SAMPLE_TEXT.get(name, f"{name}-value")


def sample_fields(code: int) -> dict[str, str]:
    """Ext fields a client sends with ``code``: every field of its header classes (required and optional alike),
    else the resource fields ACL 2.0 reads for it."""
    fields: dict[str, str] = {}
    for cls, wire in HEADER_CLASSES.get(code, ()):
        hints = typing.get_type_hints(cls)
        names = {**cls.WIRE, **(wire or {})}
        for f in dataclasses.fields(cls):
            kinds = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
            wire_name = names.get(f.name) or to_camel(f.name)
            fields[wire_name] = _sample(wire_name, kinds[0])
    rule = ANNOTATED.get(code)
    for resource_field in rule.fields if rule else ():
        fields.setdefault(resource_field.name, _sample(resource_field.name, str))
    return fields
