"""The README's main command. For now a store demo: write a stream of orders into a fresh RocketMQ-format store, read
it back by queue, by key and by id, restart the store, and show what is on disk.

Usage: ``python -m jobs.main [--store-dir DIR] [--messages N]``
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import tempfile
import time

from broker.message import decode_offset_msg_id
from broker.store.commit_log import StoreMessage
from broker.store.config import MessageStoreConfig
from broker.store.layout import iter_records
from broker.store.message_store import MessageStore

TOPIC = "DemoOrders"
QUEUES = 4
TAGS = ("created", "paid", "shipped")


def produce(store: MessageStore, count: int, batch: int = 32) -> list[str]:
    """Orders with a KEYS entry per order id and a TAGS per state, in batches spread over the queues."""
    rng = random.Random(7)
    msg_ids: list[str] = []
    for start in range(0, count, batch):
        queue_id = (start // batch) % QUEUES
        msgs = [
            StoreMessage(TOPIC, queue_id, f'{{"order": {i}, "amount": {rng.randint(1, 500)}}}'.encode(),
                         {"KEYS": f"order-{i}", "TAGS": TAGS[i % len(TAGS)]}, born_timestamp=int(time.time() * 1000))
            for i in range(start, min(start + batch, count))
        ]
        result = store.put_messages(msgs)
        if not result.ok:
            raise SystemExit(f"put failed: {result.status.value} {result.reason}")
        msg_ids.extend(result.append.msg_ids)
    return msg_ids


def consume_all(store: MessageStore) -> collections.Counter:
    """Pull every queue from offset 0, as a consumer would, and count messages per tag."""
    tags: collections.Counter = collections.Counter()
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            got = store.get_message("demo-group", TOPIC, queue_id, offset, 32)
            if not got.buffers:
                break
            tags.update(r.properties.get("TAGS") for r in iter_records(got.body()))
            offset = got.next_begin_offset
    return tags


def wait_dispatched(store: MessageStore) -> None:
    while store.dispatch_behind_bytes:
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store-dir", help="storePathRootDir (default: a new temporary directory)")
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args(argv)
    root = args.store_dir or tempfile.mkdtemp(prefix="rmq-demo-")
    config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=1024 * 1024,
                                max_hash_slot_num=10_000, max_index_num=40_000)

    store = MessageStore(config)
    store.start()
    started = time.perf_counter()
    msg_ids = produce(store, args.messages)
    elapsed = time.perf_counter() - started
    wait_dispatched(store)
    print(f"stored {len(msg_ids)} orders in {elapsed:.2f} s ({len(msg_ids) / elapsed:,.0f} msg/s) under {root}")
    store.shutdown()

    store = MessageStore(config)
    store.start()  # a clean restart: recovery validates the tail and every index agrees with the CommitLog
    try:
        print("per queue (min, max offset):",
              {q: (store.min_offset_in_queue(TOPIC, q), store.max_offset_in_queue(TOPIC, q)) for q in range(QUEUES)})
        print("consumed per tag:", dict(consume_all(store)))
        key = f"order-{args.messages // 2}"
        by_key = list(iter_records(store.query_message(TOPIC, key, 32).body()))
        print(f"query by key {key!r}:", [r.body.decode() for r in by_key])
        _, offset = decode_offset_msg_id(msg_ids[-1])
        record = store.lookup_message(offset)
        print(f"lookup by id {msg_ids[-1]}: queue {record.queue_id} offset {record.queue_offset}",
              record.body.decode())
    finally:
        store.shutdown()
    for sub in ("commitlog", "consumequeue", "index"):
        path = os.path.join(root, sub)
        print(f"{sub}/:", sorted(os.listdir(path))[:5])


if __name__ == "__main__":
    main()
