"""QUERY_MESSAGE (by key, through the index) and VIEW_MESSAGE_BY_ID (by physical offset): Java's
QueryMessageProcessor, what ``mqadmin queryMsgByKey``, ``queryMsgByUniqueKey`` and ``queryMsgById`` ask.

Examples:
    >>> processor = QueryMessageProcessor(store=store)  # doctest: +SKIP
    >>> for code, handler in processor.handlers().items():  # doctest: +SKIP
    ...     server.register_processor(code, handler)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.common import validation
from broker.common.errors import CorruptRecord
from broker.common.message import PROPERTY_REAL_TOPIC
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    UniqueKeyQueryHeader,
    ViewMessageRequestHeader,
)
from broker.server.processors.common import Handler, guarded, success
from broker.server.processors.request_headers import request_header

if TYPE_CHECKING:
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum: a query by unique key returns at most this many
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"  # MessageConst.PROPERTY_INNER_MULTI_DISPATCH, "," separated LMQs
# Topics whose messages carry their logical topic in REAL_TOPIC (QueryMessageProcessor.REAL_TOPIC_STORAGE_TOPICS)
REAL_TOPIC_STORAGE_TOPICS = frozenset({validation.RMQ_SYS_SCHEDULE_TOPIC, validation.TIMER_TOPIC,
                                       validation.RMQ_SYS_TRANS_HALF_TOPIC,
                                       validation.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC})


class QueryMessageProcessor:
    """Messages found by key or by offset in one broker's store."""

    def __init__(self, *, store: MessageStore) -> None:
        self.store = store

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.QUERY_MESSAGE: guarded(self.query_message),
                RequestCode.VIEW_MESSAGE_BY_ID: guarded(self.view_message_by_id)}

    async def query_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request_header(request, QueryMessageRequestHeader)
        unique = request_header(request, UniqueKeyQueryHeader).unique_key_query
        max_num = DEFAULT_QUERY_MAX_NUM if unique else h.max_num
        result = await asyncio.to_thread(self.store.query_message, h.topic, h.key, max_num, h.begin_timestamp,
                                         h.end_timestamp)
        ext = QueryMessageResponseHeader(result.index_last_update_timestamp,
                                         result.index_last_update_phyoffset).to_ext()
        if result.buffers:
            return success(request, result.body(), ext)
        return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                               "can not find message, maybe time range not correct", ext_fields=ext)

    async def view_message_by_id(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The record at a physical offset (the offsetMsgId's); with ``topic``, only a message of that topic."""
        h = request_header(request, ViewMessageRequestHeader)
        try:
            record = self.store.lookup_message(h.offset) if h.offset >= 0 else None
        except CorruptRecord:
            record = None
        data = self.store.select_one_message(h.offset, record.store_size) if record is not None else None
        if record is None or data is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"can not find message by the offset, {h.offset}")
        if h.topic and h.topic.strip() and not _matches_request_topic(h.topic, record.topic, record.properties):
            return create_response(request, ResponseCode.NO_PERMISSION, "The topic does not match the message")
        return success(request, data)


def _matches_request_topic(requested: str, topic: str, properties: Mapping[str, str]) -> bool:
    """QueryMessageProcessor.matchesRequestTopic: the message's logical topic, or an LMQ it was dispatched to."""
    logical = properties.get(PROPERTY_REAL_TOPIC) if topic in REAL_TOPIC_STORAGE_TOPICS else topic
    if logical == requested:
        return True
    allows_lmq = bool(logical) and not (validation.is_retry_topic(logical) or validation.is_dlq_topic(logical)
                                         or logical.startswith(validation.SYSTEM_TOPIC_PREFIX)
                                         or logical == validation.RMQ_SYS_SCHEDULE_TOPIC)
    if requested.startswith(validation.LMQ_PREFIX) and allows_lmq:
        return requested in properties.get(INNER_MULTI_DISPATCH, "").split(",")
    return False
