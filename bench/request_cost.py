"""The broker's CPU per request on its own: Java-shaped frames through the request path, in one process.

``broker_throughput.py`` measures the whole system (client, kernel, event loop) and moves with the machine's load.
This one feeds the frames the official Java client sends (ROCKETMQ headers, SEND_MESSAGE_V2's one-letter fields, a
batch body as ``MessageDecoder.encodeMessages`` writes it) to a started broker's connection exchange, runs the
server's dispatch (processor, store put) and encodes the answer into its frame: what the broker's main thread does per
request besides the socket and the event loop. The CPU time of that thread is divided by the requests.

Cases: SEND_MESSAGE_V2 of 128 B and 1 KB, SEND_BATCH_MESSAGE of 16 such messages, and PULL_MESSAGE of 32 messages
(what a push consumer asks; its subscription carried in the request). ``--profile`` prints cProfile's top functions
of each case.

``--sockets N`` adds what the exchange-only cases leave out: the same single sends by N blocking senders over
loopback connections (a thread of this process, each sender waiting for its answer as the Java client's sync send
does), so the event loop (uvloop, as the broker runs), the connection's bytes in, the request's task or its lack,
and the answer's write count too. The CPU is still the loop thread's, divided by the requests answered; beside it
the requests per second the senders got (wall clock: it moves with the machine's load).

Examples
--------
    python bench/request_cost.py                   # every case, 20,000 requests each (sends) and 4,000 pulls
    python bench/request_cost.py --profile         # + where the time goes
    python bench/request_cost.py --rounds 20       # the least and the median of 20 rounds: for a loaded machine
    python bench/request_cost.py --idle 20         # + an idle broker's CPU (its timers) before the cases
    python bench/request_cost.py --sockets 8       # + single sends through 8 loopback connections
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import logging
import os
import pstats
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from broker.common.message import encode_properties  # noqa: E402
from broker.common.message_batch import BatchMessage, encode_batch_body  # noqa: E402
from broker.common.topic import TopicConfig  # noqa: E402
from broker.remoting.codes import LanguageCode, RequestCode, SerializeType  # noqa: E402
from broker.remoting.command import create_request, encode  # noqa: E402
from broker.remoting.exchange import RemotingExchange  # noqa: E402
from broker.server.broker_controller import BrokerController  # noqa: E402
from broker.server.config import BrokerConfig  # noqa: E402
from broker.store.config import MessageStoreConfig  # noqa: E402
from broker.tools.local_cluster import free_broker_port  # noqa: E402

TOPIC = "CostTopic"
GROUP = "CostGroup"
QUEUES = 8
PULL_BATCH = 32
TOP = 25


class Peer:
    """What a processor reads of its connection."""

    remote_address = "127.0.0.1:50000"
    closed = False


def java_send_frame(size: int, batch: int, queue_id: int) -> bytes:
    """A SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) frame as the Java client writes it with ROCKETMQ headers."""
    body = os.urandom(size // 2 + 1).hex()[:size].encode()
    uniq = "7F0000010001" + "0" * 20
    props = {"UNIQ_KEY": uniq, "WAIT": "true"}
    ext = {"a": "CostProducer", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "j": "0", "k": "false", "n": "broker-a"}
    code = RequestCode.SEND_MESSAGE_V2
    if batch > 1:
        body = encode_batch_body([BatchMessage(body, {"UNIQ_KEY": uniq[:-2] + f"{i:02X}", "WAIT": "true"})
                                  for i in range(batch)])
        ext |= {"m": "true", "i": ""}
        code = RequestCode.SEND_BATCH_MESSAGE
    else:
        ext["i"] = encode_properties(props)
    request = create_request(code, ext, body, serialize_type=SerializeType.ROCKETMQ, language=LanguageCode.JAVA)
    return encode(request)


def java_pull_frame(queue_id: int, offset: int) -> bytes:
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(PULL_BATCH), "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000",
           "subscription": "*", "subVersion": "0", "expressionType": "TAG", "bname": "broker-a"}
    request = create_request(RequestCode.PULL_MESSAGE, ext, serialize_type=SerializeType.ROCKETMQ,
                             language=LanguageCode.JAVA)
    return encode(request)


async def drive(controller: BrokerController, frames: Callable[[int], bytes], count: int) -> float:
    """CPU seconds of this thread for ``count`` requests: frame in, dispatch, frame out."""
    exchange = RemotingExchange(peer=Peer.remote_address)
    server, peer = controller.server, Peer()
    data = [frames(i) for i in range(count)]
    begin = time.thread_time()
    for chunk in data:
        for event in exchange.receive_data(chunk):
            request = event.request
            response = await server._dispatch(peer, request)
            exchange.answer(request, response)
    return time.thread_time() - begin


def sender(port: int, frames: list[bytes], count: int, start: threading.Barrier) -> None:
    """One blocking sync sender: a frame, then its whole answer, ``count`` times."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start.wait()
        for i in range(count):
            sock.sendall(frames[i % len(frames)])
            answer = sock.recv(65536)
            while len(answer) < 4 or len(answer) < 4 + int.from_bytes(answer[:4], "big"):
                answer += sock.recv(65536)


async def drive_sockets(controller: BrokerController, frames: list[bytes], senders: int,
                        count: int) -> tuple[float, float]:
    """CPU seconds of the loop's thread, and wall seconds, while ``senders`` threads send ``count`` requests each
    over loopback."""
    start = threading.Barrier(senders + 1)
    threads = [threading.Thread(target=sender, args=(controller.server.port, frames, count, start), daemon=True)
               for _ in range(senders)]
    for thread in threads:
        thread.start()
    await asyncio.sleep(0.2)  # the connections accepted
    await asyncio.get_running_loop().run_in_executor(None, start.wait)
    begin, wall = time.thread_time(), time.perf_counter()
    while any(thread.is_alive() for thread in threads):
        await asyncio.sleep(0.005)
    return time.thread_time() - begin, time.perf_counter() - wall


def run_socket_case(controller: BrokerController, label: str, frames: list[bytes], senders: int, count: int,
                    rounds: int, profile: bool) -> None:
    """``count`` single sends over ``senders`` connections in ``rounds`` rounds: as ``run_case``."""
    loop = asyncio.get_event_loop()
    loop.run_until_complete(drive_sockets(controller, frames, senders, 200))  # warm-up
    size = max(count // rounds // senders, 1)
    runs = [loop.run_until_complete(drive_sockets(controller, frames, senders, size)) for _ in range(rounds)]
    costs = [cpu * 1e6 / (size * senders) for cpu, _ in runs]
    rates = [size * senders / wall for _, wall in runs]
    median = f"  median {statistics.median(costs):7.1f} us/request" if rounds > 1 else ""
    print(f"{label:24} {min(costs):7.1f} us/request  {min(costs):6.2f} us/msg{median}  "
          f"{max(rates):8,.0f} requests/s (best; median {statistics.median(rates):8,.0f})", flush=True)
    if profile:
        print_profile(lambda: loop.run_until_complete(drive_sockets(controller, frames, senders, size)))


def print_profile(run: Callable[[], object]) -> None:
    """cProfile's top functions (by their own time) of ``run()`` in this thread."""
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(TOP)
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()), "\n")


def run_case(controller: BrokerController, label: str, frames: Callable[[int], bytes], count: int, per: int,
             profile: bool, rounds: int = 1) -> None:
    """``count`` requests in ``rounds`` rounds: the least CPU per request of a round, and with rounds the median
    (on a loaded machine the least is the steadier figure: a round the scheduler interrupted only costs more)."""
    loop = asyncio.get_event_loop()
    loop.run_until_complete(drive(controller, frames, min(count, 2000)))  # warm-up
    size = max(count // rounds, 1)
    costs = [loop.run_until_complete(drive(controller, frames, size)) * 1e6 / size for _ in range(rounds)]
    per_request = min(costs)
    median = f"  median {statistics.median(costs):7.1f} us/request" if rounds > 1 else ""
    print(f"{label:24} {per_request:7.1f} us/request  {per_request / per:6.2f} us/msg{median}", flush=True)
    if profile:
        print_profile(lambda: loop.run_until_complete(drive(controller, frames, count)))


async def start(store_dir: Path) -> BrokerController:
    broker_config = BrokerConfig(broker_name="broker-a", listen_port=free_broker_port(), broker_ip1="127.0.0.1",
                                 broker_ip2="127.0.0.1", default_topic_queue_nums=QUEUES)
    store_config = MessageStoreConfig(store_path_root_dir=str(store_dir),
                                      mapped_file_size_commit_log=256 * 1024 * 1024)
    controller = BrokerController(broker_config, store_config, bind_host="127.0.0.1")
    await controller.start()
    controller.topic_config_manager.update_topic_config(TopicConfig(TOPIC, QUEUES, QUEUES))
    return controller


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's, as the broker runs (``run_server``), unless RMQ_EVENT_LOOP=asyncio."""
    if os.environ.get("RMQ_EVENT_LOOP", "uvloop") == "asyncio":
        return asyncio.new_event_loop()
    import uvloop

    return uvloop.new_event_loop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="sends per case")
    parser.add_argument("--pulls", type=int, default=4_000)
    parser.add_argument("--profile", action="store_true", help="cProfile's top functions per case")
    parser.add_argument("--idle", type=float, default=0,
                        help="first, the loop thread's CPU over this many seconds with no request (timers, polls)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="split each case into rounds; print the least and the median CPU per request")
    parser.add_argument("--sockets", type=int, default=0,
                        help="then single sends by this many blocking senders over loopback connections")
    parser.add_argument("--only-sockets", action="store_true", help="skip the exchange-only cases")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # a Java consumer's pulls and sends log nothing on a healthy broker either
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    with tempfile.TemporaryDirectory(prefix="request-cost-") as tmp:
        controller = loop.run_until_complete(start(Path(tmp)))
        try:
            if args.idle:
                loop.run_until_complete(asyncio.sleep(2))  # past the start's own work
                begin = time.thread_time()
                loop.run_until_complete(asyncio.sleep(args.idle))
                idle_ms = (time.thread_time() - begin) * 1000 / args.idle
                print(f"{'idle':24} {idle_ms:7.2f} ms CPU per second of the loop's thread", flush=True)
            for size in () if args.only_sockets else (128, 1024):
                for batch in (1, 16):
                    frames = [java_send_frame(size, batch, q) for q in range(QUEUES)]
                    label = f"send {size} B" + (f" batch {batch}" if batch > 1 else "")
                    run_case(controller, label, lambda i, f=frames: f[i % QUEUES], args.requests // batch, batch,
                             args.profile, args.rounds)
            for size in (128, 1024) if args.sockets else ():
                frames = [java_send_frame(size, 1, q) for q in range(QUEUES)]
                run_socket_case(controller, f"socket send {size} B", frames, args.sockets, args.requests,
                                args.rounds, args.profile)
            if args.only_sockets:
                return
            stored = controller.store.max_offset_in_queue(TOPIC, 0)
            loop.run_until_complete(asyncio.sleep(1))  # dispatch catches up
            pulls = [java_pull_frame(q, o) for q in range(QUEUES) for o in range(0, stored - PULL_BATCH, PULL_BATCH)]
            run_case(controller, f"pull {PULL_BATCH}", lambda i: pulls[i % len(pulls)], args.pulls, PULL_BATCH,
                     args.profile, args.rounds)
        finally:
            loop.run_until_complete(controller.shutdown())
            loop.close()


if __name__ == "__main__":
    main()
