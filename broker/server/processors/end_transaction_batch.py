"""END_TRANSACTION_BATCH (rmq's extension, RmqRequestCode): one commit or rollback for many half messages of one
producer group and one real topic, e.g. every half message a Spark task of the exactly-once sink sent.

The whole request is validated before anything is stored, and refused whole (SYSTEM_ERROR, or ILLEGAL_OPERATION for
a handle past its check immunity, as a single END_TRANSACTION is) with a remark naming the first bad handle: its
index, commitLogOffset and msgId. What a handle must name: a half message (RMQ_SYS_TRANS_HALF_TOPIC) at its commit log
offset and half queue offset, with its UNIQ_KEY, of the header's producer group and bound for the header's topic,
still open, named once in the request. Then TransactionalMessageService ends them all as it ends single ones: the
committed messages and the op records (Apache's op layout and sizes) share puts of up to END_BATCH_MAX ends, so each
put keeps its messages and op records together through a crash. A check that ends a handle between the validation
and the write is counted ``alreadyEnded``, not a failure.

With ``rmqTransactionBatchEnable=false`` the code is answered as an unknown one (REQUEST_CODE_NOT_SUPPORTED, Apache's
answer); a slave answers SLAVE_NOT_AVAILABLE. The body layout is ``broker.remoting.transaction_batch``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.common.errors import MalformedBody
from broker.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from broker.common.record import MessageRecord
from broker.remoting.codes import ResponseCode, RmqRequestCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.exchange import not_supported_response
from broker.remoting.headers import EndTransactionBatchRequestHeader, EndTransactionBatchResponseHeader, HeaderError
from broker.remoting.transaction_batch import TransactionHandle, decode_end_batch_columns
from broker.server.processors.common import Handler, bad_header_response, is_slave
from broker.server.processors.put_status import end_put_failure
from broker.server.processors.request_headers import request_header
from broker.server.transaction import bridge
from broker.server.transaction.state import EndStatus, Ready

if TYPE_CHECKING:
    from broker.server.broker_metrics import BrokerMetricsManager
    from broker.server.config import BrokerConfig
    from broker.server.transaction.service import TransactionalMessageService
    from broker.store.config import MessageStoreConfig

log = logging.getLogger(__name__)

END_TYPES = {TRANSACTION_COMMIT_TYPE: "commit", TRANSACTION_ROLLBACK_TYPE: "rollback"}


class Refusal(Exception):
    """Internal: the request is refused whole with this code and remark (never leaves this module)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def _named(index: int, handle: TransactionHandle) -> str:
    return f"handle {index} (commitLogOffset={handle.commit_log_offset}, msgId={handle.msg_id})"


def _first_repeat(offsets: tuple[int, ...], ids: tuple[str, ...]) -> tuple[int, int] | None:
    """(index, the earlier index) of the first handle naming a commit log offset or msgId named before."""
    seen: dict[int | str, int] = {}  # commit log offsets and msgIds named so far
    for index, keys in enumerate(zip(offsets, ids, strict=True)):
        for key in keys:
            if key in seen:
                return index, seen[key]
            seen[key] = index
    return None


def _first_late(halves: list[Ready | MessageRecord | None], timeout: int, now: int) -> int | None:
    """The index of the first ready half message past its check immunity (bridge.past_immunity; each distinct
    CHECK_IMMUNITY_TIME_IN_SECONDS read once: the sink gives every row of a job the same)."""
    limits: dict[str, int] = {}
    for index, found in enumerate(halves):
        if found is not None and found[0].immunity:
            entry = found[0]
            limit = limits.get(entry.immunity)
            if limit is None:
                limit = limits[entry.immunity] = bridge.end_immunity_ms(entry.immunity, timeout)
            if now - entry.born_timestamp > limit:
                return index
    return None


class EndTransactionBatchProcessor:
    """The END_TRANSACTION_BATCH handler of one broker.

    Examples:
        >>> processor = EndTransactionBatchProcessor(broker_config=bc, store_config=sc,
        ...                                          transactional_message_service=transactions)  # doctest: +SKIP
        >>> server.register_processor(RmqRequestCode.END_TRANSACTION_BATCH, processor.process)  # doctest: +SKIP
    """

    def __init__(self, *, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                 transactional_message_service: TransactionalMessageService,
                 metrics: BrokerMetricsManager | None = None) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.transactional_message_service = transactional_message_service
        self.metrics = metrics  # rocketmq_commit_messages_total and its kin, when metricsExporterType=PROM

    def handlers(self) -> dict[int, Handler]:
        return {RmqRequestCode.END_TRANSACTION_BATCH: self.process}

    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        if not self.broker_config.rmq_transaction_batch_enable:  # read at each request: updateBrokerConfig
            return not_supported_response(request)
        if is_slave(self.broker_config):
            log.warning("Message store is slave mode, so end transaction is forbidden. ")
            return create_response(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        try:
            header = request_header(request, EndTransactionBatchRequestHeader)
        except HeaderError as err:
            return bad_header_response(request, err)
        try:
            halves = self._validate(header, request.body or b"")
        except Refusal as refusal:
            log.warning("END_TRANSACTION_BATCH of group %s from %s refused: %s", header.producer_group,
                        conn.remote_address, refusal.remark)
            return create_response(request, refusal.code, refusal.remark)
        return await self._end(request, header, halves)

    # -- validation: everything before anything is stored ------------------------------------------------------------

    def _validate(self, header: EndTransactionBatchRequestHeader, body: bytes) -> list[Ready | MessageRecord]:
        """What every handle names, in order: an open half message of a prepared batch with its committed message
        kept ready (most, while the broker runs), else the half record read; Refusal naming the first thing
        wrong. The ready ones are found in one pass; only the others, and those with a check immunity to weigh,
        are looked at one by one."""
        if header.commit_or_rollback not in END_TYPES:
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"commitOrRollback {header.commit_or_rollback} is neither "
                          f"{TRANSACTION_COMMIT_TYPE} (commit) nor {TRANSACTION_ROLLBACK_TYPE} (rollback)")
        if header.from_transaction_check:
            raise Refusal(ResponseCode.SYSTEM_ERROR, "END_TRANSACTION_BATCH is a producer's own end: "
                          "fromTransactionCheck must be false (answer checks with END_TRANSACTION)")
        try:
            offsets, queue_offsets, ids = decode_end_batch_columns(body)
        except MalformedBody as err:
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"malformed END_TRANSACTION_BATCH body: {err.reason}") from err

        def handle(index: int) -> TransactionHandle:  # made only for what is looked at one by one
            return TransactionHandle(offsets[index], queue_offsets[index], ids[index])

        repeat = _first_repeat(offsets, ids) if len(set(offsets)) + len(set(ids)) != 2 * len(ids) else None
        halves: list[Ready | MessageRecord | None] = self.transactional_message_service.ready_ends(
            offsets, queue_offsets, ids, header.producer_group, header.topic)
        timeout, now = self.broker_config.transaction_time_out, time.time_ns() // 1_000_000
        late = _first_late(halves, timeout, now)
        stop = min(len(halves) if repeat is None else repeat[0], len(halves) if late is None else late)
        for index in [i for i, found in enumerate(halves[:stop]) if found is None]:
            half = halves[index] = self._half(index, handle(index), header)
            if bridge.past_end_immunity(half, timeout, now):
                late = index
                break
        if repeat is not None and (late is None or repeat[0] <= late):
            index, earlier = repeat
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"{_named(index, handle(index))} repeats handle {earlier}")
        if late is not None:
            raise Refusal(ResponseCode.ILLEGAL_OPERATION, f"{_named(late, handle(late))} is past its check "
                          "immunity time: the broker's check decides it now")
        return halves  # type: ignore[return-value]  # every None was replaced by its half record

    def _half(self, index: int, handle: TransactionHandle, header: EndTransactionBatchRequestHeader) -> MessageRecord:
        """The open half record ``handle`` names, as the header describes it; Refusal otherwise."""
        service = self.transactional_message_service
        half = service.half_record(handle.commit_log_offset) if handle.commit_log_offset >= 0 else None
        if half is None or half.topic != bridge.HALF_TOPIC:
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"{_named(index, handle)}: no half message at this offset")
        props = half.properties
        mismatch = next(((name, theirs, ours) for name, theirs, ours in (
            ("UNIQ_KEY", props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), handle.msg_id),
            ("tranStateTableOffset", half.queue_offset, handle.queue_offset),
            ("producer group", props.get(PROPERTY_PRODUCER_GROUP), header.producer_group),
            ("topic", props.get(PROPERTY_REAL_TOPIC), header.topic),
        ) if theirs != ours), None)
        if mismatch is not None:
            name, theirs, ours = mismatch
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"{_named(index, handle)}: the half message's {name} is "
                          f"{theirs}, the request says {ours}")
        if not service.is_open(half):
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"{_named(index, handle)}: its transaction was ended before "
                          "(committed, rolled back or discarded)")
        return half

    # -- ending ------------------------------------------------------------------------------------------------------

    async def _end(self, request: RemotingCommand, header: EndTransactionBatchRequestHeader,
                   halves: list[Ready | MessageRecord]) -> RemotingCommand:
        """End every half through the service (its puts group them); the answer counts what was ended."""
        commit = header.commit_or_rollback == TRANSACTION_COMMIT_TYPE
        service = self.transactional_message_service
        outcomes = await service.end_many(halves, commit=commit)
        statuses = [outcome.status for outcome in outcomes]  # counted by identity: no Enum.__hash__ per end
        ended, already = statuses.count(EndStatus.ENDED), statuses.count(EndStatus.ALREADY_ENDED)
        if self.metrics is not None:  # counted per request: no latency (a histogram per end would cost per row)
            self.metrics.record_end(header.topic, commit, ended)
        failed = next((o for o in outcomes if o.status is EndStatus.PUT_FAILED and o.put is not None),
                      None) if ended + already < len(statuses) else None
        # at INFO only when not every half was ended now (a single END_TRANSACTION logs nothing when it succeeds
        # either): a line per request, formatted and written on the loop thread, was about a tenth of its samples
        # while a sink's driver ended 100,000 halves
        log.log(logging.INFO if ended != len(statuses) else logging.DEBUG,
                "END_TRANSACTION_BATCH %s of %d half messages of group %s, topic %s: %d ended, %d ended before",
                END_TYPES[header.commit_or_rollback], len(halves), header.producer_group, header.topic, ended, already)
        if failed is not None and failed.put is not None:
            code, remark = end_put_failure(failed.put.status, self.store_config.max_message_size)
            if code != ResponseCode.SUCCESS:
                remark = f"{remark} ({ended} of {len(halves)} were ended; the others stay open for the check)"
                return create_response(request, code, remark)
        return create_response(request, ResponseCode.SUCCESS,
                               ext_fields=EndTransactionBatchResponseHeader(ended, already).to_ext())
