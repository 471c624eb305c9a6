"""A put's status as the answer Java's broker gives for it: one table for sends, one for transaction ends.

Rule 1: every PutMessageStatus -> (response code, remark) mapping lives here. Sends answer with
SendMessageProcessor.handlePutMessageResult's codes and remarks; END_TRANSACTION and END_TRANSACTION_BATCH with
EndTransactionProcessor.sendFinalMessage's, which differ in wording and treat a slave's timeout as success.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.remoting.codes import ResponseCode
from broker.store.flush import disk_usage_percent
from broker.store.results import PutMessageStatus

if TYPE_CHECKING:
    from broker.store.config import MessageStoreConfig

IN_SYNC_REPLICAS_NOT_ENOUGH = "in-sync replicas not enough"  # both tables: a DLedger put no quorum acknowledged


def send_put_status(status: PutMessageStatus, config: MessageStoreConfig) -> tuple[int, str | None]:
    """handlePutMessageResult's code and remark for a send's put (a stored message's too: PUT_OK, the timeouts)."""
    match status:
        case PutMessageStatus.PUT_OK:
            return ResponseCode.SUCCESS, None
        case PutMessageStatus.FLUSH_DISK_TIMEOUT:
            return ResponseCode.FLUSH_DISK_TIMEOUT, None
        case PutMessageStatus.FLUSH_SLAVE_TIMEOUT:
            return ResponseCode.FLUSH_SLAVE_TIMEOUT, None
        case PutMessageStatus.SLAVE_NOT_AVAILABLE:
            return ResponseCode.SLAVE_NOT_AVAILABLE, None
        case PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
        case PutMessageStatus.MESSAGE_ILLEGAL | PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return ResponseCode.MESSAGE_ILLEGAL, illegal_send_remark(config)
        case PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return ResponseCode.SERVICE_NOT_AVAILABLE, (
                "service not available now. It may be caused by one of the following reasons: the broker's disk "
                f"is full [{disk_util(config)}], messages are put to the slave, message store has been shut "
                "down, etc.")
        case PutMessageStatus.OS_PAGE_CACHE_BUSY:
            return ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        case PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH:
            return ResponseCode.SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH
        case PutMessageStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


def illegal_send_remark(config: MessageStoreConfig) -> str:
    return ("the message is illegal, maybe msg body or properties length not matched. msg body length limit "
            f"{config.max_message_size}B, msg properties length limit 32KB.")


def disk_util(config: MessageStoreConfig) -> str:
    """SendMessageProcessor.diskUtil: the used fraction of the disks of CommitLog, ConsumeQueue and index."""

    def ratio(path: str) -> float:
        try:
            return disk_usage_percent(path) / 100
        except OSError:
            return -1.0

    return (f"CL: {ratio(config.commit_log_dir):5.2f} CQ: {ratio(config.consume_queue_dir):5.2f} "
            f"INDEX: {ratio(config.index_dir):5.2f}")


def end_put_failure(status: PutMessageStatus, max_message_size: int) -> tuple[int, str | None]:
    """EndTransactionProcessor.sendFinalMessage's code and remark for a put of ends that did not store (END_TRANSACTION
    and END_TRANSACTION_BATCH)."""
    match status:
        case PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return ResponseCode.SYSTEM_ERROR, "Create mapped file failed."
        case PutMessageStatus.MESSAGE_ILLEGAL | PutMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return ResponseCode.MESSAGE_ILLEGAL, (
                "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
                f"{max_message_size}B, msg properties length limit 32KB.")
        case PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."
        case PutMessageStatus.OS_PAGE_CACHE_BUSY:
            return ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"
        case PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH:
            return ResponseCode.SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH
        case PutMessageStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
        case PutMessageStatus.FLUSH_SLAVE_TIMEOUT | PutMessageStatus.SLAVE_NOT_AVAILABLE:
            return ResponseCode.SUCCESS, None
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"
