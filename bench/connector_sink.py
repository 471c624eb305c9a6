"""Spark sink throughput: ``df.write.format("rmq")`` (exactly once: a half message per row, the decision, an
END_TRANSACTION per row) beside ``df.write.format("noop")`` on the same cached DataFrame, in the same run.

For each target (our broker; Apache RocketMQ 5.5.0's with ``--targets apache``), one cluster at a time: a local Spark
session (``--master``, default local[2]) writes ``--rows`` rows of ``--size``-byte bodies in ``--partitions`` tasks,
first to noop, then to rmq (repeated ``--repeat`` times, best kept). Printed: rows/s of each and rmq / noop. With
``--profile DIR`` the executors' Python workers run under cProfile (spark.python.profile) and the top entries are
printed. Nothing here asserts on time.

Examples
--------
    python bench/connector_sink.py                          # 20,000 rows of 128 B, ours
    python bench/connector_sink.py --rows 5000 --targets ours apache
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.targets import TARGETS, running_target  # noqa: E402


def timed(action: object) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def stop_resolvers(resolver_dir: Path) -> None:
    """End the resolvers the sink started with ``resolverDir=resolver_dir`` (their pid files say which)."""
    for pid_file in resolver_dir.glob("*.pid"):
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text().split(" ")[0]), signal.SIGTERM)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=["ours"])
    parser.add_argument("--profile", default=None, help="dump the Python workers' cProfile stats here")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from connector import register

    builder = (SparkSession.builder.appName("bench-connector-sink").master(args.master)
               .config("spark.ui.enabled", "false"))
    if args.profile:
        builder = builder.config("spark.python.profile", "true").config("spark.python.profile.dump", args.profile)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    pad = "x" * max(0, args.size - 12)
    df = (spark.range(args.rows, numPartitions=args.partitions)
          .selectExpr(f"concat(lpad(cast(id as string), 12, '0'), '{pad}') as body").cache())
    df.count()
    print(f"# {platform.machine()} {platform.python_version()} pyspark {spark.version}; {args.rows:,} rows of "
          f"{args.size} B in {args.partitions} tasks, master {args.master}, maxInFlight {args.max_in_flight}")
    print("| target | noop rows/s | rmq rows/s | rmq / noop |")
    print("|---|---|---|---|")
    for target in args.targets:
        with tempfile.TemporaryDirectory(prefix=f"bench-sink-{target}-") as tmp, \
                running_target(target, Path(tmp)) as namesrv:
            options = {"namesrvAddr": namesrv, "topic": "BenchSink", "resolverDir": str(Path(tmp) / "resolvers"),
                       "resolverIdleTimeoutSeconds": "30", "maxInFlight": str(args.max_in_flight)}
            df.limit(10).write.format("rmq").options(**options).mode("append").save()  # topic, resolver, warm-up
            noop = min(timed(lambda: df.write.format("noop").mode("overwrite").save()) for _ in range(args.repeat))
            writer = df.write.format("rmq").options(**options).mode("append")
            rmq = min(timed(writer.save) for _ in range(args.repeat))
            print(f"| {target} | {args.rows / noop:,.0f} | {args.rows / rmq:,.0f} | {noop / rmq:.3f} |", flush=True)
            stop_resolvers(Path(tmp) / "resolvers")
    if args.profile:
        spark.sparkContext.show_profiles()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
