"""Replication: a master and its slave, ours against Apache RocketMQ's (5.5.0), measured in the same run.

For each target and role, a NameServer, a master and a slave start fresh (one pair at a time, so they do not compete
for the cores), and N concurrent asyncio send loops of our ``Producer`` send 1 KB messages for ``--seconds``:

- **ASYNC_MASTER**: the master answers at once; the slave follows behind.
- **SYNC_MASTER**: the master answers once the slave holds the message. Apache 5.x waits only with
  ``inSyncReplicas=2`` (with the default 1 it answers at once), so its SYNC_MASTER pair is given that; ours always
  waits for one slave.

Columns: **send msg/s**, **p50/p99 ms** (per send, from the client), **lag MB max/avg** (the master's CommitLog end
minus the slave's, sampled every 100 ms through GET_BROKER_RUNTIME_INFO while sending), and **ours/apache** (send
msg/s, same run). Then **catch-up** (on the first role's pair, ASYNC_MASTER by default): the slave is stopped, the
master takes ``--catch-up-mb`` MB, the slave restarts and the time until it holds the master's whole CommitLog gives
MB/s, beside this disk's own sequential write speed (the same amount written and fsynced). Nothing here asserts on
time.

Examples
--------
    python bench/replication.py                         # both targets, both roles, 10 s each, catch-up of 1 GiB
    python bench/replication.py --quick                 # 2 s each, catch-up of 64 MB
    python bench/replication.py --targets ours --roles SYNC_MASTER
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))  # run as a script from anywhere without installing the package

from broker_throughput import APACHE_BROKER_JVM_ARGS  # noqa: E402

from broker.client import Message, Producer  # noqa: E402
from broker.common.errors import BrokerSystemError, RmqError  # noqa: E402
from tests.apache import start_apache_broker, start_apache_namesrv  # noqa: E402
from tests.integration import cluster  # noqa: E402
from tests.integration.replication import max_offset  # noqa: E402

REFERENCE = "apache"
TARGETS = ("ours", "apache")
ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
FILE_SIZE = 1024 * 1024 * 1024  # both brokers' default CommitLog file
BODY = b"x" * 1024
CATCH_UP_BATCH = 16
CATCH_UP_BODY = os.urandom(64 * 1024)


@dataclass
class Pair:
    namesrv_addr: str
    master: object
    slave: object
    restart_slave: Callable[[], object]


@dataclass
class Result:
    send_mps: float
    p50_ms: float
    p99_ms: float
    lag_max_mb: float
    lag_avg_mb: float


@contextmanager
def pair(target: str, role: str, home: Path) -> Iterator[Pair]:
    """A NameServer, a master in ``role`` and its slave, all fresh under ``home``."""
    with ExitStack() as stack:
        if target == "ours":
            namesrv = stack.enter_context(cluster.start_namesrv(home / "namesrv"))
            master = stack.enter_context(cluster.start_broker(home / "master", namesrv.addr, brokerRole=role,
                                                              mappedFileSizeCommitLog=FILE_SIZE))

            def start_slave() -> object:
                return cluster.start_broker(home / "slave", namesrv.addr, brokerId=1, brokerRole="SLAVE",
                                            mappedFileSizeCommitLog=FILE_SIZE,
                                            haMasterAddress=f"127.0.0.1:{master.port + 1}")
        else:
            extra = {"inSyncReplicas": 2} if role == "SYNC_MASTER" else {}
            namesrv = stack.enter_context(start_apache_namesrv(home / "namesrv"))
            master = stack.enter_context(start_apache_broker(home / "master", namesrv, brokerRole=role,
                                                             mappedFileSizeCommitLog=FILE_SIZE,
                                                             jvm_args=APACHE_BROKER_JVM_ARGS, **extra))

            def start_slave() -> object:  # Apache 5.5's slave ignores haMasterAddress: it asks the NameServer
                return start_apache_broker(home / "slave", namesrv, brokerId=1, brokerRole="SLAVE",
                                           mappedFileSizeCommitLog=FILE_SIZE, jvm_args=APACHE_BROKER_JVM_ARGS)
        slaves = [start_slave()]
        stack.callback(lambda: slaves[-1].close())

        def restart_slave() -> object:
            slaves[-1].close()
            slaves.append(start_slave())
            return slaves[-1]

        yield Pair(namesrv.addr, master, slaves[0], restart_slave)


def slave_offset(p: Pair) -> int:
    """The slave's CommitLog end; 0 while a young Apache broker answers its stats with SYSTEM_ERROR."""
    try:
        return max_offset(p.slave)
    except BrokerSystemError:
        return 0


def wait_caught_up(p: Pair, timeout_s: float = 600) -> float:
    deadline = time.monotonic() + timeout_s
    while slave_offset(p) < max_offset(p.master):
        if time.monotonic() > deadline:
            raise TimeoutError("the slave did not catch up")
        time.sleep(0.05)
    return time.monotonic()


class LagSampler(threading.Thread):
    """Samples master end - slave end every 100 ms until stopped."""

    def __init__(self, p: Pair) -> None:
        super().__init__(daemon=True)
        self.pair, self.samples, self.stop = p, [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                self.samples.append(max(0, max_offset(self.pair.master) - max_offset(self.pair.slave)))
            except Exception:  # noqa: BLE001 - a sample lost to a slow answer is just not counted
                pass


async def send_for(namesrv_addr: str, topic: str, seconds: float, concurrency: int) -> tuple[int, list[float]]:
    latencies: list[float] = []
    stop = 0.0

    async def loop(producer: Producer) -> None:
        while time.monotonic() < stop:
            begin = time.perf_counter()
            result = await producer.send(Message(topic, BODY))
            if result.send_status.name == "SEND_OK":
                latencies.append(time.perf_counter() - begin)

    async with Producer(f"{topic}_producer", namesrv_addr) as producer:
        # The route and the topic; and until a SYNC_MASTER's slave is connected (Apache's asks the NameServer
        # first), a send may wait out slaveTimeout: the case starts once one returns SEND_OK.
        deadline = time.monotonic() + 120
        while True:
            try:
                if (await producer.send(Message(topic, BODY))).send_status.name == "SEND_OK":
                    break
            except RmqError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the pair never acknowledged a send")
        stop = time.monotonic() + seconds
        await asyncio.gather(*(loop(producer) for _ in range(concurrency)))
    return len(latencies), latencies


def measure(p: Pair, args: argparse.Namespace) -> Result:
    asyncio.run(send_for(p.namesrv_addr, "ReplicationBench", args.warmup, args.concurrency))
    sampler = LagSampler(p)
    sampler.start()
    sent, latencies = asyncio.run(send_for(p.namesrv_addr, "ReplicationBench", args.seconds, args.concurrency))
    sampler.stop.set()
    sampler.join()
    latencies.sort()
    lag = sampler.samples or [0]
    return Result(sent / args.seconds, latencies[len(latencies) // 2] * 1000,
                  latencies[int(len(latencies) * 0.99)] * 1000, max(lag) / 2**20, statistics.fmean(lag) / 2**20)


async def fill(namesrv_addr: str, megabytes: int) -> None:
    """About ``megabytes`` MB more on the master, in batches of 64 KB messages."""
    batches = megabytes * 2**20 // (CATCH_UP_BATCH * len(CATCH_UP_BODY)) + 1
    async with Producer("replication_bench_fill", namesrv_addr) as producer:
        for _ in range(batches):
            await producer.send_batch([Message("ReplicationFill", CATCH_UP_BODY) for _ in range(CATCH_UP_BATCH)])


def catch_up(p: Pair, megabytes: int) -> float:
    """MB/s of a restarted slave catching up ``megabytes`` MB."""
    p.slave.kill()
    before = max_offset(p.master)
    asyncio.run(fill(p.namesrv_addr, megabytes))
    end = max_offset(p.master)
    p.slave = p.restart_slave()
    begin, start = time.monotonic(), slave_offset(p)  # from the slave's boot on: what it copied since
    done = wait_caught_up(p)
    if end - start < (end - before) // 2:
        print(f"catch-up: the slave copied {(end - before - (end - start)) / 2**20:.0f} MB while booting; "
              f"use a larger --catch-up-mb", flush=True)
    return (end - start) / 2**20 / (done - begin)


def disk_write_mbps(directory: Path, megabytes: int) -> float:
    """Sequential write of ``megabytes`` MB in 1 MB blocks, fsynced: the disk's own speed for the catch-up."""
    block = os.urandom(2**20)
    path = directory / "disk-speed"
    begin = time.monotonic()
    with open(path, "wb") as f:
        for _ in range(megabytes):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.monotonic() - begin
    path.unlink()
    return megabytes / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--roles", nargs="+", choices=ROLES, default=list(ROLES))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--catch-up-mb", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="2 s per case, catch-up of 64 MB")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.catch_up_mb = 2.0, 1.0, 64
    results: dict[tuple[str, str], Result] = {}
    catch: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rmq-replication-bench-") as tmp:
        for role in args.roles:
            for target in args.targets:
                with pair(target, role, Path(tmp) / f"{target}-{role}") as p:
                    results[target, role] = measure(p, args)
                    print(f"{target:7} {role:12} {results[target, role]}", flush=True)
                    if role == args.roles[0] and args.catch_up_mb:  # ASYNC first: a lone SYNC master refuses
                        catch[target] = catch_up(p, args.catch_up_mb)
                        print(f"{target:7} catch-up {catch[target]:,.0f} MB/s", flush=True)
        disk = disk_write_mbps(Path(tmp), args.catch_up_mb) if catch else 0.0
    print(f"\n{'target':8} {'role':13} {'send msg/s':>11} {'p50 ms':>7} {'p99 ms':>7} {'lag MB max':>10} "
          f"{'lag MB avg':>10} {'ours/apache':>11}")
    for (target, role), r in results.items():
        ref = results.get((REFERENCE, role))
        ratio = f"{r.send_mps / ref.send_mps:.2f}" if ref and target != REFERENCE else ""
        print(f"{target:8} {role:13} {r.send_mps:11,.0f} {r.p50_ms:7.2f} {r.p99_ms:7.2f} {r.lag_max_mb:10.2f} "
              f"{r.lag_avg_mb:10.2f} {ratio:>11}")
    for target, mbps in catch.items():
        print(f"catch-up {target}: {mbps:,.0f} MB/s for {args.catch_up_mb} MB (this disk writes {disk:,.0f} MB/s "
              f"sequentially, fsynced)")


if __name__ == "__main__":
    main()
