"""CPU per row of the exactly-once sink, outside Spark: the client (this process) and our broker (its process and
its dispatch child), for the half sends of one task and for the END_TRANSACTIONs of its commit.

One NameServer and one of our brokers; per round, a HalfSender sends ``--rows`` rows (as ``write_task`` does for one
task), then ``end_transactions`` commits them (as ``commit_batch`` does after its decision, which is left out: it
costs the same whatever the row count). Best of ``--repeat`` rounds. With ``--py-spy DIR`` the broker is sampled by
py-spy during each phase of the last round (raw stacks, one file per phase). Nothing here asserts on time.

Examples
--------
    python bench/sink_rows.py --rows 8000 --repeat 3
    python bench/sink_rows.py --rows 8000 --repeat 1 --py-spy /tmp/sinkprof
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.client.blocking import BlockingClient, create_topic  # noqa: E402
from broker.client.transaction import LocalTransactionState  # noqa: E402
from connector.options import SinkOptions  # noqa: E402
from connector.sink_commit import end_transactions  # noqa: E402
from connector.sink_task import HalfSender  # noqa: E402
from tests.integration import cluster  # noqa: E402

TOPIC = "BenchSinkRows"
TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


class Meter:
    """CPU of this process, the broker and the broker's children over one phase."""

    def __init__(self, broker_pid: int) -> None:
        self.pids = [broker_pid, *children(broker_pid)]

    def __enter__(self) -> Meter:
        self.wall = time.perf_counter()
        self.client = time.process_time()
        self.others = [process_cpu(p) for p in self.pids]
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.client = time.process_time() - self.client
        self.others = [process_cpu(p) - before for p, before in zip(self.pids, self.others, strict=True)]


@contextlib.contextmanager
def sampled(pid: int, out: Path | None) -> object:
    if out is None:
        yield
        return
    spy = subprocess.Popen(["py-spy", "record", "-r", "500", "-f", "raw", "-o", str(out), "--pid", str(pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        spy.send_signal(2)
        spy.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--py-spy", default=None, help="write py-spy raw stacks of the broker here (last round)")
    args = parser.parse_args()
    pad = "x" * max(0, args.size - 12)
    bodies = [f"{i:012d}{pad}".encode() for i in range(args.rows)]
    prof = Path(args.py_spy) if args.py_spy else None
    if prof:
        prof.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-sink-rows-") as tmp, \
            cluster.start_namesrv(Path(tmp) / "namesrv") as namesrv, \
            cluster.start_broker(Path(tmp) / "broker", namesrv.addr) as broker:
        with BlockingClient(namesrv.addr) as client:
            create_topic(client.client(broker.addr), TOPIC, queue_nums=4)
        time.sleep(1.0)  # the route reaches the NameServer
        pid = broker.popen.pid
        print(f"# {args.rows:,} rows of {args.size} B, maxInFlight {args.max_in_flight}, load average "
              f"{os.getloadavg()[0]:.1f}")
        print("| round | send rows/s | client send us/row | broker send us/row | dispatch send us/row "
              "| end rows/s | client end us/row | broker end us/row | dispatch end us/row |")
        print("|---|---|---|---|---|---|---|---|---|")
        for round_ in range(args.repeat + 1):  # round 0 warms up (connections, routes, first pages)
            last = round_ == args.repeat
            opts = SinkOptions(namesrv_addr=namesrv.addr, topic=TOPIC, sink_id=f"bench-{uuid.uuid4().hex[:12]}",
                               sink_id_explicit=True, streaming=False, max_in_flight=args.max_in_flight)
            sender = HalfSender(opts, f"job-{uuid.uuid4().hex}", uuid.uuid4().hex)
            with sampled(pid, prof / "send.txt" if prof and last else None), Meter(pid) as send:
                for body in bodies:
                    sender.send(TOPIC, body, None, None, None, None)
                sender.flush()
            commit = sender.task_commit()
            sender.close()
            with BlockingClient(namesrv.addr, producer_group=opts.producer_group) as client, \
                    sampled(pid, prof / "end.txt" if prof and last else None), Meter(pid) as end:
                counts = end_transactions(client, opts, [commit], LocalTransactionState.COMMIT_MESSAGE)
            if counts.ended != args.rows:
                raise SystemExit(f"ended {counts.ended} of {args.rows} rows: {counts}")
            if round_ == 0:
                continue
            n = args.rows
            print(f"| {round_} | {n / send.wall:,.0f} | {send.client / n * 1e6:.1f} | {send.others[0] / n * 1e6:.1f} "
                  f"| {sum(send.others[1:]) / n * 1e6:.1f} | {n / end.wall:,.0f} | {end.client / n * 1e6:.1f} "
                  f"| {end.others[0] / n * 1e6:.1f} | {sum(end.others[1:]) / n * 1e6:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
