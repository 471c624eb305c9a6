"""What the broker asks the store for through its facade, instead of reaching into its parts."""

from __future__ import annotations

import time

from broker.common.message import pack_host
from broker.store.commit_log import StoreMessage


def msg(i: int, topic: str = "TopicA", queue_id: int = 0) -> StoreMessage:
    return StoreMessage(topic, queue_id, bytes([i]) * 100, {"KEYS": f"key-{i}", "TAGS": "TagA"},
                        born_timestamp=1_700_000_000_000 + i)


def dispatched(store) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.005)
    assert store.dispatch_behind_bytes == 0


def test_commit_log_offsets_times_and_dispatch(open_store) -> None:
    store = open_store()
    assert (store.min_phy_offset, store.max_phy_offset, store.earliest_commit_log_time()) == (0, 0, -1)
    first = store.put_message(msg(0))
    store.put_message(msg(1))
    dispatched(store)
    assert store.max_phy_offset == store.commit_log.max_offset > 0
    assert store.is_dispatched(store.max_phy_offset) and not store.is_dispatched(store.max_phy_offset + 1)
    assert store.earliest_commit_log_time() == first.append.store_timestamp
    assert store.flush_commit_log() == store.max_phy_offset and store.flush_behind_bytes == 0
    assert store.store_host == pack_host("127.0.0.1", 10911)
    assert (store.dispatch_pid is None) == (store.config.dispatch_mode.value == "THREAD")


def test_consume_queues_by_topic(open_store) -> None:
    store = open_store()
    for i in range(3):
        store.put_message(msg(i, "TopicA", i % 2))
    store.put_message(msg(9, "TopicB", 0))
    dispatched(store)
    assert sorted(store.consume_queue_topics()) == ["TopicA", "TopicB"]
    assert store.sum_max_offset_in_queues() == 4
    cq = store.get_consume_queue("TopicA", 0)
    assert cq is not None and cq.max_offset == 2 and store.get_consume_queue("TopicA", 7) is None
    assert store.consume_queue_topics_below(0) == set()
    assert store.consume_queue_topics_below(store.max_phy_offset) == {"TopicA"}  # TopicB's unit ends there
    assert store.consume_queue_topics_below(store.max_phy_offset + 1) == {"TopicA", "TopicB"}


def test_records_by_offset_with_and_without_body(open_store) -> None:
    store = open_store()
    sent = msg(5)
    result = store.put_message(sent)
    whole = store.lookup_message(result.append.wrote_offset)
    header = store.lookup_message(result.append.wrote_offset, body=False)
    assert whole.body == sent.body and not header.body
    assert store.stored_record(sent, result.append) == whole


def test_arrival_listeners_hear_of_dispatched_units(open_store) -> None:
    store = open_store()
    heard = []
    store.add_arrival_listener(heard.append)
    store.put_message(msg(1))
    dispatched(store)
    deadline = time.monotonic() + 5
    while not heard and time.monotonic() < deadline:
        time.sleep(0.005)
    assert any(("TopicA", 0) in arrivals for arrivals in heard)
