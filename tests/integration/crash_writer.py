"""Child program of the store crash test: appends to a MessageStore with SYNC_FLUSH until it is killed.

Every put that comes back PUT_OK is written as one "ack" line to the ack file, after the store acknowledged it, so
each acked message must survive any crash. Several writer threads put at once, so group commit shares flushes.

Run from the repository root (so that ``broker`` imports)::

    python -m tests.integration.crash_writer --store DIR --acks FILE --round 3 [--threads 3] [--seconds 2]
        [--max-messages N] [--pause-ms 10] [--seed S]

Ack line (tab separated): topic, queueId, queueOffset, offsetMsgId, KEYS, UNIQ_KEY, sha1(body) hex. A batch put
acks one line per message. With ``--seconds`` or ``--max-messages`` the writer stops by itself and shuts the store
down cleanly; otherwise it writes until killed.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import random
import sys
import threading
import time
import traceback
from dataclasses import dataclass

from broker.common.message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from broker.store.commit_log import StoreMessage
from broker.store.config import FlushDiskType, MessageStoreConfig
from broker.store.layout import cq_pos
from broker.store.message_store import MessageStore
from broker.store.results import PutMessageStatus

TOPICS = ("CrashTopicA", "CrashTopicB", "CrashTopicC")
QUEUES_PER_TOPIC = 3
MAX_BODY = 3000
MAX_BATCH = 6
STARTING_LINE = "starting"  # printed before the store starts (recovery), READY_LINE once it writes
READY_LINE = "ready"
EXIT_WRITER_FAILED = 70


def crash_config(store_dir: str) -> MessageStoreConfig:
    """Small files, so that CommitLog, ConsumeQueue and IndexFile all roll within a few hundred messages."""
    return MessageStoreConfig(
        store_path_root_dir=store_dir,
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=cq_pos(50),  # 50 units a file
        max_hash_slot_num=4096,
        max_index_num=1000,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        flush_interval_consume_queue=100,
    )


def no_disk_pressure(path: str) -> float:
    """Disk usage as the store's cleaner sees it here: never full, so retention never deletes what is checked."""
    return 0.0


def message_keys(round_no: int, seq: int) -> tuple[str, str]:
    """(KEYS, UNIQ_KEY) of message ``seq`` of writer round ``round_no``: unique over all rounds."""
    return f"crash-{round_no}-{seq}", f"U{round_no:04d}{seq:012d}"


@dataclass(frozen=True, slots=True)
class Ack:
    topic: str
    queue_id: int
    queue_offset: int
    offset_msg_id: str
    key: str
    uniq_key: str
    body_sha1: str

    def line(self) -> str:
        return "\t".join((self.topic, str(self.queue_id), str(self.queue_offset), self.offset_msg_id, self.key,
                          self.uniq_key, self.body_sha1)) + "\n"

    @classmethod
    def parse(cls, line: str) -> Ack:
        topic, queue_id, queue_offset, msg_id, key, uniq_key, sha1 = line.rstrip("\n").split("\t")
        return cls(topic, int(queue_id), int(queue_offset), msg_id, key, uniq_key, sha1)


def read_acks(path: str) -> list[Ack]:
    """Every whole ack line; a line the kill cut short has no newline and was never a complete ack."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [Ack.parse(line) for line in f if line.endswith("\n")]


class Writer:
    """Shared state of the writer threads: the store, the ack file and the message sequence."""

    def __init__(self, store: MessageStore, acks_fd: int, round_no: int, max_messages: int | None,
                 pause_ms: float) -> None:
        self.store = store
        self.acks_fd = acks_fd
        self.round_no = round_no
        self.max_messages = max_messages
        self.pause_ms = pause_ms
        self._seq = itertools.count()
        self.stopped = threading.Event()

    def run(self, seed: int) -> None:
        try:
            self._loop(random.Random(seed))
        except BaseException:
            # A writer that dies on an exception must not look like one the test killed.
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(EXIT_WRITER_FAILED)

    def _loop(self, rnd: random.Random) -> None:
        while not self.stopped.is_set():
            topic, queue_id = rnd.choice(TOPICS), rnd.randrange(QUEUES_PER_TOPIC)
            count = 1 if rnd.random() < 0.6 else rnd.randint(2, MAX_BATCH)
            made = [self._message(rnd, topic, queue_id) for _ in range(count)]
            msgs = [m for m in made if m is not None]
            self._put(msgs)
            if len(msgs) < len(made):  # max_messages reached
                self.stopped.set()
            if self.pause_ms:
                time.sleep(rnd.uniform(0, self.pause_ms) / 1000)

    def _message(self, rnd: random.Random, topic: str, queue_id: int) -> StoreMessage | None:
        seq = next(self._seq)
        if self.max_messages is not None and seq >= self.max_messages:
            return None
        key, uniq = message_keys(self.round_no, seq)
        body = rnd.randbytes(rnd.randint(0, MAX_BODY))
        props = {PROPERTY_TAGS: f"Tag{seq % 4}", PROPERTY_KEYS: key, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq}
        return StoreMessage(topic, queue_id, body, props, born_timestamp=int(time.time() * 1000))

    def _put(self, msgs: list[StoreMessage]) -> None:
        if not msgs:
            return
        result = self.store.put_messages(msgs) if len(msgs) > 1 else self.store.put_message(msgs[0])
        if result.status is not PutMessageStatus.PUT_OK:
            return  # not acknowledged: the message may or may not survive a crash
        assert result.append is not None
        lines = [
            Ack(m.topic, m.queue_id, queue_offset, msg_id, m.properties[PROPERTY_KEYS],
                m.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX], hashlib.sha1(m.body).hexdigest()).line()
            for m, queue_offset, msg_id in zip(msgs, result.append.queue_offsets, result.append.msg_ids, strict=True)
        ]
        os.write(self.acks_fd, "".join(lines).encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="store root directory")
    parser.add_argument("--acks", required=True, help="file the ack lines are appended to")
    parser.add_argument("--round", type=int, required=True, help="round number, part of every key")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=None, help="stop and shut down cleanly after this long")
    parser.add_argument("--max-messages", type=int, default=None, help="stop and shut down after this many")
    parser.add_argument("--pause-ms", type=float, default=0.0, help="each thread sleeps up to this after a put")
    args = parser.parse_args(argv)

    store = MessageStore(crash_config(args.store), disk_usage=no_disk_pressure)
    print(STARTING_LINE, flush=True)
    store.start()
    acks_fd = os.open(args.acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    writer = Writer(store, acks_fd, args.round, args.max_messages, args.pause_ms)
    threads = [threading.Thread(target=writer.run, args=(args.seed * 1000 + i,), name=f"writer-{i}", daemon=True)
               for i in range(args.threads)]
    for t in threads:
        t.start()
    print(READY_LINE, flush=True)
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    while any(t.is_alive() for t in threads):
        if deadline is not None and time.monotonic() >= deadline:
            writer.stopped.set()
        for t in threads:
            t.join(0.05)
    store.shutdown()
    os.close(acks_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
