"""Where the start of an ``rmq`` streaming query goes: our driver-side calls, one by one, beside the whole query.

One NameServer and one of our brokers (as bench/connector_source.py starts them), one topic of 8 queues with
``--rows`` messages of 1 KB. Then, ``--repeat`` times each:

- **calls** (no Spark): a fresh Python process does what Spark's ``python_streaming_source_runner`` asks of our
  source for a fresh Trigger.AvailableNow query, in its order (unpickle the data source, ``streamReader``,
  ``getDefaultReadLimit``, ``prepareForTriggerAvailableNow``, ``initialOffset``, ``latestOffset``,
  ``partitions``, ``reportLatestOffset``, the next ``latestOffset``, ``stop``), and prints the milliseconds and the
  broker/NameServer round trips of each; ``runner imports`` is what the runner imports of pyspark before it calls
  us (from ``pyspark.zip``, as Spark starts it), Spark's share.
- **query**: the AvailableNow query into noop in a local Spark session (bench/spark_vs_kafka.py's ``run_stream``):
  seconds to its first trigger, to the end of its first batch, the whole query, and the first trigger's
  ``durationMs`` as Spark reports it.

Examples
--------
    python bench/source_start.py --rows 200000 --repeat 3
    python bench/source_start.py --rows 200000 --repeat 1 --skip-query    # our calls only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.connector_source import QUEUES, TOPIC, fill, start_servers  # noqa: E402
from bench.spark_vs_kafka import load_line, run_stream  # noqa: E402

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
LOAD_WORKER = "pyspark.sql.worker.create_data_source"  # the process that answers schema() at load()
RUNNER_IMPORTS = f"import {RUNNER}"


def calls(pickled: bytes) -> dict[str, tuple[float, float, int]]:
    """Our source's calls for a fresh AvailableNow query, in Spark's order, {call: (ms, CPU ms, round trips)}:
    ``load()``'s (the data source unpickled and asked its schema, in a process of its own) in one fresh process, the
    streaming runner's in another, so each counts the imports it triggers where Spark's processes would."""
    import importlib
    import pickle

    load = os.environ.get("RMQ_BENCH_PART") == "load"
    began = time.perf_counter()
    importlib.import_module(LOAD_WORKER if load else RUNNER)  # what Spark's process has imported before it calls us
    result: dict[str, tuple[float, float, int]] = {
        "(Spark's imports, in process)": ((time.perf_counter() - began) * 1000, time.process_time() * 1000, 0)}
    trips = [0]

    def step(name: str, action):
        before, start, cpu = trips[0], time.perf_counter(), time.process_time()
        value = action()
        result[name] = ((time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000, trips[0] - before)
        return value

    source = step("unpickle the data source", lambda: pickle.loads(pickled))
    if load:
        step("load(): schema", source.schema)
        return result
    schema = _schema()
    reader = step("streamReader", lambda: source.streamReader(schema))
    _count_round_trips(trips)  # from here on (nothing before talks to a peer; its imports stay streamReader's)
    limit = step("getDefaultReadLimit", reader.getDefaultReadLimit)
    step("prepareForTriggerAvailableNow", reader.prepareForTriggerAvailableNow)
    start = step("initialOffset", reader.initialOffset)
    end = step("latestOffset", lambda: reader.latestOffset(start, limit))
    step("partitions", lambda: reader.partitions(start, end))
    step("reportLatestOffset", reader.reportLatestOffset)
    step("latestOffset (the next trigger)", lambda: reader.latestOffset(end, limit))
    step("stop", reader.stop)
    return result


def _count_round_trips(trips: list[int]) -> None:
    """Count the waits for a peer: an ``invoke``, or a burst of ``send``s answered together (their ``receive``s)."""
    from broker.client.blocking_remoting import BlockingRemotingClient

    invoke, send, receive = BlockingRemotingClient.invoke, BlockingRemotingClient.send, BlockingRemotingClient.receive
    pending = [0]

    def counted_invoke(self, *args, **kwargs):
        trips[0] += 1
        return invoke(self, *args, **kwargs)

    def counted_send(self, *args, **kwargs):
        if pending[0] == 0:
            trips[0] += 1
        pending[0] += 1
        return send(self, *args, **kwargs)

    def counted_receive(self, *args, **kwargs):
        pending[0] -= 1
        return receive(self, *args, **kwargs)

    BlockingRemotingClient.invoke = counted_invoke
    BlockingRemotingClient.send = counted_send
    BlockingRemotingClient.receive = counted_receive


def _schema():
    """The schema the JVM hands the runner (it has it from ``load()``), without importing our modules here."""
    from pyspark.sql.types import StructType

    return StructType()


def run_calls(namesrv: str) -> dict[str, tuple[float, float, int]]:
    import base64
    import pickle

    from connector.datasource import RmqDataSource

    pickled = pickle.dumps(RmqDataSource({"namesrvAddr": namesrv, "topic": TOPIC, "startingOffsets": "earliest"}))
    code = (f"import base64, json, sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
            "from bench.source_start import calls; "
            f"print(json.dumps(calls(base64.b64decode({base64.b64encode(pickled).decode()!r}))))")
    result = {}
    for part in ("load", "runner"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "RMQ_BENCH_PART": part})
        answers = json.loads(done.stdout.strip().splitlines()[-1])
        result.update({f"{part}: {k}": v for k, v in answers.items()})
    return result


def runner_imports_ms() -> float:
    """What Spark's streaming source runner imports before it calls a source, from pyspark.zip as Spark starts it."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(lib.glob("*.zip")) if lib.is_dir() else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, zips))} if zips else dict(os.environ)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUNNER_IMPORTS], env=env, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-query", action="store_true")
    args = parser.parse_args()

    print(f"# start: {load_line()} (a shared machine)", flush=True)
    home = Path(tempfile.mkdtemp(prefix="rmq-bench-start-"))
    namesrv, closers, _ = start_servers("ours", home / "rmq", 1024)
    try:
        from tests.connector.conftest import create_topic

        create_topic(namesrv, TOPIC, QUEUES)
        fill(namesrv, args.rows, args.body, 2)
        runs = [run_calls(namesrv) for _ in range(args.repeat)]
        print(f"\nour calls, fresh processes, median of {args.repeat}")
        print("| call | ms | CPU ms | round trips |")
        print("|---|---|---|---|")
        for name in runs[0]:
            wall = sorted(run[name][0] for run in runs)[len(runs) // 2]
            cpu = sorted(run[name][1] for run in runs)[len(runs) // 2]
            print(f"| {name} | {wall:.1f} | {cpu:.1f} | {runs[0][name][2]} |")
        imports = sorted(runner_imports_ms() for _ in range(args.repeat))
        print(f"| (Spark's) runner process: python start + its imports from pyspark.zip | "
              f"{imports[len(imports) // 2]:.0f} | | |")
        if not args.skip_query:
            query(args, home, namesrv)
    finally:
        for close in closers:
            close()
        shutil.rmtree(home, ignore_errors=True)
    print(f"# end: {load_line()}")
    return 0


def query(args: argparse.Namespace, home: Path, namesrv: str) -> None:
    from jobs.spark import build_session

    spark = build_session("bench-source-start", master=args.master, jvm_log=home / "spark.log")
    opts = {"namesrvAddr": namesrv, "topic": TOPIC, "startingOffsets": "earliest", "pullBatchSize": "1024"}
    print(f"\nAvailableNow query of {args.rows:,} x {args.body} B into noop (s)")
    print("| run | load | start (to 1st trigger) | first batch done | whole | 1st trigger durationMs |")
    print("|---|---|---|---|---|---|")
    for n in range(args.repeat + 1):  # run 0 warms the JVM up (class loading, the first Python workers)
        load = os.getloadavg()[0]
        run = run_stream(lambda: spark.readStream.format("rmq").options(**opts).load(), home / f"cp-{n}")
        if run.rows != args.rows:
            raise SystemExit(f"read {run.rows} rows, not {args.rows}")
        label = "warm-up" if n == 0 else str(n)
        print(f"| {label} | {load:.1f} | {run.start:.2f} | {run.first_batch:.2f} | {run.whole:.2f} "
              f"| {json.dumps(run.first_durations)} |", flush=True)
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
