"""Rows/s and CPU per row of the Spark sink's ways of sending, outside Spark, against one of our brokers, in the
same run: the client (this process), the broker (its process) and its dispatch child.

Per round, the same ``--rows`` rows (as ``write_task`` sends one task's), one way after the other:

- **plain**: the client's own plain batches (``MessageBatch`` of ``--batch`` rows per queue, round robin over the
  queues, SEND_BATCH_MESSAGE pipelined ``--max-in-flight`` deep): what the sink is measured against;
- **at-least-once**: the sink's ``PlainSender`` (``guarantee=at-least-once``);
- **exactly-once batched**: a ``HalfSender`` (prepared batches), then ``end_transactions`` (END_TRANSACTION_BATCH);
- **exactly-once per-row**: the same with the broker's ``rmqTransactionBatchEnable`` set to false (live, by
  UPDATE_BROKER_CONFIG): one half message and one END_TRANSACTION per row, as against Apache's broker.

The exactly-once ways leave out the decision (one record, whatever the row count). rows/s counts send + end;
``/ plain`` is that against plain's rows/s of the same round. Best of ``--repeat`` rounds (by rows/s), after a
warm-up round. With ``--py-spy DIR`` the broker is sampled by py-spy during the exactly-once batched phases of the
last round, and so is its dispatch child (``send-dispatch.txt``, ``end-dispatch.txt``); ``--ways`` picks the ways
measured besides plain (which ``/ plain`` needs), e.g. ``--ways "exactly-once batched"`` for a profile of that way
alone. Nothing here asserts on time.

Examples
--------
    python bench/sink_rows.py --rows 20000 --repeat 3
    python bench/sink_rows.py --rows 20000 --repeat 1 --py-spy /tmp/sinkprof --ways "exactly-once batched"
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
from dataclasses import replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from broker.client import protocol  # noqa: E402
from broker.client.blocking import BlockingClient, BlockingRemotingClient, Pipeline, create_topic  # noqa: E402
from broker.client.message import Message, MessageBatch  # noqa: E402
from broker.client.transaction_protocol import LocalTransactionState, supports_transaction_batch  # noqa: E402
from broker.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from broker.remoting.command import create_request  # noqa: E402
from broker.remoting.transaction_batch import TRANSACTION_BATCH_ENABLE_KEY  # noqa: E402
from connector.options import AT_LEAST_ONCE, SinkOptions  # noqa: E402
from connector.sink_commit import end_transactions  # noqa: E402
from connector.sink_send import PlainSender  # noqa: E402
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
    """py-spy on the broker (raw stacks into ``out``) and on its dispatch child (``<out stem>-dispatch.txt``)."""
    if out is None:
        yield
        return
    targets = [(pid, out)] + [(child, out.with_name(f"{out.stem}-dispatch{out.suffix}")) for child in children(pid)]
    spies = [subprocess.Popen(["py-spy", "record", "-r", "500", "-f", "raw", "-o", str(path), "--pid", str(target)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for target, path in targets]
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(2)
        for spy in spies:
            spy.wait(30)


class Phases:
    """Wall and CPU of the phases of one way of sending (send, then end)."""

    def __init__(self) -> None:
        self.wall = self.client = 0.0
        self.others: list[float] = []

    def add(self, meter: Meter) -> None:
        self.wall += meter.wall
        self.client += meter.client
        self.others = [a + b for a, b in zip(self.others, meter.others, strict=True)] if self.others else meter.others


def set_batch_enable(broker_addr: str, enabled: bool) -> None:
    """rmqTransactionBatchEnable on the broker, live; checked by asking it as a task does."""
    with BlockingRemotingClient(broker_addr) as client:
        text = f"{TRANSACTION_BATCH_ENABLE_KEY}={str(enabled).lower()}\n".encode()
        response = client.invoke(create_request(RequestCode.UPDATE_BROKER_CONFIG, body=text), 5000)
        if response.code != ResponseCode.SUCCESS:
            raise SystemExit(f"updateBrokerConfig {text!r} refused: {response.code} {response.remark}")
        if supports_transaction_batch(client) != enabled:
            raise SystemExit(f"the broker did not take {TRANSACTION_BATCH_ENABLE_KEY}={enabled}")


def plain_batches(namesrv: str, bodies: list[bytes], args: argparse.Namespace, pid: int) -> Phases:
    phases = Phases()
    with Meter(pid) as meter:
        send_plain_batches(namesrv, TOPIC, bodies, args.batch, args.max_in_flight)
    phases.add(meter)
    return phases


def send_plain_batches(namesrv: str, topic: str, bodies: list[bytes], batch_rows: int, window: int) -> None:
    """The client's own batches: MessageBatch per ``batch_rows`` rows, queues round robin, pipelined ``window``
    deep per broker."""
    with BlockingClient(namesrv) as client:
        queues = client.fetch_publish_queues(topic)
        pipes: dict[str, Pipeline] = {}
        for n, first in enumerate(range(0, len(bodies), batch_rows)):
            mq = queues[n % len(queues)]
            addr = client.broker_addr(mq)
            pipe = pipes.get(addr) or pipes.setdefault(addr, Pipeline(client.client(addr), window=window,
                                                                          timeout_ms=30_000))
            batch = MessageBatch([Message(topic, body) for body in bodies[first:first + batch_rows]])
            header = protocol.send_message_header("bench_plain", batch, mq, 0, batch=True)
            check_stored(pipe.submit(protocol.send_message_request(header, batch.body, batch=True)))
        for pipe in pipes.values():
            check_stored(pipe.drain())


def check_stored(done: list) -> None:
    for _, response in done:
        if response.code != ResponseCode.SUCCESS:
            raise SystemExit(f"a plain batch was refused: {response.code} {response.remark}")


def at_least_once(opts: SinkOptions, bodies: list[bytes], pid: int) -> Phases:
    phases = Phases()
    sender = PlainSender(replace(opts, guarantee=AT_LEAST_ONCE))
    with Meter(pid) as meter:
        for body in bodies:
            sender.send(TOPIC, body, None, None, None, None)
        sender.flush()
    sender.close()
    phases.add(meter)
    return phases


def exactly_once(opts: SinkOptions, bodies: list[bytes], pid: int, prof: Path | None) -> Phases:
    phases = Phases()
    sender = HalfSender(opts, f"job-{uuid.uuid4().hex}", uuid.uuid4().hex)
    with sampled(pid, prof / "send.txt" if prof else None), Meter(pid) as send:
        for body in bodies:
            sender.send(TOPIC, body, None, None, None, None)
        sender.flush()
    commit = sender.task_commit()
    sender.close()
    phases.add(send)
    with BlockingClient(opts.namesrv_addr, producer_group=opts.producer_group) as client, \
            sampled(pid, prof / "end.txt" if prof else None), Meter(pid) as end:
        counts = end_transactions(client, opts, [commit], LocalTransactionState.COMMIT_MESSAGE)
    if counts.ended != len(bodies):
        raise SystemExit(f"ended {counts.ended} of {len(bodies)} rows: {counts}")
    phases.add(end)
    return phases


WAYS = ("plain", "at-least-once", "exactly-once batched", "exactly-once per-row")


def run_round(namesrv: str, broker: object, bodies: list[bytes], args: argparse.Namespace,
              prof: Path | None) -> dict[str, Phases]:
    pid = broker.popen.pid
    opts = SinkOptions(namesrv_addr=namesrv, topic=TOPIC, sink_id=f"bench-{uuid.uuid4().hex[:12]}",
                       sink_id_explicit=True, streaming=False, max_in_flight=args.max_in_flight)
    out = {"plain": plain_batches(namesrv, bodies, args, pid)}
    if "at-least-once" in args.ways:
        out["at-least-once"] = at_least_once(opts, bodies, pid)
    if "exactly-once batched" in args.ways:
        out["exactly-once batched"] = exactly_once(opts, bodies, pid, prof)
    if "exactly-once per-row" in args.ways:
        set_batch_enable(broker.addr, False)
        try:
            out["exactly-once per-row"] = exactly_once(opts, bodies, pid, None)
        finally:
            set_batch_enable(broker.addr, True)
    return out


def parse_ways(text: str) -> list[str]:
    """--ways: a comma-separated list of WAYS; plain is always measured (the others are set against it)."""
    picked = [way.strip() for way in text.split(",") if way.strip()]
    unknown = [way for way in picked if way not in WAYS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown way(s) {', '.join(unknown)}: the ways are {', '.join(WAYS)}")
    return ["plain", *(way for way in WAYS if way in picked and way != "plain")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256, help="rows per plain batch (the sink's BATCH_MAX_ROWS)")
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--py-spy", default=None,
                        help="write py-spy raw stacks of the broker and its dispatch child here (last round)")
    parser.add_argument("--ways", type=parse_ways, default=list(WAYS),
                        help=f"comma-separated ways to measure besides plain (default all: {', '.join(WAYS)})")
    args = parser.parse_args()
    pad = "x" * max(0, args.size - 12)
    bodies = [f"{i:012d}{pad}".encode() for i in range(args.rows)]
    prof = Path(args.py_spy) if args.py_spy else None
    if prof:
        prof.mkdir(parents=True, exist_ok=True)
    best: dict[str, Phases] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sink-rows-") as tmp, \
            cluster.start_namesrv(Path(tmp) / "namesrv") as namesrv, \
            cluster.start_broker(Path(tmp) / "broker", namesrv.addr) as broker:
        with BlockingClient(namesrv.addr) as client:
            create_topic(client.client(broker.addr), TOPIC, queue_nums=4)
        time.sleep(1.0)  # the route reaches the NameServer
        print(f"# {args.rows:,} rows of {args.size} B, maxInFlight {args.max_in_flight}, plain batches of "
              f"{args.batch}, load average {os.getloadavg()[0]:.1f}")
        print("| round | way | rows/s | / plain | client us/row | broker us/row | dispatch us/row | CPU us/row |")
        print("|---|---|---|---|---|---|---|---|")
        for round_ in range(args.repeat + 1):  # round 0 warms up (connections, routes, first pages)
            ways = run_round(namesrv.addr, broker, bodies, args, prof if round_ == args.repeat else None)
            if round_ == 0:
                continue
            for way in args.ways:
                print(row(str(round_), way, ways[way], ways["plain"], args.rows), flush=True)
                if way not in best or ways[way].wall < best[way].wall:
                    best[way] = ways[way]
        for way in args.ways:
            print(row("best", way, best[way], best["plain"], args.rows))
        print(f"# load average at the end {os.getloadavg()[0]:.1f}")
    return 0


def row(label: str, way: str, phases: Phases, plain: Phases, n: int) -> str:
    broker, dispatch = phases.others[0] / n * 1e6, sum(phases.others[1:]) / n * 1e6
    client = phases.client / n * 1e6
    return (f"| {label} | {way} | {n / phases.wall:,.0f} | {plain.wall / phases.wall:.2f} | {client:.1f} "
            f"| {broker:.1f} | {dispatch:.1f} | {client + broker + dispatch:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
