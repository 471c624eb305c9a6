"""Transactional send throughput (half message + END_TRANSACTION commit) beside plain sends, in the same run.

For each target (our broker, and Apache RocketMQ 5.5.0's for reference), one cluster at a time so they do not
compete for the cores: our asyncio Producer sends ``--seconds`` of plain messages with ``--concurrency`` sends in
flight, then our TransactionProducer sends the same way with a listener that commits at once (so every message is a
half put, an END_TRANSACTION, a committed put and an op record). Printed: msg/s of each, the ratio transactional /
plain on that broker, and ours / Apache's for each kind. Nothing here asserts on time.

Examples
--------
    python bench/transaction_throughput.py                    # 10 s each, 16 in flight, ours and apache
    python bench/transaction_throughput.py --targets ours --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.targets import TARGETS, running_target  # noqa: E402
from broker.client import (  # noqa: E402
    LocalTransactionState,
    Message,
    Producer,
    TransactionProducer,
)

TOPIC = "BenchTx"


class CommitAtOnce:
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def send_for(producer: Producer, send, seconds: float, concurrency: int, size: int) -> int:
    """Messages acknowledged in ``seconds`` with ``concurrency`` sends in flight."""
    body = b"x" * size
    deadline = time.monotonic() + seconds
    sent = 0

    async def worker() -> None:
        nonlocal sent
        while time.monotonic() < deadline:
            await send(Message(TOPIC, body, keys=f"k{sent}"))
            sent += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent


async def measure(namesrv: str, seconds: float, concurrency: int, size: int) -> tuple[float, float]:
    async with Producer("bench_plain", namesrv) as plain:
        await plain.send(Message(TOPIC, b"warm-up"))  # creates the topic and the route
        started = time.monotonic()
        plain_count = await send_for(plain, plain.send, seconds, concurrency, size)
        plain_rate = plain_count / (time.monotonic() - started)
    async with TransactionProducer("bench_tx", namesrv, listener=CommitAtOnce()) as tx:
        started = time.monotonic()
        tx_count = await send_for(tx, tx.send_message_in_transaction, seconds, concurrency, size)
        tx_rate = tx_count / (time.monotonic() - started)
    return plain_rate, tx_rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--size", type=int, default=128, help="body bytes")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    print(f"# {platform.machine()}, python {platform.python_version()}, {args.seconds:.0f} s per case, "
          f"{args.concurrency} in flight, {args.size} B bodies, our Python client")
    results: dict[str, tuple[float, float]] = {}
    for target in targets:
        with tempfile.TemporaryDirectory(prefix=f"rmq-bench-tx-{target}-") as home:
            with running_target(target, Path(home)) as namesrv:
                results[target] = asyncio.run(measure(namesrv, args.seconds, args.concurrency, args.size))
    print(f"{'target':<8} {'plain msg/s':>12} {'tx msg/s':>10} {'tx/plain':>9}")
    for target, (plain, tx) in results.items():
        print(f"{target:<8} {plain:>12,.0f} {tx:>10,.0f} {tx / plain:>9.2f}")
    if {"ours", "apache"} <= results.keys():
        (op, ot), (ap, at) = results["ours"], results["apache"]
        print(f"ours/apache: plain {op / ap:.2f}, transactional {ot / at:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
