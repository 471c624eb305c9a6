"""Transactional (half) messages, as RocketMQ's broker/transaction package.

A send with TRAN_MSG=true is stored as a half message in RMQ_SYS_TRANS_HALF_TOPIC queue 0 (invisible: nobody
consumes that topic); END_TRANSACTION (``processors/end_transaction.py``) commits it to its real topic or rolls it
back, writing an op record to RMQ_SYS_TRANS_OP_HALF_TOPIC either way; the check service asks a producer of the group
about half messages nobody ended.

Modules: ``bridge`` (how each record is derived: half, committed, op, re-put, discarded, the check request),
``service`` (TransactionalMessageService: open transactions, ending them, the check round), ``rebuild`` (the open
transactions read back from the store at start), ``ends`` (ends gathered into puts: committed messages and op
records), ``state`` (what the service keeps in memory), ``check`` (TransactionalMessageCheckService: the periodic
round), ``batch`` (rmq's prepared batches: which items may be half messages, and their records).
"""

from broker.server.transaction.check import TransactionalMessageCheckService
from broker.server.transaction.service import TransactionalMessageService
from broker.server.transaction.state import EndOutcome, EndStatus, HalfMessage

__all__ = ["EndOutcome", "EndStatus", "HalfMessage", "TransactionalMessageCheckService", "TransactionalMessageService"]
