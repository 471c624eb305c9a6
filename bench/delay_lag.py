"""Delayed delivery lag: how late a broker delivers delayed messages when 10,000 of them are pending at once, ours
against Apache RocketMQ's (5.5.0) in the same run.

Each target runs with its own NameServer (our ``python -m broker.namesrv`` + ``python -m broker``, or Apache's
NamesrvStartup + BrokerStartup with the timer wheel off, so delay levels go through SCHEDULE_TOPIC_XXXX on both),
one at a time so they do not compete for the cores. Both use the default delay levels, ASYNC_FLUSH and 1 GiB
CommitLog files.

One run per target:
1. a lite pull consumer (ours, in this process) reads every queue of a fresh topic, long polling;
2. our asyncio producer sends ``--count`` messages with ``--level`` (default 4: 30 s) as fast as it can, 32 in
   flight (a refused send is retried); the sends must end before the first message is due ("send s" below the
   delay), so that all of them are pending together and the broker then delivers them with nothing else to do;
3. when everything has arrived, each scheduled record is read back by its offsetMsgId (VIEW_MESSAGE_BY_ID) for its
   store time: the message is due at that time + the level's delay.

Columns:
- **send s**: how long the sends took (all pending when this is below the delay).
- **broker lag**: the delivered copy's store time minus the due time: how late the broker put it back.
- **consumer lag**: when the consumer received it minus the due time (broker lag + dispatch + long-polling pull).
- **drain s**: from the first delivery to the last; **deliver msg/s**: messages over that span.

Nothing here asserts on time.

Examples
--------
    python bench/delay_lag.py                       # 10,000 messages at level 4 (30 s), ours vs apache
    python bench/delay_lag.py --targets ours --count 2000 --level 2
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.targets import TARGETS, running_target  # noqa: E402
from broker.client import (  # noqa: E402
    ClientConfig,
    ConsumeFromWhere,
    LitePullConfig,
    LitePullConsumer,
    Message,
    MessageExt,
    Producer,
    SendResult,
)
from broker.client.blocking import BlockingRemotingClient  # noqa: E402
from broker.common.errors import MQBrokerError, MQClientError  # noqa: E402
from broker.common.message import decode_offset_msg_id, format_host  # noqa: E402
from broker.common.record import decode_record  # noqa: E402
from broker.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from broker.remoting.command import create_request  # noqa: E402
from broker.remoting.headers import ViewMessageRequestHeader  # noqa: E402
from broker.server.config import parse_delay_levels  # noqa: E402

DEFAULT_LEVELS = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
COMMIT_LOG_FILE_SIZE = 1024 * 1024 * 1024
IN_FLIGHT = 32
QUEUES = 8
APACHE_BROKER_JVM_ARGS = ("-XX:TieredStopAtLevel=4", "-XX:-UseSerialGC", "-XX:+UseG1GC", "-Xms1g", "-Xmx1g")
PERCENTILES = (50, 90, 99, 100)
BROKER_CONF = {"mappedFileSizeCommitLog": COMMIT_LOG_FILE_SIZE, "defaultTopicQueueNums": QUEUES}


@dataclass(slots=True)
class Run:
    target: str
    count: int
    delay_ms: int
    send_s: float = 0.0
    broker_lag: list[int] = field(default_factory=list)
    consumer_lag: list[int] = field(default_factory=list)
    drain_s: float = 0.0
    missing: int = 0
    duplicates: int = 0
    send_retries: int = 0


def client_config(namesrv_addr: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv_addr, client_ip="127.0.0.1", instance_name=name)


async def measure(target: str, namesrv_addr: str, count: int, level: int) -> Run:
    run = Run(target, count, DEFAULT_LEVELS[level - 1])
    topic = f"DelayLag_{target}_{time.monotonic_ns()}"
    received: list[tuple[int, MessageExt]] = []
    async with Producer("delay_lag_pg", client_config=client_config(namesrv_addr, "p")) as producer:
        await producer.send(Message(topic, b"warm-up", keys="warm"))  # creates the topic and its route
        config = LitePullConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, pull_batch_size=32)
        async with LitePullConsumer("delay_lag_cg", config=config,
                                    client_config=client_config(namesrv_addr, "c")) as consumer:
            consumer.assign(await queues_of(consumer, topic))
            reader = asyncio.get_running_loop().create_task(read(consumer, received, count + 1))
            results = await send_delayed(producer, topic, count, level, run)
            try:
                await asyncio.wait_for(reader, run.delay_ms / 1000 + 120)
            except TimeoutError:
                pass
    delivered = {m.msg_id: (at, m) for at, m in received if m.keys != "warm"}
    run.duplicates = len([m for _, m in received if m.keys != "warm"]) - len(delivered)
    run.missing = count - len(delivered)
    scheduled_store = await asyncio.to_thread(store_times, [r.offset_msg_id for r in results])
    times = []
    for result, stored_at in zip(results, scheduled_store, strict=True):
        at_msg = delivered.get(result.msg_id or "")
        if at_msg is None:
            continue
        at, msg = at_msg
        due = stored_at + run.delay_ms
        run.broker_lag.append(msg.store_timestamp - due)
        run.consumer_lag.append(at - due)
        times.append(msg.store_timestamp)
    if times:
        run.drain_s = (max(times) - min(times)) / 1000
    return run


async def queues_of(consumer: LitePullConsumer, topic: str, timeout_s: float = 30.0) -> list:
    """The topic's queues, once the broker has registered the topic the warm-up send created."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await consumer.fetch_message_queues(topic)
        except MQClientError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def send_delayed(producer: Producer, topic: str, count: int, level: int, run: Run) -> list[SendResult]:
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> SendResult:
        msg = Message(topic, b"delayed-%d" % i, keys=f"k{i}")
        msg.delay_time_level = level
        async with slots:
            while True:
                try:
                    return await producer.send(msg)
                except (MQBrokerError, MQClientError):  # a busy broker's flow control: the same message again
                    run.send_retries += 1
                    await asyncio.sleep(0.1)

    start = time.monotonic()
    results = await asyncio.gather(*(one(i) for i in range(count)))
    run.send_s = time.monotonic() - start
    return list(results)


async def read(consumer: LitePullConsumer, received: list[tuple[int, MessageExt]], count: int) -> None:
    while len(received) < count:
        for msg in await consumer.poll(1000):
            received.append((time.time_ns() // 1_000_000, msg))


def store_times(offset_msg_ids: list[str]) -> list[int]:
    """The store time of each scheduled record, read back from the broker by its offsetMsgId."""
    out = []
    clients: dict[str, BlockingRemotingClient] = {}
    try:
        for msg_id in offset_msg_ids:
            host, offset = decode_offset_msg_id(msg_id)
            addr = format_host(host)
            client = clients.get(addr) or clients.setdefault(addr, BlockingRemotingClient(addr))
            response = client.invoke(create_request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                    ViewMessageRequestHeader(offset=offset).to_ext()))
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"VIEW_MESSAGE_BY_ID {msg_id}: {response.code} {response.remark}")
            out.append(decode_record(response.body, body=False).store_timestamp)
    finally:
        for client in clients.values():
            client.close()
    return out


def percentile(values: list[int], p: int) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def report(runs: list[Run]) -> None:
    head = ["target", "messages", "delay s", "send s"]
    head += [f"broker lag p{p} ms" for p in PERCENTILES] + [f"consumer lag p{p} ms" for p in PERCENTILES]
    head += ["mean consumer lag ms", "drain s", "deliver msg/s", "missing", "duplicates", "send retries"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in runs:
        row = [r.target, f"{r.count:,}", f"{r.delay_ms / 1000:g}", f"{r.send_s:.2f}"]
        row += [str(percentile(r.broker_lag, p)) if r.broker_lag else "-" for p in PERCENTILES]
        row += [str(percentile(r.consumer_lag, p)) if r.consumer_lag else "-" for p in PERCENTILES]
        row.append(f"{statistics.fmean(r.consumer_lag):.0f}" if r.consumer_lag else "-")
        row += [f"{r.drain_s:.2f}", f"{len(r.broker_lag) / r.drain_s:,.0f}" if r.drain_s else "-"]
        row += [str(r.missing), str(r.duplicates), str(r.send_retries)]
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--level", type=int, default=4, help="delay level (default table: 4 is 30 s)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the client's warnings (a busy broker's flow control) are noise here
    print(f"# delay_lag: {args.count:,} messages at level {args.level}, {platform.python_version()}, "
          f"{platform.machine()}, load {Path('/proc/loadavg').read_text().split()[0]}", flush=True)
    runs = []
    with tempfile.TemporaryDirectory(prefix="delay-lag-") as work:
        for rep in range(args.repeat):
            for target in args.targets:
                # On a loaded machine Apache's broker refuses sends waiting over 200 ms for its send threads
                # (TIMEOUT_CLEAN_QUEUE); let them wait, so the sends finish well within the delay.
                with running_target(target, Path(work) / f"{target}-{rep}", BROKER_CONF,
                                    apache_conf={"waitTimeMillsInSendQueue": 5000},
                                    apache_jvm_args=APACHE_BROKER_JVM_ARGS) as namesrv_addr:
                    run = asyncio.run(measure(target, namesrv_addr, args.count, args.level))
                print(f"# {target}: sent in {run.send_s:.2f} s, {len(run.broker_lag):,} delivered", flush=True)
                runs.append(run)
    report(runs)


if __name__ == "__main__":
    main()
