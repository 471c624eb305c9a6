"""The machinery of the broker throughput benchmarks (``broker_throughput.py``, ``acl_trace_cost.py``,
``metrics_cost.py``): their common options, a target's NameServer and broker, the official Java client as the load
(``tests/java/bench/BenchClient.java``), one case's produce and consume passes with the broker's CPU per message
from /proc, and py-spy on our broker.

Only one target runs at a time, so targets do not compete for the cores. Both brokers run with the same settings:
ASYNC_FLUSH, 1 GiB CommitLog files (the default), long polling, and one topic of 8 queues per case. Apache's broker
runs with G1 and C2, closer to runbroker.sh than the tests' fast-boot JVM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu import machine_cpu, thread_cpu, thread_cpu_report, tree_cpu
from broker.remoting.signing import SessionCredentials
from tests.apache import ApacheClient, apache_artifact, apache_client, start_apache_broker, start_apache_namesrv
from tests.helpers import mqadmin
from tests.integration import cluster
from tests.javatools import JavaProgram, build_program

QUEUES = 8
COMMIT_LOG_FILE_SIZE = 1024 * 1024 * 1024  # both brokers' default
REFERENCE = "apache"
CLIENT_JVM_ARGS = ("-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-Dorg.apache.rocketmq.client.sendSmartMsg=true")
# tests/apache/ starts servers for fast boots (C1 only, SerialGC, 256 MB): undo that for a throughput run,
# closer to runbroker.sh (G1, C2). Later -XX flags win over earlier ones.
APACHE_BROKER_JVM_ARGS = ("-XX:TieredStopAtLevel=4", "-XX:-UseSerialGC", "-XX:+UseG1GC", "-Xms2g", "-Xmx2g")
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
    p99_rt_ms: float = 0.0
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


def add_case_arguments(parser: argparse.ArgumentParser, sizes: Sequence[int] = (128,)) -> None:
    """The options of the Java-client cases, the same in every script that runs them."""
    parser.add_argument("--seconds", type=float, default=10.0, help="measured send time per case")
    parser.add_argument("--warmup", type=float, default=2.0, help="send time per case before measuring")
    parser.add_argument("--threads", type=int, default=8, help="concurrent sync senders (Producer -w)")
    parser.add_argument("--batch", type=int, default=16, help="messages per batch send (BatchProducer -b)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(sizes), help="body sizes in bytes")
    parser.add_argument("--consume-seconds", type=float, default=120.0, help="limit of each consume pass")
    parser.add_argument("--broker-warmup", type=float, default=10.0,
                        help="seconds of untimed Java sends to each broker before its cases, shared by every case "
                             "(JIT, first pages)")
    parser.add_argument("--work-dir", type=Path, help="where brokers keep their stores (default: a temp dir)")


def case_settings(args: argparse.Namespace, prefix: str, *, commit_log_size: int = COMMIT_LOG_FILE_SIZE,
                  profile: Path | None = None, thread_cpu: bool = False) -> Settings:
    """Settings from ``add_case_arguments``' options, the Java client built and Apache's tools fetched in the work
    dir (``--work-dir``, else a new temp dir named after ``prefix``; the caller removes a temp dir when done)."""
    work = args.work_dir or Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    settings = Settings(args.seconds, args.warmup, args.threads, args.consume_seconds, commit_log_size,
                        args.broker_warmup, work, profile, thread_cpu)
    settings.java = java_program(work / "client")
    settings.admin = apache_client(work / "admin")
    return settings


@dataclass(frozen=True, slots=True)
class JavaClient:
    """How BenchClient's producer and consumer run: signing with ``credentials`` (AclClientRPCHook), and with
    message trace on (``trace``)."""

    credentials: SessionCredentials | None = None
    trace: bool = False

    def flags(self) -> tuple[str, ...]:
        signing = (("--access-key", self.credentials.access_key, "--secret-key", self.credentials.secret_key)
                   if self.credentials else ())
        return (*signing, *(("--trace", "true") if self.trace else ()))

    @property
    def slug(self) -> str:
        """Tells apart the profiles of one case run by different clients."""
        return (f"{self.credentials.access_key}_" if self.credentials else "") + ("trace_" if self.trace else "")


PLAIN_CLIENT = JavaClient()


# -- brokers ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Running:
    target: str
    namesrv_addr: str
    broker_addr: str
    broker_pid: int
    admin_credentials: SessionCredentials | None = None  # topics are created with these keys (ACL on)
    home: Path | None = None


@contextlib.contextmanager
def running_target(target: str, home: Path, settings: Settings, conf: Mapping[str, object] | None = None, *,
                   admin_credentials: SessionCredentials | None = None) -> Iterator[Running]:
    """A NameServer and a broker of ``target`` ("ours", "ours-asyncio" or "apache") with extra broker.conf keys
    ``conf``, stopped on exit. ``admin_credentials`` sign the topic creations (a broker with ACL on)."""
    home.mkdir(parents=True, exist_ok=True)
    common = {"mappedFileSizeCommitLog": settings.commit_log_size, "defaultTopicQueueNums": QUEUES, **(conf or {})}
    if target == REFERENCE:
        with start_apache_namesrv(home) as namesrv, start_apache_broker(
            home, namesrv, home / "store", jvm_args=APACHE_BROKER_JVM_ARGS, **common,
        ) as broker:
            yield Running(target, namesrv.addr, broker.addr, broker.popen.pid, admin_credentials, home)
        return
    with cluster.start_namesrv(home / "namesrv") as namesrv, cluster.start_broker(
        home / "broker", namesrv.addr, env={"RMQ_EVENT_LOOP": "asyncio" if target == "ours-asyncio" else "uvloop"},
        **common,
    ) as broker:
        yield Running(target, namesrv.addr, broker.addr, broker.popen.pid, admin_credentials, home)


def create_topic(settings: Settings, running: Running, topic: str) -> None:
    """``topic`` with QUEUES queues on the running broker: through the Java admin client, or with ACL on through our
    ``mqadmin`` signing with the admin's keys (conf/tools.yml, as Apache's tool reads them)."""
    if running.admin_credentials is None:
        assert settings.admin is not None
        settings.admin.run("create-topic", namesrv=running.namesrv_addr, topic=topic, queues=QUEUES)
        return
    done = mqadmin(*signed_tools_home(running), "updateTopic", "-n", running.namesrv_addr, "-b", running.broker_addr,
                   "-t", topic, "-r", str(QUEUES), "-w", str(QUEUES))
    if done.code != 0:
        raise RuntimeError(f"mqadmin updateTopic {topic} exited {done.code}:\n{done.err}{done.out}")


def signed_tools_home(running: Running) -> tuple[str, ...]:
    """``-Drocketmq.home.dir=...`` for our ``mqadmin``, with the admin's keys in its conf/tools.yml."""
    assert running.home is not None and running.admin_credentials is not None
    tools = running.home / "tools"
    (tools / "conf").mkdir(parents=True, exist_ok=True)
    (tools / "conf" / "tools.yml").write_text(f"accessKey: {running.admin_credentials.access_key}\n"
                                              f"secretKey: {running.admin_credentials.secret_key}\n")
    return (f"-Drocketmq.home.dir={tools}",)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a broker: its process and the processes it started (ours runs dispatch in a
    child process, dispatchMode=PROCESS; Apache's threads are all in its one process)."""
    return tree_cpu(pid)


# -- the Java client --------------------------------------------------------------------------------------------------


def java_program(log_root: Path) -> JavaProgram:
    jvm_args = (*CLIENT_JVM_ARGS, f"-Duser.home={log_root}", f"-Drocketmq.log.root={log_root / 'logs'}")
    return build_program("bench", "BenchClient", [apache_artifact("rocketmq-client")], jvm_args=jvm_args)


def run_java(program: JavaProgram, *args: object) -> dict:
    done = program.run(*map(str, args), timeout=CLIENT_TIMEOUT_S, check=True)
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    stderr = done.stderr.decode(errors="replace")
    if not lines:
        raise RuntimeError(f"BenchClient {args[0]} printed no result:\n{stderr[-3000:]}")
    result = json.loads(lines[-1])
    if result.get("failedTotal"):  # BenchClient prints each failed send's exception: show the first
        first = next((line for line in stderr.splitlines() if "Exception" in line), "(no exception printed)")
        print(f"  {result['failedTotal']} sends failed, the first with: {first[:300]}", flush=True)
    return result


def java_case(settings: Settings, running: Running, case: Case, topic: str,
              client: JavaClient = PLAIN_CLIENT) -> Result:
    """The case's produce pass (warm-up, then the measured window) and a consume pass over all it stored."""
    assert settings.java is not None
    produce = (settings.java, "produce", "--namesrv", running.namesrv_addr, "--topic", topic,
               "--threads", settings.threads, "--size", case.size, "--batch", case.batch,
               "--seconds", settings.seconds, "--warmup", settings.warmup, *client.flags())
    cpu_before = cpu_seconds(running.broker_pid)
    threads_before = thread_cpu(running.broker_pid) if settings.thread_cpu else {}
    machine_before, client_before = machine_cpu(), os.times()
    with profiling(settings, running, case, tag=client.slug):
        sent = run_java(*produce)
    machine_used = [after - before for after, before in zip(machine_cpu(), machine_before, strict=True)]
    client_after = os.times()
    result = Result(send_mps=sent["sendMps"], avg_rt_ms=sent["avgRtMs"], p99_rt_ms=sent["p99RtMs"],
                    max_rt_ms=sent["maxRtMs"], failed=sent["failedTotal"], total=sent["total"])
    result.cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.total)
    if settings.thread_cpu:
        per = 1e6 / max(1, result.total)
        client_cpu = (client_after.children_user + client_after.children_system - client_before.children_user
                      - client_before.children_system)
        print(f"  {running.target} {case.label}, by thread:\n"
              f"{thread_cpu_report(threads_before, thread_cpu(running.broker_pid), result.total)}\n"
              f"    Java client (whole run)          {client_cpu * per:7.1f} us/msg\n"
              f"    machine: user {machine_used[0] * per:7.1f}  sys {machine_used[1] * per:7.1f}  irq+softirq "
              f"{machine_used[2] * per:7.1f}  idle {machine_used[3] * per:7.1f} us/msg")
    cpu_before = cpu_seconds(running.broker_pid)
    threads_before = thread_cpu(running.broker_pid) if settings.thread_cpu else {}
    with profiling(settings, running, case, "consume", tag=client.slug):
        got = run_java(settings.java, "consume", "--namesrv", running.namesrv_addr, "--topic", topic,
                       "--group", f"{topic}_consumer", "--expect", result.total, "--seconds", settings.consume_seconds,
                       *client.flags())
    result.consume_mps, result.consumed = got["consumeTps"], got["received"]
    result.consume_cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.consumed)
    if settings.thread_cpu:
        print(f"  {running.target} {case.label} consume, by thread:\n"
              f"{thread_cpu_report(threads_before, thread_cpu(running.broker_pid), result.consumed)}")
    return result


def warm_up(settings: Settings, running: Running, client: JavaClient = PLAIN_CLIENT,
            cases: Sequence[Case] = ()) -> None:
    """Untimed load before the measured cases: the produce of every case (its body size and batch) for an equal
    share of ``settings.broker_warmup`` seconds, then one consume pass over all of it. The JVM then compiles its hot
    paths with C2 for every shape it will be measured on, and both brokers touch their first pages and create their
    metadata, so that no measured case stands in as the warm-up of the next (without ``cases``: 512 B single sends
    and batches of 16)."""
    if settings.broker_warmup <= 0:
        return
    assert settings.java is not None
    shapes = list(dict.fromkeys((case.size, case.batch) for case in cases)) or [(512, 1), (512, 16)]
    topic = "BenchWarmup"
    create_topic(settings, running, topic)
    total = 0
    for size, batch in shapes:
        sent = run_java(settings.java, "produce", "--namesrv", running.namesrv_addr, "--topic", topic,
                        "--threads", settings.threads, "--size", size, "--batch", batch,
                        "--seconds", settings.broker_warmup / len(shapes), "--warmup", 0, *client.flags())
        total += sent["total"]
    run_java(settings.java, "consume", "--namesrv", running.namesrv_addr, "--topic", topic,
             "--group", f"{topic}_consumer", "--expect", total, "--seconds", settings.consume_seconds,
             *client.flags())


def case_line(target: str, label: str, result: Result) -> str:
    """One case's figures, printed as it ends."""
    return (f"  {target:12} {label:22} send {result.send_mps:9,.0f} msg/s  RT {result.avg_rt_ms:6.2f} / "
            f"{result.p99_rt_ms:6.1f} / {result.max_rt_ms:7.1f} ms  CPU {result.cpu_us_per_msg:6.1f} us/msg  consume "
            f"{result.consume_mps:9,.0f} msg/s ({result.consumed:,}/{result.total:,}, CPU "
            f"{result.consume_cpu_us_per_msg:.1f} us/msg)  failed {result.failed}")


# -- profiling --------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def profiling(settings: Settings, running: Running, case: Case, phase: str = "produce",
              tag: str = "") -> Iterator[None]:
    """py-spy on our broker (collapsed stacks by function, GIL holder only) while the block runs; a summary of the
    top functions per thread is printed after. Sampling costs the machine CPU: do not compare figures taken with it.
    ``tag`` tells apart the files of one case run by different clients."""
    if settings.profile is None or running.target == REFERENCE:
        yield
        return
    settings.profile.mkdir(parents=True, exist_ok=True)
    out = settings.profile / f"{running.target}_{tag}{case.slug}_{phase}.txt"
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


# -- the report -------------------------------------------------------------------------------------------------------


def best(results: list[Result]) -> Result:
    return max(results, key=lambda r: r.send_mps)


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "-"


def machine() -> str:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{platform.machine()}, nproc {os.cpu_count()}, Python {platform.python_version()}, {java}, "
            f"Linux {platform.release()}, load average {load}")
