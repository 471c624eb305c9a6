"""Choosing queues: the producer's MessageQueueSelector for ordered sends, and the consumer group's allocation
strategies that split a topic's queues among the group's clients at rebalance.

Rule 1: the allocation strategies reproduce Java's results exactly (client/consumer/rebalance/*.java, and
common/consistenthash for the ring), because clients of one group may be Java and Python at the same time: each
computes its own share, and the shares must not overlap or leave gaps.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from broker.client.message import Message, MessageQueue
from broker.common.message import java_hash

# -- ordered sends -----------------------------------------------------------------------------------------------------


class MessageQueueSelector(Protocol):
    """producer/MessageQueueSelector: picks the queue of one message from the topic's writable queues."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def java_hash_code(value: Any) -> int:
    """Object.hashCode of the values a sharding key usually is: String, Integer, Long, Boolean."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value  # Integer.hashCode
        value &= 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int) (value ^ (value >>> 32))
        h = (value ^ (value >> 32)) & 0xFFFFFFFF
        return h - 2**32 if h & 0x80000000 else h
    return java_hash(str(value))


class SelectMessageQueueByHash:
    """selector/SelectMessageQueueByHash: ``abs(arg.hashCode() % n)``, so one sharding key keeps one queue (and
    the same queue a Java producer picks for that key)."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        # Java's % keeps the dividend's sign and Math.abs drops it again: the same as abs(h) % n.
        return mqs[abs(java_hash_code(arg)) % len(mqs)]


class SelectMessageQueueByRandom:
    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return random.choice(mqs)


# -- allocation at rebalance -------------------------------------------------------------------------------------------


def java_string_key(text: str) -> bytes:
    """Sort key giving Java's String.compareTo order (UTF-16 code units), for client ids that are not ASCII."""
    return text.encode("utf-16-be", "surrogatepass")


class AllocateMessageQueueStrategy(Protocol):
    """consumer/AllocateMessageQueueStrategy: this client's share of ``mq_all`` among ``cid_all`` (both sorted)."""

    name: str

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """AbstractAllocateMessageQueueStrategy.check: bad input raises; a client missing from the list gets nothing
    (it has just joined and the broker does not know it yet)."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


class AllocateMessageQueueAveragely:
    """Contiguous blocks: with 8 queues and 3 clients, 3 + 3 + 2."""

    name = "AVG"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index, n_mq, n_cid = cid_all.index(current_cid), len(mq_all), len(cid_all)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average = 1
        else:
            average = n_mq // n_cid + 1 if mod > 0 and index < mod else n_mq // n_cid
        start = index * average if mod > 0 and index < mod else index * average + mod
        return list(mq_all[start:start + max(0, min(average, n_mq - start))])


class AllocateMessageQueueAveragelyByCircle:
    """Dealt like cards: client i takes queues i, i + n, i + 2n..."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        return list(mq_all[cid_all.index(current_cid)::len(cid_all)])


def md5_hash(key: str) -> int:
    """ConsistentHashRouter.MD5Hash: the first four bytes of the MD5 digest as an unsigned big-endian number."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class ConsistentHashRouter:
    """common/consistenthash/ConsistentHashRouter: ``virtual_nodes`` points per client on a ring of hashes; a key
    belongs to the first point at or after its hash, wrapping around. A later point with the same hash replaces an
    earlier one, as in Java's TreeMap."""

    def __init__(self, nodes: Sequence[str], virtual_nodes: int, hash_function: Callable[[str], int] = md5_hash):
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtual node counts :{virtual_nodes}")
        self._hash = hash_function
        ring: dict[int, str] = {}
        replicas: dict[str, int] = {}
        for node in nodes:
            existing = replicas.get(node, 0)
            for i in range(virtual_nodes):
                ring[hash_function(f"{node}-{i + existing}")] = node  # VirtualNode.getKey
            replicas[node] = existing + virtual_nodes
        self._points = sorted(ring)
        self._owners = [ring[p] for p in self._points]

    def route_node(self, key: str) -> str | None:
        if not self._points:
            return None
        i = bisect.bisect_left(self._points, self._hash(key))
        return self._owners[i if i < len(self._points) else 0]


class AllocateMessageQueueConsistentHash:
    """Each queue goes to the client owning its point on the ring (queues hashed by MessageQueue.toString), so a
    client joining or leaving moves few queues."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10, hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function or md5_hash

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        router = ConsistentHashRouter(cid_all, self.virtual_node_cnt, self.hash_function)
        return [mq for mq in mq_all if router.route_node(str(mq)) == current_cid]
