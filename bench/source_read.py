"""The rmq source's executor side without Spark: CPU per row of what one Python worker does for a partition.

Setup as bench/connector_source.py (one NameServer and one of our brokers, larger pulls, a topic of 8 queues filled
with ``--messages`` 1 KB messages). Then, ``--repeat`` times, every queue read whole in this process, one after
another, as Spark's Python worker reads a partition, with the CPU of this process and of the broker's tree:

- **pull**: the pulls only (``_pull_bodies``: the requests, the socket, the frames; bodies dropped).
- **read**: ``read_partition`` as an executor runs it: the pulls and their records decoded into Arrow batches (the
  C pass, ``pull_columns``).
- **read, Python twin**: the same with the decode in numpy and Arrow kernels (``_decode_records_py``, what a build
  without the C extension runs).

What Spark adds on top (the batches' Arrow IPC to the JVM and the JVM's side) is bench/spark_ceiling.py's.

Examples
--------
    python bench/source_read.py --messages 400000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.connector_source import QUEUES, TOPIC, fill, start_servers  # noqa: E402
from bench.cpu import tree_cpu  # noqa: E402
from broker.client import BlockingClient  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--pull-count", type=int, default=1024, help="the broker's max messages per pull")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from connector import records
    from connector.source import QueueRange, _pull_bodies, _Puller, read_partition

    home = Path(tempfile.mkdtemp(prefix="rmq-bench-source-read-"))
    namesrv, closers, broker_pids = start_servers("ours", home, args.pull_count)
    try:
        from tests.connector.conftest import create_topic

        create_topic(namesrv, TOPIC, QUEUES)
        fill(namesrv, args.messages, args.body, args.producers)
        with BlockingClient(namesrv) as client:
            queues = client.fetch_message_queues(TOPIC)
            parts = [QueueRange(mq.topic, mq.broker_name, mq.queue_id, 0, client.get_max_offset(mq),
                                client.broker_addr(mq), namesrv, "SourceReadBench", None, "TAG", args.pull_count,
                                30_000, True) for mq in queues]

        def pull() -> int:
            count = 0
            for part in parts:
                puller = _Puller(part)
                for _ in _pull_bodies(puller, part):
                    pass
                puller.close()
                count += part.end - part.start  # the rows those bodies hold (not decoded here)
            return count

        def read() -> int:
            return sum(batch.num_rows for part in parts for batch in read_partition(part))

        def read_twin() -> int:
            c_pass, records.pull_columns = records.pull_columns, None
            try:
                return read()
            finally:
                records.pull_columns = c_pass

        read()  # the first read imports pyarrow's kernels and pandas: not counted
        cases = {"pull": pull, "read": read, "read, Python twin": read_twin}
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):
            for name, case in cases.items():
                client_before, broker_before = time.process_time(), sum(tree_cpu(pid) for pid in broker_pids)
                rows = case()
                client = time.process_time() - client_before
                broker = sum(tree_cpu(pid) for pid in broker_pids) - broker_before
                assert rows == args.messages, f"{name} read {rows} rows, not {args.messages}"
                if name not in best or client + broker < sum(best[name]):
                    best[name] = (client, broker)
    finally:
        for close in closers:
            close()
        shutil.rmtree(home, ignore_errors=True)

    one, five, _ = os.getloadavg()
    print(f"{args.messages:,} x {args.body} B, pulls of {args.pull_count}, least CPU of {args.repeat}, "
          f"load average {one:.1f} {five:.1f} on {os.cpu_count()} cores")
    print("| case | reader us/row | broker us/row | total us/row |")
    print("|---|---|---|---|")
    for name, (client, broker) in best.items():
        per = 1e6 / args.messages
        print(f"| {name} | {client * per:.2f} | {broker * per:.2f} | {(client + broker) * per:.2f} |")


if __name__ == "__main__":
    main()
