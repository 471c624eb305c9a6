"""END_TRANSACTION: Java's EndTransactionProcessor. A producer (after its local transaction, or answering
CHECK_TRANSACTION_STATE) commits or rolls back a half message; the broker finds the half record by its commit log
offset, checks it is the one the producer means, and lets TransactionalMessageService end it.

The producer sends it oneway, so the response matters only to callers that invoke it (tests, tools); it carries
Java's codes and remarks. A pending state (TRANSACTION_NOT_TYPE) gets no response at all, as in Java.

Differences: the commit log offset must point at a half message (Java would "commit" any record whose producer
group and offsets match), and a transaction ended before is answered SUCCESS without writing again (Java would
commit it twice); one the check discarded is still ended, as in Java.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from broker.common.record import MessageRecord
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import EndTransactionRequestHeader, HeaderError
from broker.server.processors.common import Handler, bad_header_response
from broker.server.processors.put_status import end_put_failure
from broker.server.processors.request_headers import request_header
from broker.server.transaction import bridge
from broker.server.transaction.state import EndStatus
from broker.store.config import BrokerRole

if TYPE_CHECKING:
    from broker.server.broker_metrics import BrokerMetricsManager
    from broker.server.config import BrokerConfig
    from broker.server.transaction.service import TransactionalMessageService
    from broker.store.config import MessageStoreConfig

log = logging.getLogger(__name__)

END_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)
NOT_FOUND_REMARK = "Find prepared transaction message failed"


def parse_end_transaction_header(request: RemotingCommand) -> EndTransactionRequestHeader:
    """decodeCommandCustomHeader with EndTransactionRequestHeader.checkFields."""
    header = request_header(request, EndTransactionRequestHeader)
    if header.commit_or_rollback not in END_TYPES:
        raise HeaderError("commitOrRollback field wrong")
    return header


def check_prepare_message(half: MessageRecord, header: EndTransactionRequestHeader) -> str | None:
    """EndTransactionProcessor.checkPrepareMessage: the remark of a mismatch, None when the record is the one."""
    if half.properties.get(PROPERTY_PRODUCER_GROUP) != header.producer_group:
        return "The producer group wrong"
    if half.queue_offset != header.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != header.commit_log_offset:
        return "The commit log offset wrong"
    return None


class EndTransactionProcessor:
    """The END_TRANSACTION handler of one broker.

    Examples:
        >>> processor = EndTransactionProcessor(broker_config=bc, store_config=sc,
        ...                                     transactional_message_service=transactions)  # doctest: +SKIP
        >>> server.register_processor(RequestCode.END_TRANSACTION, processor.process)  # doctest: +SKIP
    """

    def __init__(self, *, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                 transactional_message_service: TransactionalMessageService,
                 metrics: BrokerMetricsManager | None = None) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.transactional_message_service = transactional_message_service
        self.metrics = metrics  # rocketmq_commit_messages_total and its kin, when metricsExporterType=PROM

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.END_TRANSACTION: self.process}

    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            header = parse_end_transaction_header(request)
        except HeaderError as err:
            return bad_header_response(request, err)
        if self.broker_config.broker_role is BrokerRole.SLAVE:
            log.warning("Message store is slave mode, so end transaction is forbidden. ")
            return create_response(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        if header.commit_or_rollback == TRANSACTION_NOT_TYPE:
            log.warning("producer %s end transaction %s: still pending (from check: %s) remark: %s",
                        conn.remote_address, header.msg_id, header.from_transaction_check, request.remark)
            return None
        if header.commit_or_rollback == TRANSACTION_ROLLBACK_TYPE or header.from_transaction_check:
            log.warning("producer %s %s transaction %s (from check: %s) remark: %s", conn.remote_address,
                        "rolls back" if header.commit_or_rollback == TRANSACTION_ROLLBACK_TYPE else "commits",
                        header.msg_id, header.from_transaction_check, request.remark)
        half = self._half_message(header.commit_log_offset)
        if half is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, NOT_FOUND_REMARK)
        if self.reject_commit_or_rollback(header, half):
            log.warning("end transaction refused: %s is past its check immunity time, commitLogOffset=%d; the check "
                        "will ask", header.msg_id, header.commit_log_offset)
            return create_response(request, ResponseCode.ILLEGAL_OPERATION)
        remark = check_prepare_message(half, header)
        if remark is not None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, remark)
        commit = header.commit_or_rollback == TRANSACTION_COMMIT_TYPE
        outcome = await self.transactional_message_service.end(half, commit=commit,
                                                               prepared_offset=header.commit_log_offset)
        if outcome.status is EndStatus.ENDED and self.metrics is not None:
            self.metrics.record_end(half.properties.get(PROPERTY_REAL_TOPIC) or half.topic, commit, 1,
                                    half.born_timestamp)
        if outcome.status is EndStatus.ALREADY_ENDED:
            log.info("transaction %s at %d was ended before", header.msg_id, header.commit_log_offset)
        if outcome.status is EndStatus.PUT_FAILED and outcome.put is not None:
            return create_response(request, *end_put_failure(outcome.put.status, self.store_config.max_message_size))
        return create_response(request, ResponseCode.SUCCESS)

    def _half_message(self, commit_log_offset: int) -> MessageRecord | None:
        """The half record at ``commit_log_offset`` (getHalfMessageByOffset), None when there is none."""
        if commit_log_offset < 0:
            return None
        record = self.transactional_message_service.half_record(commit_log_offset)
        if record is None or record.topic != bridge.HALF_TOPIC:
            return None
        return record

    def reject_commit_or_rollback(self, header: EndTransactionRequestHeader, half: MessageRecord) -> bool:
        """A producer's own end (not a check's answer) past the half message's check immunity: the check decides."""
        if header.from_transaction_check:
            return False
        return bridge.past_end_immunity(half, self.broker_config.transaction_time_out, time.time_ns() // 1_000_000)

