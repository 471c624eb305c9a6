"""The pre-authentication fuzz campaign against real brokers: one with ACL 2.0 on, one with ACL 1.0 (``aclEnable``).

Each broker (with its own NameServer, as processes on loopback) gets the campaign's generated inputs
(``bench/fuzz_corpus.py``, a seed of its own) on many connections at once, from another process: one connection per
input, written whole, then the write side closed; the broker must close it (it may answer first). Meanwhile a
neighbour connection per broker sends valid signed messages one after the other and times each answer. Then:

- both brokers still run, and closed every fuzzed connection (none left hanging until the timeout);
- the neighbours' answers kept coming: every send succeeded (latency: median, p99, max during the campaign, and
  for comparison in the 10 s before it, the neighbours alone);
- every neighbour message reads back whole, and every record of each CommitLog is a whole record with its body CRC
  right, the bytes after the last one zero: nothing malformed was stored;
- no traceback in the brokers' logs (an exception outside the error tree while serving).

Examples
--------
    python bench/fuzz_preauth_live.py --inputs 50000 --seed 7 --connections 16
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.fuzz_corpus import ACL1_ADMIN, Generator  # noqa: E402
from bench.fuzz_target import PLAIN_ACL_YML  # noqa: E402
from broker.client.blocking import BlockingClient  # noqa: E402
from broker.client.message import Message  # noqa: E402
from broker.common.record import RecordKind, check_record, decode_record  # noqa: E402
from broker.remoting.exchange import parse_address  # noqa: E402
from broker.remoting.signing import SessionCredentials  # noqa: E402
from broker.tools.local_cluster import Cluster, start_cluster  # noqa: E402
from tests.integration.auth_env import AUTH_CONF, SUPER  # noqa: E402

NEIGHBOUR_TOPIC = "FuzzNeighbour"
BASELINE_S = 10.0
CLOSE_TIMEOUT_S = 10.0  # a fuzzed connection the broker has not closed by then is counted as hanging


# -- the fuzzing process -----------------------------------------------------------------------------------------


async def _one(address: tuple[str, int], data: bytes, stats: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    try:
        writer.write(data)
        await writer.drain()
        writer.write_eof()
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            while chunk := await reader.read(65536):
                stats["answer_bytes"] += len(chunk)
        stats["closed"] += 1
    except TimeoutError:
        stats["hanging"] += 1
    except OSError:  # the broker closed first, resetting what we still wrote: closed as well
        stats["closed"] += 1
    finally:
        writer.close()


async def _fuzz(addresses: list[tuple[str, int]], seed: int, inputs: int, connections: int) -> dict[str, int]:
    generator = Generator(seed)
    stats = {"sent": 0, "closed": 0, "hanging": 0, "answer_bytes": 0, "connect_failed": 0}
    next_index = iter(range(inputs))

    async def worker() -> None:
        for index in next_index:
            try:
                await _one(addresses[index % len(addresses)], generator.generate(index), stats)
            except OSError:
                stats["connect_failed"] += 1
            stats["sent"] += 1

    await asyncio.gather(*(worker() for _ in range(connections)))
    return stats


def fuzz_process(addresses: list[tuple[str, int]], seed: int, inputs: int, connections: int, results) -> None:
    results.put(asyncio.run(_fuzz(addresses, seed, inputs, connections)))


# -- the neighbours -----------------------------------------------------------------------------------------------


class Neighbour(threading.Thread):
    """Valid signed sends one after the other on one client, each timed, until stopped."""

    def __init__(self, name: str, namesrv_addr: str, credentials: SessionCredentials) -> None:
        super().__init__(name=f"neighbour-{name}", daemon=True)
        self.client = BlockingClient(namesrv_addr, producer_group="FuzzNeighbourGroup", credentials=credentials)
        self.latencies_ms: list[float] = []
        self.bodies: list[bytes] = []
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def send_one(self) -> None:
        body = f"{self.name}-{len(self.bodies)}".encode()
        started = time.perf_counter()
        try:
            self.client.send(Message(NEIGHBOUR_TOPIC, body))
        except Exception as err:  # noqa: BLE001 - reported: the neighbour must never fail
            self.failures.append(f"{type(err).__name__}: {err}")
            return
        self.latencies_ms.append((time.perf_counter() - started) * 1000)
        self.bodies.append(body)

    def run(self) -> None:
        while not self.stopping.is_set():
            self.send_one()

    def stored_bodies(self) -> list[bytes]:
        found = []
        for mq in self.client.fetch_message_queues(NEIGHBOUR_TOPIC):
            offset, end = 0, self.client.get_max_offset(mq)
            while offset < end:
                result = self.client.pull(mq, offset, 32, decode=True)
                found += [m.body for m in result.messages]
                offset = result.next_begin_offset
        return found


def _latency(values: list[float]) -> str:
    if not values:
        return "no answers"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{len(values)} sends, median {statistics.median(values):.1f} ms, p99 {p99:.1f} ms, max {ordered[-1]:.1f} ms"


# -- checks after the campaign ----------------------------------------------------------------------------------


def check_commit_log(store: Path) -> tuple[int, list[str]]:
    """Every record of each CommitLog file whole (body CRC right, properties readable), zeros after the last."""
    records, problems = 0, []
    for path in sorted((store / "commitlog").glob("*")):
        buf = path.read_bytes()
        pos = 0
        while (check := check_record(buf, pos, len(buf))).kind is RecordKind.MESSAGE:
            decode_record(buf, pos)
            records += 1
            pos += check.size
        if check.kind is RecordKind.END and buf[pos:].strip(b"\x00"):
            problems.append(f"{path}: bytes that are no record at {pos}")
    return records, problems


def tracebacks(home: Path) -> list[str]:
    return [f"{path}: {line}" for path in home.rglob("*.log")
            for line in path.read_text(errors="replace").splitlines() if "Traceback" in line]


def run(args: argparse.Namespace, work: Path) -> int:
    acl1_home = work / "acl1-home"
    (acl1_home / "conf").mkdir(parents=True)
    (acl1_home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    clusters: dict[str, Cluster] = {}
    try:
        clusters["acl2"] = start_cluster(work / "acl2", **AUTH_CONF)
        clusters["acl1"] = start_cluster(work / "acl1", aclEnable="true", rocketmqHome=str(acl1_home))
        credentials = {"acl2": SUPER, "acl1": ACL1_ADMIN}
        neighbours = [Neighbour(name, cluster.namesrv_addr, credentials[name]) for name, cluster in clusters.items()]
        for neighbour in neighbours:
            for _ in range(20):  # creates the topic and the connections before the clock starts
                neighbour.send_one()
            neighbour.latencies_ms.clear()
            neighbour.start()
        time.sleep(BASELINE_S)  # the neighbours alone first: their latency on this machine without the fuzzing
        baseline = {n.name: _latency(n.latencies_ms) for n in neighbours}
        for neighbour in neighbours:
            neighbour.latencies_ms.clear()
        addresses = [parse_address(cluster.brokers[0].addr) for cluster in clusters.values()]
        results = multiprocessing.get_context("spawn").Queue()
        fuzzer = multiprocessing.get_context("spawn").Process(
            target=fuzz_process, args=(addresses, args.seed, args.inputs, args.connections, results))
        started = time.perf_counter()
        fuzzer.start()
        stats = results.get()
        fuzzer.join()
        elapsed = time.perf_counter() - started
        for neighbour in neighbours:
            neighbour.stopping.set()
            neighbour.join()
        print(f"{stats['sent']:,} inputs (seed {args.seed}) on {args.connections} connections at a time, "
              f"{elapsed:.0f} s, {stats['sent'] / elapsed:.0f} inputs/s; closed by the broker {stats['closed']:,}, "
              f"left hanging {stats['hanging']}, connects refused {stats['connect_failed']}, "
              f"{stats['answer_bytes']:,} bytes answered")
        ok = stats["hanging"] == 0 and stats["connect_failed"] == 0
        for neighbour, (name, cluster) in zip(neighbours, clusters.items(), strict=True):
            alive = all(p.alive() for p in (cluster.namesrv, *cluster.brokers))
            stored = neighbour.stored_bodies()
            missing = len(set(neighbour.bodies) - set(stored))
            print(f"{name}: neighbour alone {baseline[neighbour.name]}")
            print(f"{name}: broker alive {alive}; neighbour {_latency(neighbour.latencies_ms)}; "
                  f"failures {len(neighbour.failures)} {neighbour.failures[:3]}; stored back {len(stored)}, "
                  f"missing {missing}")
            ok = ok and alive and not neighbour.failures and missing == 0
            neighbour.client.close()
    finally:
        for cluster in clusters.values():
            cluster.close()
    for name in clusters:
        records, problems = check_commit_log(work / name / "broker-a" / "store")
        logged = tracebacks(work / name)
        print(f"{name}: CommitLog {records} records, problems {problems[:3]}; tracebacks in logs {len(logged)} "
              f"{logged[:3]}")
        ok = ok and not problems and not logged
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7, help="not the in-process campaign's: other inputs")
    parser.add_argument("--connections", type=int, default=16, help="fuzzed connections open at a time")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmq-fuzz-live-") as work:
        return run(args, Path(work))


if __name__ == "__main__":
    sys.exit(main())
