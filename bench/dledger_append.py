"""DLedger replication: what a committed append costs, three in-process members on loopback in one event loop.

Starts a group of three (short election timings, 64 MiB data files in a temporary folder), waits for a leader, then
appends ``--count`` bodies of ``--size`` bytes through ``DLedgerServer.append``, ``--concurrency`` at a time, once
with one entry a push (DLedger's and RocketMQ's default) and once with batch pushes (``enableBatchPush``). Prints
the appends per second and the process CPU per append: the leader's append and pushes, both followers' writes and
answers, all in this one process, so the figure is the group's whole CPU per committed entry. Nothing asserts.

Examples
--------
    python bench/dledger_append.py                               # 20000 appends of 1 KB, 256 at a time
    python bench/dledger_append.py --size 128 --concurrency 1    # one at a time: the latency of a commit
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from broker.dledger.config import DLedgerConfig
from broker.dledger.server import DLedgerServer
from broker.tools.local_cluster import free_port


async def run_once(root: Path, count: int, size: int, concurrency: int, batch: bool) -> tuple[float, float]:
    peers = {f"n{i}": f"127.0.0.1:{free_port()}" for i in range(3)}
    members = [DLedgerServer(DLedgerConfig("bench", member, peers, store_base_dir=str(root),
                                           heart_beat_time_interval_ms=500, min_vote_interval_ms=100,
                                           max_vote_interval_ms=300, enable_batch_push=batch,
                                           mapped_file_size_for_entry_data=64 << 20))
               for member in peers]
    for member in members:
        await member.start()
    try:
        while not any(m.member_state.is_leader for m in members):
            await asyncio.sleep(0.05)
        leader = next(m for m in members if m.member_state.is_leader)
        body = b"x" * size
        await leader.append(body)  # warm up the connections
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(0, count, concurrency):
            await asyncio.gather(*(leader.append(body) for _ in range(concurrency)))
        return time.perf_counter() - started, time.process_time() - cpu
    finally:
        for member in members:
            await member.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    count = args.count - args.count % args.concurrency
    print(f"{count} appends of {args.size} B, {args.concurrency} at a time, 3 members in one process")
    for batch in (False, True):
        with tempfile.TemporaryDirectory(prefix="dledger-bench-") as root:
            wall, cpu = asyncio.run(run_once(Path(root), count, args.size, args.concurrency, batch))
        mode = "batch pushes      " if batch else "one entry a push  "
        print(f"{mode} {count / wall:9.0f} appends/s   {cpu / count * 1e6:7.1f} us CPU per committed append")


if __name__ == "__main__":
    main()
