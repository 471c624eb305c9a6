"""DLedger groups under load and across failovers: ours against Apache's, in the same run.

Per target, a NameServer and a 3-member DLedger group of one brokerName (``enableDLegerCommitLog``, ``dLegerPeers``
on loopback), each member its own process, both on DLedger's default timings. Then:

1. **Steady sends**: the official Java client (tests/java/bench/BenchClient) with N threads of synchronous sends of
   128 B for ``--seconds`` after a warm-up: msg/s, RT average / p99 / max, and the leader's CPU per message.
2. **Failover rounds**: a writer thread sends one message at a time, through our BlockingClient with a route
   cache of 0.2 s (so the client's own route refresh adds at most that, the same for both targets). Each round
   SIGKILLs the member the route names as master, and reads from the writer's log the time from the kill to the
   first acknowledged send on another member; the killed member then restarts on its store and the next round
   waits until it is back in the group (registered again) and the writer's sends go through.

Prints the figures per target and the ratio ours / Apache's. Nothing here asserts on time.

Examples
--------
    python bench/dledger_failover.py                      # both targets, 10 s of sends, 5 failover rounds
    python bench/dledger_failover.py --targets apache --rounds 20
    python bench/dledger_failover.py --quick              # smoke run: 2 s of sends, 1 round
    python bench/dledger_failover.py --targets ours --conf dLegerHeartBeatTimeIntervalMs=200  # rmq's timing keys
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.throughput_runner import cpu_seconds, java_program, machine, run_java  # noqa: E402
from broker.client.blocking import BlockingClient  # noqa: E402
from broker.client.message import Message  # noqa: E402
from broker.tools.local_cluster import free_port  # noqa: E402
from tests.apache import apache_client  # noqa: E402
from tests.apache.servers import start_apache_broker, start_apache_namesrv  # noqa: E402
from tests.integration import cluster  # noqa: E402

TARGETS = ("ours", "apache")
MEMBERS = ("n0", "n1", "n2")
GROUP = "broker-a"
TOPIC = "FailoverBench"
QUEUES = 8
WRITER_PAUSE_S = 0.01  # between the writer's sends, and after a failed one
ROUTE_TTL_S = 0.2


@dataclass
class Group:
    """A target's NameServer and members; ``start(member)`` (re)starts one on its own store."""

    target: str
    namesrv_addr: str
    start: Callable[[str], Any]
    members: dict[str, Any] = field(default_factory=dict)  # member id -> its process (``addr``, ``popen``, ``kill``)

    def member_at(self, addr: str) -> str | None:
        return next((m for m, proc in self.members.items() if proc is not None and proc.addr == addr), None)


@contextlib.contextmanager
def running_group(target: str, home: Path, extra_conf: dict[str, str]) -> Iterator[Group]:
    peers = ";".join(f"{member}-127.0.0.1:{free_port()}" for member in MEMBERS)
    restarts = dict.fromkeys(MEMBERS, 0)
    with contextlib.ExitStack() as stack:
        if target == "apache":
            namesrv_addr = stack.enter_context(start_apache_namesrv(home / "namesrv")).addr
        else:
            namesrv_addr = stack.enter_context(cluster.start_namesrv(home / "namesrv")).addr

        def start(member: str) -> Any:
            conf = {"brokerName": GROUP, "enableDLegerCommitLog": True, "dLegerGroup": GROUP, "dLegerPeers": peers,
                    "dLegerSelfId": member, "defaultTopicQueueNums": QUEUES, "sendMessageThreadPoolNums": 16,
                    **extra_conf}
            restarts[member] += 1
            member_home, store = home / f"{member}-{restarts[member]}", home / member / "store"
            if target == "apache":
                return start_apache_broker(member_home, namesrv_addr, store, **conf)
            return cluster.start_broker(member_home, namesrv_addr, store_dir=store, **conf)

        group = Group(target, namesrv_addr, start)
        stack.callback(lambda: [proc.close() for proc in group.members.values() if proc is not None])
        starting = [threading.Thread(target=lambda m=m: group.members.__setitem__(m, start(m))) for m in MEMBERS]
        for thread in starting:  # together: a member is only ready once the group has elected
            thread.start()
        for thread in starting:
            thread.join()
        missing = [m for m in MEMBERS if group.members.get(m) is None]
        if missing:
            raise RuntimeError(f"{target}: members {missing} did not start")
        yield group


def master_addr(client: BlockingClient) -> str | None:
    try:
        route = client.get_route(TOPIC, refresh=True)
    except Exception:
        return None
    return next((b.broker_addrs.get(0) for b in route.broker_datas if b.broker_addrs.get(0)), None)


def create_topic(group: Group, admin: Any) -> None:
    with BlockingClient(group.namesrv_addr) as client:
        deadline = time.monotonic() + 60
        while (addr := master_addr(client)) is None and time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # no master yet: the group is still electing
                admin.run("create-topic", namesrv=group.namesrv_addr, topic=TOPIC, queues=QUEUES)
            time.sleep(1)
        if addr is None:
            raise RuntimeError(f"{group.target}: {TOPIC} has no master in its route after 60 s")


# -- steady sends -------------------------------------------------------------------------------------------------


def steady(group: Group, java: Any, args: argparse.Namespace) -> dict[str, float]:
    with BlockingClient(group.namesrv_addr) as client:
        leader = group.members[group.member_at(master_addr(client) or "") or MEMBERS[0]]
    before = cpu_seconds(leader.popen.pid)
    sent = run_java(java, "produce", "--namesrv", group.namesrv_addr, "--topic", TOPIC, "--threads", args.threads,
                    "--size", 128, "--batch", 1, "--seconds", args.seconds, "--warmup", args.warmup)
    cpu = (cpu_seconds(leader.popen.pid) - before) * 1e6 / max(1, sent["total"])
    return {"msg/s": sent["sendMps"], "avg ms": sent["avgRtMs"], "p99 ms": sent["p99RtMs"],
            "max ms": sent["maxRtMs"], "leader CPU us/msg": cpu, "failed": sent["failedTotal"]}


# -- failovers ----------------------------------------------------------------------------------------------------


class Writer(threading.Thread):
    """Sends one message at a time and logs (monotonic time, the broker that acknowledged it, or None: failed)."""

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__(daemon=True)
        self.client = BlockingClient(namesrv_addr, timeout_ms=1000, retry_times_when_send_failed=0,
                                     route_ttl_s=ROUTE_TTL_S)
        self.log: list[tuple[float, str | None]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopped.is_set():
            try:
                result = self.client.send(Message(TOPIC, b"f" * 128, keys=f"w{n}"))
                self.log.append((time.monotonic(), self.client.broker_addr(result.message_queue)))
            except Exception:
                self.log.append((time.monotonic(), None))
            n += 1
            self.stopped.wait(WRITER_PAUSE_S)

    def first_ack_after(self, t0: float, not_by: str, timeout_s: float) -> float | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = next((t for t, addr in list(self.log) if t > t0 and addr is not None and addr != not_by), None)
            if found is not None:
                return found - t0
            time.sleep(0.05)
        return None


def failovers(group: Group, rounds: int, timeout_s: float) -> list[float | None]:
    writer = Writer(group.namesrv_addr)
    writer.start()
    times: list[float | None] = []
    try:
        with BlockingClient(group.namesrv_addr) as client:
            for round_no in range(rounds):
                addr = master_addr(client)
                member = group.member_at(addr or "")
                if member is None:
                    raise RuntimeError(f"{group.target}: no master before round {round_no + 1}")
                t0 = time.monotonic()
                group.members[member].kill()
                took = writer.first_ack_after(t0, addr or "", timeout_s)
                times.append(took)
                shown = "none within the limit" if took is None else f"{took:.2f} s"
                print(f"  {group.target} round {round_no + 1}: killed {member} (master), first ack on another "
                      f"member after {shown}", flush=True)
                group.members[member] = group.start(member)  # rejoins on its store
                settle = time.monotonic()
                while time.monotonic() - settle < 60 and not any(
                        t > settle and a is not None for t, a in list(writer.log)):
                    time.sleep(0.1)
    finally:
        writer.stopped.set()
        writer.join()
        writer.client.close()
    return times


# -- report -------------------------------------------------------------------------------------------------------


def shown(value: object) -> str:
    return "-" if value is None else f"{value:,.2f}" if isinstance(value, float) else str(value)


def report(results: dict[str, dict[str, Any]]) -> str:
    keys = ("msg/s", "avg ms", "p99 ms", "max ms", "leader CPU us/msg", "failed")
    targets = list(results)
    lines = ["| figure | " + " | ".join(targets) + (" | ours/apache |" if len(targets) == 2 else " |"),
             "|---|" + "---:|" * (len(targets) + (len(targets) == 2))]
    for key in (*keys, "failover median s", "failover max s", "failovers without an ack"):
        values = [results[t].get(key) for t in targets]
        cells = [shown(v) for v in values]
        if len(targets) == 2:
            ours, apache = results["ours"].get(key), results["apache"].get(key)
            cells.append(f"{ours / apache:.2f}" if isinstance(ours, float) and isinstance(apache, float) and apache
                         else "-")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--seconds", type=float, default=10.0, help="measured steady send time")
    parser.add_argument("--warmup", type=float, default=5.0, help="steady send time before measuring")
    parser.add_argument("--threads", type=int, default=8, help="concurrent sync senders (Producer -w)")
    parser.add_argument("--rounds", type=int, default=5, help="failover rounds per target")
    parser.add_argument("--failover-timeout", type=float, default=60.0, help="limit of one round's wait for an ack")
    parser.add_argument("--work-dir", type=Path, help="where members keep their stores (default: a temp dir)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker.conf key for every member of both targets (Apache's ignores rmq's own)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 s of sends, one round")
    args = parser.parse_args(argv)
    bad = [item for item in args.conf if "=" not in item]
    if bad:
        parser.error(f"--conf wants KEY=VALUE, not {bad}")
    args.conf = dict(item.split("=", 1) for item in args.conf)
    if args.quick:
        args.seconds, args.warmup, args.rounds = 2.0, 1.0, 1
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"machine: {machine()}")
    print(f"command: python bench/dledger_failover.py {' '.join(argv if argv is not None else sys.argv[1:])}\n")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="dledger-failover-"))
    java, admin = java_program(work / "client"), apache_client(work / "admin")
    results: dict[str, dict[str, Any]] = {}
    for target in args.targets:
        with running_group(target, work / target, args.conf) as group:
            create_topic(group, admin)
            figures = steady(group, java, args)
            print(f"  {target} steady: " + ", ".join(f"{k} {shown(v)}" for k, v in figures.items()), flush=True)
            times = failovers(group, args.rounds, args.failover_timeout)
            acked = [t for t in times if t is not None]
            figures["failover median s"] = statistics.median(acked) if acked else None
            figures["failover max s"] = max(acked) if acked else None
            figures["failovers without an ack"] = len(times) - len(acked)
            results[target] = figures
    print()
    print(report(results))
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
