"""Allocation strategies and the hash selector against answers captured from Apache's Java client
(java_allocations.json says how), plus the edge cases Java defines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.client.message import Message, MessageQueue
from broker.client.selector import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash,
    ConsistentHashRouter,
    SelectMessageQueueByHash,
    java_hash_code,
    java_string_key,
    md5_hash,
)

GOLDEN = json.loads((Path(__file__).parent / "java_allocations.json").read_text("utf-8"))
STRATEGIES = {
    "AVG/v10": AllocateMessageQueueAveragely(),
    "AVG_BY_CIRCLE/v10": AllocateMessageQueueAveragelyByCircle(),
    "CONSISTENT_HASH/v10": AllocateMessageQueueConsistentHash(),
    "CONSISTENT_HASH/v3": AllocateMessageQueueConsistentHash(3),
}


def _shape(queues: int, clients: int) -> tuple[list[MessageQueue], list[str]]:
    mqs = sorted(MessageQueue("TopicTest", f"broker-{'ab'[b]}", q)
                 for b in range(2) for q in range(queues // 2 + (queues % 2 if b == 0 else 0)))
    cids = sorted((f"192.168.0.{c + 1}@{1000 + c}#{77777 * (c + 3)}" for c in range(clients)), key=java_string_key)
    return mqs, cids


@pytest.mark.parametrize("key", sorted(GOLDEN["allocations"]))
def test_allocation_is_javas(key: str) -> None:
    name, virtual, shape, cid = key.split("/", 3)
    queues, clients = map(int, shape.split("x"))
    mqs, cids = _shape(queues, clients)
    got = STRATEGIES[f"{name}/{virtual}"].allocate("g", cid, mqs, cids)
    assert [[mq.broker_name, mq.queue_id] for mq in got] == GOLDEN["allocations"][key]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("queues,clients", [(8, 3), (3, 5), (16, 4), (1, 1), (13, 6)])
def test_shares_cover_every_queue_once(name: str, queues: int, clients: int) -> None:
    mqs, cids = _shape(queues, clients)
    shares = [STRATEGIES[name].allocate("g", cid, mqs, cids) for cid in cids]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat) == mqs


def test_averagely_blocks() -> None:
    mqs, cids = _shape(8, 3)
    sizes = [len(AllocateMessageQueueAveragely().allocate("g", cid, mqs, cids)) for cid in cids]
    assert sizes == [3, 3, 2]


def test_by_circle_deals_like_cards() -> None:
    mqs, cids = _shape(8, 3)
    assert AllocateMessageQueueAveragelyByCircle().allocate("g", cids[1], mqs, cids) == [mqs[1], mqs[4], mqs[7]]


@pytest.mark.parametrize("strategy", list(STRATEGIES.values()))
def test_unknown_client_gets_nothing(strategy) -> None:
    mqs, cids = _shape(4, 2)
    assert strategy.allocate("g", "10.0.0.1@new", mqs, cids) == []


@pytest.mark.parametrize("args,message", [
    (("", [MessageQueue("t", "b", 0)], ["a"]), "currentCID is empty"),
    (("a", [], ["a"]), "mqAll is null or mqAll empty"),
    (("a", [MessageQueue("t", "b", 0)], []), "cidAll is null or cidAll empty"),
])
def test_bad_input_raises_as_java(args, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AllocateMessageQueueAveragely().allocate("g", *args)


def test_negative_virtual_nodes_refused() -> None:
    with pytest.raises(ValueError):
        AllocateMessageQueueConsistentHash(-1)


def test_consistent_hash_moves_few_queues_when_a_client_joins() -> None:
    mqs, cids = _shape(16, 4)
    strategy = AllocateMessageQueueConsistentHash()
    before = {mq: cid for cid in cids for mq in strategy.allocate("g", cid, mqs, cids)}
    joined = sorted([*cids, "192.168.0.99@9"], key=java_string_key)
    after = {mq: cid for cid in joined for mq in strategy.allocate("g", cid, mqs, joined)}
    moved = [mq for mq in mqs if before[mq] != after[mq]]
    assert all(after[mq] == "192.168.0.99@9" for mq in moved)


def test_md5_hash_is_four_unsigned_bytes() -> None:
    # The first 4 bytes of md5("a") = 0c c1 75 b9
    assert md5_hash("a") == 0x0CC175B9
    assert ConsistentHashRouter([], 10).route_node("x") is None


def _representable(entry: dict) -> bool:
    """A Java Long inside the int range hashes differently from the Integer of the same value; a Python int in that
    range is hashed as Java hashes an Integer, so such captures have no Python counterpart."""
    return not (entry["type"] == "Long" and -(2**31) <= int(entry["arg"]) < 2**31)


@pytest.mark.parametrize("entry", [e for e in GOLDEN["hash_selector"] if _representable(e)],
                         ids=lambda e: f"{e['type']}:{e['arg']}")
def test_hash_selector_is_javas(entry: dict) -> None:
    arg = {"String": str, "Boolean": lambda s: s == "true"}.get(entry["type"], int)(entry["arg"])
    mqs = [MessageQueue("T", "b", q) for q in range(6)]
    assert SelectMessageQueueByHash().select(mqs, Message("T", b"x"), arg).queue_id == entry["queue_id"]


def test_java_hash_code_of_a_long() -> None:
    # Long.hashCode, (int) (value ^ (value >>> 32)); Java 17 prints -2045923535 and -1280
    assert java_hash_code(123456789012345) == -2045923535
    assert java_hash_code(-5 * 2**40) == -1280
    assert java_hash_code(-(2**31)) == -(2**31)
    assert java_hash_code(True) == 1231


def test_java_string_order_uses_utf16_units() -> None:
    # U+FF5E sorts after U+1F600 by code point, before it by UTF-16 unit (0xD83D): Java's order is the latter.
    assert sorted(["\U0001F600", "\uff5e"], key=java_string_key) == ["\U0001F600", "\uff5e"]
