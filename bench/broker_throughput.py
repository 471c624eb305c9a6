"""Broker throughput: send and consume TPS of our broker against Apache RocketMQ's, measured in the same run.

Each broker under test runs with its own NameServer: Apache's NamesrvStartup + BrokerStartup (5.5.0), or our
``python -m broker.namesrv`` + ``python -m broker``. Only one pair runs at a time, so they do not compete for the
cores. Both use the same settings: ASYNC_FLUSH, 1 GiB CommitLog files (the default), long polling, and one topic of
8 queues per case.

Load comes from two clients:
- **java**: the official Java client, through ``tests/java/bench/BenchClient.java``. It is shaped like RocketMQ's own
  benchmark Producer / BatchProducer / Consumer: N threads of synchronous sends, SEND_MESSAGE_V2
  (``-Dorg.apache.rocketmq.client.sendSmartMsg=true``, as producer.sh), ROCKETMQ headers. The consume pass is a
  push consumer (20 threads) that reads the case's topic from the first offset.
- **python**: our asyncio ``Producer`` (N concurrent sends, in this process) and ``LitePullConsumer``.

Before its cases each broker gets ``--broker-warmup`` seconds of untimed Java sends and a consume pass (the JVM
compiles its hot paths, both brokers touch their first pages). Cases are body size (128 B, 1 KB) x (single sends,
batches of 16). For each case the client warms up for ``--warmup`` seconds, and then ``--seconds`` are measured.
The consume pass then reads every message of the case.

Columns:
- **send msg/s**: messages stored per second in the measured window (for a batch: messages, not requests).
- **RT**: average and maximum round trip per request (one batch is one request).
- **CPU us/msg**: the broker's CPU time (user + system; its process and the processes it started, i.e. our dispatch
  process) over the whole produce run, warm-up included, divided by the messages it stored. This moves much less
  than msg/s when the machine is shared.
- **consume msg/s**: messages per second, from the first message received to the last.
- **consume CPU us/msg**: the broker's CPU time over the consume pass divided by the messages read.
- **ours/apache**: the ratio, measured in the same run.

Nothing here asserts on time. ``--profile DIR`` also records our broker with py-spy during each produce case and
consume pass of the Java client (collapsed stacks in DIR, and a top-functions summary printed). ``ours-asyncio`` runs
our broker on the standard asyncio loop (``RMQ_EVENT_LOOP=asyncio``), for comparison with the default uvloop.

Examples
--------
    python bench/broker_throughput.py                        # all cases, 10 s each, ours vs apache
    python bench/broker_throughput.py --quick                # smoke run: 128 B only, 1.5 s each
    python bench/broker_throughput.py --targets ours ours-asyncio apache --repeat 2
    python bench/broker_throughput.py --clients java --sizes 128 --profile /tmp/prof --targets ours
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from broker.client import LitePullConfig, LitePullConsumer, Message, Producer  # noqa: E402
from broker.client.offsets import ConsumeFromWhere  # noqa: E402
from tests.apache import ApacheClient, apache_artifact, apache_client, start_apache_broker, start_apache_namesrv  # noqa: E402
from tests.integration import cluster  # noqa: E402
from tests.javatools import JavaProgram, build_program  # noqa: E402

QUEUES = 8
COMMIT_LOG_FILE_SIZE = 1024 * 1024 * 1024  # both brokers' default
REFERENCE = "apache"
TARGETS = ("ours", "ours-asyncio", "apache")
CLIENT_JVM_ARGS = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Dorg.apache.rocketmq.client.sendSmartMsg=true")
# tests/apache/ starts servers for fast boots (C1 only, SerialGC, 256 MB): undo that for a throughput run,
# closer to runbroker.sh (G1, C2). Later -XX flags win over earlier ones.
APACHE_BROKER_JVM_ARGS = ("-XX:TieredStopAtLevel=4", "-XX:-UseSerialGC", "-XX:+UseG1GC", "-Xms2g", "-Xmx2g")
OUR_BROKER = ("-m", "broker")
CLIENT_TIMEOUT_S = 300.0
PY_SPY_RATE = 200  # samples per second
TOP_FUNCTIONS = 15


@dataclass(frozen=True, slots=True)
class Case:
    client: str  # "java" or "python"
    size: int
    batch: int  # 1: one message per send

    @property
    def label(self) -> str:
        mode = "sync" if self.batch == 1 else f"batch {self.batch}"
        return f"{self.client} {self.size} B {mode}"

    @property
    def slug(self) -> str:
        return f"{self.client}_{self.size}_b{self.batch}"


@dataclass(slots=True)
class Result:
    send_mps: float = 0.0
    avg_rt_ms: float = 0.0
    max_rt_ms: float = 0.0
    failed: int = 0
    total: int = 0  # messages stored, warm-up included: what the consume pass must read
    cpu_us_per_msg: float = 0.0
    consume_mps: float = 0.0
    consumed: int = 0
    consume_cpu_us_per_msg: float = 0.0  # the broker's CPU over the consume pass, per message read


@dataclass(slots=True)
class Settings:
    seconds: float
    warmup: float
    threads: int
    consume_seconds: float
    commit_log_size: int
    broker_warmup: float
    work: Path
    profile: Path | None = None
    thread_cpu: bool = False
    java: JavaProgram | None = None
    admin: ApacheClient | None = None
    results: dict[tuple[str, Case], list[Result]] = field(default_factory=dict)


# -- brokers ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Running:
    target: str
    namesrv_addr: str
    broker_pid: int


@contextlib.contextmanager
def running_target(target: str, home: Path, settings: Settings) -> Iterator[Running]:
    """A NameServer and a broker of ``target``, stopped on exit."""
    home.mkdir(parents=True, exist_ok=True)
    if target == REFERENCE:
        with start_apache_namesrv(home) as namesrv, start_apache_broker(
            home, namesrv, home / "store", jvm_args=APACHE_BROKER_JVM_ARGS,
            mappedFileSizeCommitLog=settings.commit_log_size, defaultTopicQueueNums=QUEUES,
        ) as broker:
            yield Running(target, namesrv.addr, broker.popen.pid)
        return
    with cluster.start_namesrv(home / "namesrv") as namesrv, cluster.start_broker(
        home / "broker", namesrv.addr, env={"RMQ_EVENT_LOOP": "asyncio" if target == "ours-asyncio" else "uvloop"},
        mappedFileSizeCommitLog=settings.commit_log_size, defaultTopicQueueNums=QUEUES,
    ) as broker:
        yield Running(target, namesrv.addr, broker.popen.pid)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a broker: its process and the processes it started (ours runs dispatch in a
    child process, dispatchMode=PROCESS; Apache's threads are all in its one process) (Linux /proc)."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = [Path(task, "children").read_text().split() for task in Path(f"/proc/{current}/task").iterdir()]
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        pending += [int(child) for task_children in children for child in task_children]
    return total


def thread_cpu(pid: int) -> dict[str, list[float]]:
    """CPU seconds (user, system) and minor page faults so far of a broker, by thread group: the main thread,
    the other threads of the broker process (by name: Java names its threads, Python 3.11 does not), and each
    child process (ours: dispatch) (Linux /proc). ``--thread-cpu`` prints the difference per message and case."""
    tick = os.sysconf("SC_CLK_TCK")
    groups: dict[str, list[float]] = {}
    pending = [(pid, "")]
    while pending:
        current, prefix = pending.pop()
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
                children = (task / "children").read_text().split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            name = prefix + ("main" if task.name == str(current) else f"thread {comm}")
            row = groups.setdefault(name, [0.0, 0.0, 0.0])
            row[0] += int(fields[11]) / tick
            row[1] += int(fields[12]) / tick
            row[2] += int(fields[7])
            pending += [(int(child), f"child {child} ") for child in children]
    return groups


def machine_cpu() -> list[float]:
    """The machine's CPU seconds so far (all cores): user (with nice), system, irq + softirq (loopback TCP is mostly
    softirq, charged to no process), idle (with iowait) (Linux /proc/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq = map(int, Path("/proc/stat").read_text().split()[1:8])
    return [(user + nice) / tick, system / tick, (irq + softirq) / tick, (idle + iowait) / tick]


def thread_cpu_report(before: dict[str, list[float]], after: dict[str, list[float]], messages: int) -> str:
    """Per message: user and system CPU us, and minor faults, of each thread group that used any CPU."""
    lines = []
    per = max(1, messages)
    for name, (user, system, faults) in sorted(after.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        old = before.get(name, [0.0, 0.0, 0.0])
        du, ds, df = user - old[0], system - old[1], faults - old[2]
        if du + ds <= 0:
            continue
        lines.append(f"    {name:32} user {du * 1e6 / per:7.1f}  sys {ds * 1e6 / per:7.1f} us/msg  "
                     f"minflt {df / per:6.3f}/msg")
    return "\n".join(lines)


# -- the Java client --------------------------------------------------------------------------------------------------


def java_program(log_root: Path) -> JavaProgram:
    jvm_args = (*CLIENT_JVM_ARGS, f"-Duser.home={log_root}", f"-Drocketmq.log.root={log_root / 'logs'}")
    return build_program("bench", "BenchClient", [apache_artifact("rocketmq-client")], jvm_args=jvm_args)


def run_java(program: JavaProgram, *args: object) -> dict:
    done = program.run(*map(str, args), timeout=CLIENT_TIMEOUT_S, check=True)
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"BenchClient {args[0]} printed no result:\n{done.stderr.decode(errors='replace')[-3000:]}")
    return json.loads(lines[-1])


def java_case(settings: Settings, running: Running, case: Case, topic: str) -> Result:
    assert settings.java is not None
    produce = (settings.java, "produce", "--namesrv", running.namesrv_addr, "--topic", topic,
               "--threads", settings.threads, "--size", case.size, "--batch", case.batch,
               "--seconds", settings.seconds, "--warmup", settings.warmup)
    cpu_before = cpu_seconds(running.broker_pid)
    threads_before = thread_cpu(running.broker_pid) if settings.thread_cpu else {}
    machine_before, client_before = machine_cpu(), os.times()
    with profiling(settings, running, case):
        sent = run_java(*produce)
    machine_used = [after - before for after, before in zip(machine_cpu(), machine_before, strict=True)]
    client_after = os.times()
    result = Result(send_mps=sent["sendMps"], avg_rt_ms=sent["avgRtMs"], max_rt_ms=sent["maxRtMs"],
                    failed=sent["failedTotal"], total=sent["total"])
    result.cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.total)
    if settings.thread_cpu:
        per = 1e6 / max(1, result.total)
        client = (client_after.children_user + client_after.children_system - client_before.children_user
                  - client_before.children_system)
        print(f"  {running.target} {case.label}, by thread:\n"
              f"{thread_cpu_report(threads_before, thread_cpu(running.broker_pid), result.total)}\n"
              f"    Java client (whole run)          {client * per:7.1f} us/msg\n"
              f"    machine: user {machine_used[0] * per:7.1f}  sys {machine_used[1] * per:7.1f}  irq+softirq "
              f"{machine_used[2] * per:7.1f}  idle {machine_used[3] * per:7.1f} us/msg")
    cpu_before = cpu_seconds(running.broker_pid)
    threads_before = thread_cpu(running.broker_pid) if settings.thread_cpu else {}
    with profiling(settings, running, case, "consume"):
        got = run_java(settings.java, "consume", "--namesrv", running.namesrv_addr, "--topic", topic,
                       "--group", f"{topic}_consumer", "--expect", result.total, "--seconds", settings.consume_seconds)
    result.consume_mps, result.consumed = got["consumeTps"], got["received"]
    result.consume_cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.consumed)
    if settings.thread_cpu:
        print(f"  {running.target} {case.label} consume, by thread:\n"
              f"{thread_cpu_report(threads_before, thread_cpu(running.broker_pid), result.consumed)}")
    return result


# -- the Python client ------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _SendStats:
    messages: int = 0
    requests: int = 0
    rt_total: float = 0.0
    rt_max: float = 0.0
    failed: int = 0


async def _send_loop(producer: Producer, topic: str, body: bytes, batch: int, stats: list[_SendStats],
                     stop: asyncio.Event) -> None:
    while not stop.is_set():
        begin = time.perf_counter()
        try:
            if batch > 1:
                await producer.send_batch([Message(topic, body) for _ in range(batch)])
            else:
                await producer.send(Message(topic, body))
        except Exception:  # a failed send is counted, as the Java client's are
            stats[-1].failed += 1
            await asyncio.sleep(0.1)
            continue
        rt = time.perf_counter() - begin
        window = stats[-1]
        window.messages += batch
        window.requests += 1
        window.rt_total += rt
        window.rt_max = max(window.rt_max, rt)


async def python_produce(namesrv_addr: str, topic: str, case: Case, settings: Settings) -> Result:
    """N concurrent send loops on one asyncio Producer: a warm-up window, then the measured one."""
    body = os.urandom(case.size // 2 + 1).hex()[: case.size].encode()
    stats = [_SendStats()]  # the loops add to the last window
    stop = asyncio.Event()
    async with Producer(f"{topic}_producer", namesrv_addr) as producer:
        tasks = [asyncio.create_task(_send_loop(producer, topic, body, case.batch, stats, stop))
                 for _ in range(settings.threads)]
        await asyncio.sleep(settings.warmup)
        stats.append(_SendStats())
        begin = time.perf_counter()
        await asyncio.sleep(settings.seconds)
        elapsed = time.perf_counter() - begin
        stats.append(_SendStats())
        stop.set()
        await asyncio.gather(*tasks)
    window = stats[1]
    return Result(send_mps=window.messages / elapsed, avg_rt_ms=window.rt_total * 1000 / max(1, window.requests),
                  max_rt_ms=window.rt_max * 1000, failed=sum(s.failed for s in stats),
                  total=sum(s.messages for s in stats))


async def python_consume(namesrv_addr: str, topic: str, expect: int, timeout_s: float) -> tuple[float, int]:
    """(messages/s from the first to the last message, messages) with a LitePullConsumer on every queue."""
    config = LitePullConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, pull_batch_size=32)
    async with LitePullConsumer(f"{topic}_consumer", namesrv_addr, config=config) as consumer:
        consumer.assign(await consumer.fetch_message_queues(topic))
        count, first, last = 0, 0.0, 0.0
        deadline = time.monotonic() + timeout_s
        while count < expect and time.monotonic() < deadline:
            messages = await consumer.poll(timeout_ms=1000)
            if messages:
                last = time.perf_counter()
                first = first or last
                count += len(messages)
    return (count / (last - first) if last > first else 0.0), count


def python_case(settings: Settings, running: Running, case: Case, topic: str) -> Result:
    cpu_before = cpu_seconds(running.broker_pid)
    result = asyncio.run(python_produce(running.namesrv_addr, topic, case, settings))
    result.cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.total)
    cpu_before = cpu_seconds(running.broker_pid)
    result.consume_mps, result.consumed = asyncio.run(
        python_consume(running.namesrv_addr, topic, result.total, settings.consume_seconds))
    result.consume_cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.consumed)
    return result


# -- profiling --------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def profiling(settings: Settings, running: Running, case: Case, phase: str = "produce") -> Iterator[None]:
    """py-spy on our broker (collapsed stacks by function, GIL holder only) while the block runs; a summary of the
    top functions per thread is printed after. Sampling costs the machine CPU: do not compare figures taken with it."""
    if settings.profile is None or running.target == REFERENCE:
        yield
        return
    settings.profile.mkdir(parents=True, exist_ok=True)
    out = settings.profile / f"{running.target}_{case.slug}_{phase}.txt"
    duration = int(settings.warmup + settings.seconds + 5 if phase == "produce" else settings.consume_seconds)
    # --gil: only samples of the thread holding the GIL, i.e. Python work (waits and GIL-free syscalls left out).
    # --nonblocking: without it every sample stops the broker, and the broker slows down by a factor of about 4.
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(running.broker_pid), "--rate", str(PY_SPY_RATE),
                            "--duration", str(duration), "--format", "raw", "--function", "--gil", "--nonblocking",
                            "--threads", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
        spy.wait(60)
    if out.exists():
        print(f"\npy-spy, {running.target}, {case.label} {phase} ({out}):")
        print(summarize_profile(out.read_text()))


def summarize_profile(collapsed: str, top: int = TOP_FUNCTIONS) -> str:
    """Self and inclusive share of the top functions, per thread, from py-spy's collapsed stacks."""
    by_thread: dict[str, tuple[Counter[str], Counter[str]]] = {}
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        thread = next((f for f in frames if f.startswith("thread ")), "thread ?")
        frames = [f for f in frames if not f.startswith(("thread ", "process "))]
        own, inclusive = by_thread.setdefault(thread, (Counter(), Counter()))
        if frames:
            own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    lines = []
    for thread, (own, inclusive) in sorted(by_thread.items(), key=lambda item: -sum(item[1][0].values())):
        total = sum(own.values())
        lines.append(f"  {thread}: {total} samples")
        for frame, samples in own.most_common(top):
            share, incl = 100 * samples / total, 100 * inclusive[frame] / total
            lines.append(f"    self {share:5.1f}%  incl {incl:5.1f}%  {frame}")
    return "\n".join(lines)


# -- the run ----------------------------------------------------------------------------------------------------------


def run_target(target: str, round_no: int, cases: list[Case], settings: Settings) -> None:
    home = settings.work / f"{target}-{round_no}"
    with running_target(target, home, settings) as running:
        warm_up(settings, running)
        for case in cases:
            topic = f"Bench_{case.slug}_{round_no}"
            assert settings.admin is not None
            settings.admin.run("create-topic", namesrv=running.namesrv_addr, topic=topic, queues=QUEUES)
            run = java_case if case.client == "java" else python_case
            result = run(settings, running, case, topic)
            settings.results.setdefault((target, case), []).append(result)
            print(f"  {target:12} {case.label:22} send {result.send_mps:9,.0f} msg/s  RT {result.avg_rt_ms:6.2f} / "
                  f"{result.max_rt_ms:7.1f} ms  CPU {result.cpu_us_per_msg:6.1f} us/msg  consume "
                  f"{result.consume_mps:9,.0f} msg/s ({result.consumed:,}/{result.total:,}, CPU "
                  f"{result.consume_cpu_us_per_msg:.1f} us/msg)  failed {result.failed}",
                  flush=True)
    shutil.rmtree(home, ignore_errors=True)  # GiB-sized CommitLog files


def warm_up(settings: Settings, running: Running) -> None:
    """Untimed load before the cases (single sends, batches, a consume): the JVM compiles its hot paths with C2,
    and both brokers touch their first pages and create their metadata."""
    if settings.broker_warmup <= 0:
        return
    assert settings.java is not None and settings.admin is not None
    topic = "BenchWarmup"
    settings.admin.run("create-topic", namesrv=running.namesrv_addr, topic=topic, queues=QUEUES)
    total = 0
    for batch in (1, 16):
        sent = run_java(settings.java, "produce", "--namesrv", running.namesrv_addr, "--topic", topic,
                        "--threads", settings.threads, "--size", 512, "--batch", batch,
                        "--seconds", settings.broker_warmup / 2, "--warmup", 0)
        total += sent["total"]
    run_java(settings.java, "consume", "--namesrv", running.namesrv_addr, "--topic", topic,
             "--group", f"{topic}_consumer", "--expect", total, "--seconds", settings.consume_seconds)


def best(results: list[Result]) -> Result:
    return max(results, key=lambda r: r.send_mps)


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "-"


def report(targets: list[str], cases: list[Case], settings: Settings) -> str:
    """Markdown tables: send (msg/s, RT, CPU) and consume, with each target's ratio to apache."""
    others = [t for t in targets if t != REFERENCE]
    compare = REFERENCE in targets
    head = ["case", *(f"{t} msg/s" for t in targets), *(f"{t}/{REFERENCE}" for t in others if compare),
            *(f"{t} RT avg/max ms" for t in targets), *(f"{t} CPU us/msg" for t in targets)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        got = {t: best(settings.results[(t, case)]) for t in targets if (t, case) in settings.results}
        if len(got) != len(targets):
            continue
        row = [case.label, *(f"{got[t].send_mps:,.0f}" for t in targets),
               *(ratio(got[t].send_mps, got[REFERENCE].send_mps) for t in others if compare),
               *(f"{got[t].avg_rt_ms:.2f} / {got[t].max_rt_ms:.0f}" for t in targets),
               *(f"{got[t].cpu_us_per_msg:.1f}" for t in targets)]
        lines.append("| " + " | ".join(row) + " |")
    head = ["case", *(f"{t} consume msg/s" for t in targets), *(f"{t}/{REFERENCE}" for t in others if compare),
            *(f"{t} consume CPU us/msg" for t in targets)]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        got = {t: best(settings.results[(t, case)]) for t in targets if (t, case) in settings.results}
        if len(got) != len(targets):
            continue
        row = [case.label, *(f"{got[t].consume_mps:,.0f}" for t in targets),
               *(ratio(got[t].consume_mps, got[REFERENCE].consume_mps) for t in others if compare),
               *(f"{got[t].consume_cpu_us_per_msg:.1f}" for t in targets)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def machine() -> str:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{platform.machine()}, nproc {os.cpu_count()}, Python {platform.python_version()}, {java}, "
            f"Linux {platform.release()}, load average {load}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured send time per case")
    parser.add_argument("--warmup", type=float, default=2.0, help="send time per case before measuring")
    parser.add_argument("--threads", type=int, default=8, help="concurrent sync senders (Producer -w)")
    parser.add_argument("--batch", type=int, default=16, help="messages per batch send (BatchProducer -b)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 1024], help="body sizes in bytes")
    parser.add_argument("--clients", nargs="+", choices=("java", "python"), default=["java", "python"])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=["ours", "apache"])
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best send rate per case is kept")
    parser.add_argument("--consume-seconds", type=float, default=120.0, help="limit of each consume pass")
    parser.add_argument("--broker-warmup", type=float, default=10.0,
                        help="seconds of untimed Java sends to each broker before its cases (JIT, first pages)")
    parser.add_argument("--commit-log-size", type=int, default=COMMIT_LOG_FILE_SIZE)
    parser.add_argument("--profile", type=Path, help="py-spy our broker during Java produce cases, into this dir")
    parser.add_argument("--thread-cpu", action="store_true",
                        help="print each broker's CPU and page faults per message by thread, per Java produce case")
    parser.add_argument("--work-dir", type=Path, help="where brokers keep their stores (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 128 B only, 1.5 s per case")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.sizes, args.consume_seconds = 1.5, 0.5, [128], 30.0
        args.broker_warmup = min(args.broker_warmup, 2.0)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="broker-throughput-"))
    settings = Settings(args.seconds, args.warmup, args.threads, args.consume_seconds, args.commit_log_size,
                        args.broker_warmup, work, args.profile, args.thread_cpu)
    settings.java = java_program(work / "client")
    settings.admin = apache_client(work / "admin")
    cases = [Case(client, size, batch) for client in args.clients for size in args.sizes for batch in (1, args.batch)]
    print(f"machine: {machine()}")
    print(f"command: python bench/broker_throughput.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"{args.threads} senders, {args.warmup:g} s warm-up + {args.seconds:g} s measured per case, "
          f"{QUEUES} queues, ASYNC_FLUSH, CommitLog files of {args.commit_log_size:,} B\n", flush=True)
    for round_no in range(args.repeat):
        targets = args.targets if round_no % 2 == 0 else list(reversed(args.targets))
        for target in targets:
            run_target(target, round_no, cases, settings)
    print()
    print(report(args.targets, cases, settings))
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
