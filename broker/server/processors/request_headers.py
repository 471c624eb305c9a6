"""Which custom headers a broker parses from each request code it serves, and with which wire names.

Rule 1: the one table of request code -> header classes. The processors parse their headers through
``request_header``, which reads it, so no handler parses a header its code does not list here; the
pre-authentication fuzz (bench/fuzz_headers.py) reads the same table to build and parse every code's headers.
Codes whose handlers parse no custom header (HEART_BEAT, GET_BROKER_CONFIG, ...) are not in it.
"""

from __future__ import annotations

from typing import TypeVar

from broker.common.errors import LocalProtocolError
from broker.remoting import headers as h
from broker.remoting.codes import AclV1RequestCode, RequestCode, RmqRequestCode
from broker.remoting.command import RemotingCommand
from broker.remoting.headers.base import Header

C = RequestCode
HeaderParse = tuple[type[Header], dict[str, str] | None]  # a header class and its wire-name override
H = TypeVar("H", bound=Header)

REQUEST_HEADERS: dict[int, tuple[HeaderParse, ...]] = {
    C.SEND_MESSAGE: ((h.SendMessageRequestHeader, None),),
    C.SEND_MESSAGE_V2: ((h.SendMessageRequestHeader, h.SendMessageRequestHeader.V2_WIRE),),
    C.SEND_BATCH_MESSAGE: ((h.SendMessageRequestHeader, h.SendMessageRequestHeader.V2_WIRE),),
    C.PULL_MESSAGE: ((h.PullMessageRequestHeader, None),),
    C.LITE_PULL_MESSAGE: ((h.PullMessageRequestHeader, None),),
    C.QUERY_MESSAGE: ((h.QueryMessageRequestHeader, None), (h.UniqueKeyQueryHeader, None)),
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


def request_header(request: RemotingCommand, cls: type[H]) -> H:
    """``cls`` parsed from ``request``'s ext fields with the wire names its code uses (SEND_MESSAGE_V2's and
    SEND_BATCH_MESSAGE's one-letter names); a HeaderError when they do not parse."""
    for declared, wire in REQUEST_HEADERS.get(request.code, ()):
        if declared is cls:
            return cls.from_ext(request.ext_fields, wire)
    raise LocalProtocolError(f"request code {request.code} parses no {cls.__name__} (REQUEST_HEADERS)")
