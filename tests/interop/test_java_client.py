"""The official Java client through our NameServer and broker, and the same scenarios through Apache's (issue 3).

Every scenario runs on two targets, ``rmq`` (``python -m broker.namesrv`` + ``python -m broker``) and ``apache``
(Apache RocketMQ's own NamesrvStartup + BrokerStartup, tests/apache), with both header serializations
(``rocketmq.serialize.type`` JSON and ROCKETMQ). A scenario test checks what must hold on any RocketMQ broker and
records a normalized observation: what a client sees with the values that legitimately differ taken out (msgIds,
timestamps, addresses and ports, commit log offsets, the random queue a producer starts at). The
``test_rmq_observes_as_apache`` tests, at the end of the module, then demand that the two targets' observations be
equal: response codes and remarks, send statuses, queue offsets, route and cluster shape, message fields and
properties, errors.

Cost: each cluster starts once per module (both with autoCreateTopicEnable=false, so a send to an unknown topic is
an error; every scenario creates its topics), each (target, serialization, client) pair has one driver JVM in script
mode, and message counts stay at 20.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.remoting.codes import ResponseCode
from tests.apache import DriverSession, apache_client, driver_body
from tests.integration.cluster import start_servers

pytestmark = [pytest.mark.java, pytest.mark.slow]

TARGETS = ("rmq", "apache")
SERIALIZE = ("JSON", "ROCKETMQ")
QUEUES = 4
COUNT = 20
BODY_SIZE = 64
BROKER_NAME = "broker-a"
# Both brokers: no TBW102, so only topics created through the admin API exist.
BROKER_CONF: dict[str, object] = {"autoCreateTopicEnable": False, "autoCreateSubscriptionGroup": True}
# Apache's broker fails a send fast (SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]broker busy") after 200 ms in its send
# queue; on a loaded 2-core machine that happens, and it is overload protection, not what we compare.
APACHE_ONLY_CONF: dict[str, object] = {"waitTimeMillsInSendQueue": 10_000}

# Push consumers heartbeat every second, not every 30 s: a rebalance's own heartbeat is skipped when another one
# holds the client's lock, and until a heartbeat carries the new subscription version the broker (Apache's and ours)
# answers the new queues' pulls SUBSCRIPTION_NOT_LATEST.
HEARTBEAT_MS = 1000
# A push consumer normally has its messages in about 2 s; an orderly one whose LOCK_BATCH_MQ timed out (1 s, on a
# loaded machine) tries again at the next rebalance, 20 s later.
PUSH_TIMEOUT_MS = 60_000

ADDR = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")
# FAQUrl's one constant: ".../docs/bestPractice/06FAQ" in 5.5.0 (the Apache we run), ".../docs/faq/" in 5.5.1.
FAQ_URL = re.compile(r"https://rocketmq\.apache\.org/docs/(?:bestPractice/06FAQ|faq/)")
# Client-side values that differ from run to run whatever the broker: the unique key (a fresh id) and the time the
# push consumer started on a message.
VOLATILE_PROPERTIES = frozenset({"UNIQ_KEY", "CONSUME_START_TIME"})


# -- the two targets ---------------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    namesrv_addr: str
    broker_addr: str


@dataclass
class Lab:
    """The module's clusters and driver sessions, each started on first use; observations keyed by
    (scenario, serialization, target)."""

    tmp: Path
    stack: contextlib.ExitStack
    client49_factory: Callable[..., Any]
    targets: dict[str, Target] = field(default_factory=dict)
    sessions: dict[tuple[str, str, str], DriverSession] = field(default_factory=dict)
    observations: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    def target(self, name: str) -> Target:
        if name not in self.targets:
            self.targets[name] = self._start(name)
        return self.targets[name]

    def _start(self, name: str) -> Target:
        conf = BROKER_CONF if name == "rmq" else {**BROKER_CONF, **APACHE_ONLY_CONF}
        cluster = self.stack.enter_context(start_servers(name, self.tmp / name, **conf))  # one broker, broker-a
        return Target(name, cluster.namesrv_addr, cluster.brokers[0].addr)

    def session(self, target: str, serialize: str, client: str = "5") -> DriverSession:
        key = (target, serialize, client)
        if key not in self.sessions:
            self.target(target)  # the cluster first: its sessions close before it stops
            log_dir = self.tmp / "clients" / "-".join(key)
            driver = (apache_client(log_dir, serialize=serialize) if client == "5"
                      else self.client49_factory(log_dir, serialize=serialize))
            self.sessions[key] = self.stack.enter_context(driver.session())
        return self.sessions[key]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, client49_factory: Callable[..., Any]) -> Iterator[Lab]:
    """Also leaves every observation in <tmp>/observations.json, to read when a comparison fails."""
    with contextlib.ExitStack() as stack:
        lab = Lab(tmp_path_factory.mktemp("java-client"), stack, client49_factory)
        try:
            yield lab
        finally:
            observations = {"/".join(key): obs for key, obs in lab.observations.items()}
            (lab.tmp / "observations.json").write_text(json.dumps(observations, indent=1, default=str))


@dataclass
class Run:
    """One scenario on one target: its session, addresses and where its observation goes."""

    lab: Lab
    scenario: str
    target: str
    serialize: str
    client: str = "5"

    @property
    def s(self) -> DriverSession:
        return self.lab.session(self.target, self.serialize, self.client)

    @property
    def ns(self) -> str:
        return self.lab.target(self.target).namesrv_addr

    def topic(self, name: str) -> str:
        return f"{name}_{self.serialize}{'' if self.client == '5' else '_c' + self.client}"

    def admin(self) -> DriverSession:
        """The 5.x session of this target and serialization: topics are created through its admin API."""
        return self.lab.session(self.target, self.serialize)

    def create_topic(self, name: str, queues: int = QUEUES) -> str:
        topic = self.topic(name)
        self.admin().call("create-topic", namesrv=self.ns, topic=topic, queues=queues)
        return topic

    def observe(self, observation: Any) -> None:
        self.lab.observations[(self.scenario, self.serialize, self.target)] = observation


params = pytest.mark.parametrize(("target", "serialize"), [(t, s) for t in TARGETS for s in SERIALIZE])


# -- normalization ---------------------------------------------------------------------------------------------------


def _text(value: Any) -> Any:
    """Addresses (ports and hosts differ between the targets) and the FAQ link out of a remark or error message."""
    return FAQ_URL.sub("<faq>", ADDR.sub("<addr>", value)) if isinstance(value, str) else value


def _relabel(first_queue: int, queues: int = QUEUES) -> dict[int, int]:
    """Queue ids counted from the one a producer's round robin started at (a random one) instead of from 0."""
    return {q: (q - first_queue) % queues for q in range(queues)}


def _sent(records: list[dict], relabel: dict[int, int]) -> list[tuple]:
    return [(r["index"], r["sendStatus"], r["topic"], r["brokerName"], relabel[r["queueId"]], r["queueOffset"],
             r["keys"], r["tags"], r["bodyLength"], r.get("regionId"), r.get("traceOn"))
            for r in sorted(records, key=lambda r: r["index"])]


def _properties(props: dict[str, str]) -> dict[str, str]:
    return {k: ("<volatile>" if k in VOLATILE_PROPERTIES else v) for k, v in props.items()}


def _message(m: dict, relabel: dict[int, int] | None = None) -> dict[str, Any]:
    """What a consumer sees of a message, minus ids, timestamps, hosts and commit log positions."""
    assert m["properties"].get("UNIQ_KEY") == m["msgId"] == m["uniqKey"]
    return {
        "topic": m["topic"],
        "brokerName": m["brokerName"],
        "queueId": relabel[m["queueId"]] if relabel is not None else m["queueId"],
        "queueOffset": m["queueOffset"],
        "keys": m["keys"],
        "tags": m["tags"],
        "body": m.get("body"),
        "bodyLength": m["bodyLength"],
        "properties": _properties(m["properties"]),
        "flag": m["flag"],
        "sysFlag": m["sysFlag"],
        "bodyCRC": m["bodyCRC"],
        "storeSize": m["storeSize"],
        "reconsumeTimes": m["reconsumeTimes"],
        "preparedTransactionOffset": m["preparedTransactionOffset"],
    }


def _content(m: dict) -> dict[str, Any]:
    """A message without its position, for sends whose order the broker may change: async sends pick their queue in
    a thread pool, and Apache's send threads may store a connection's oneway sends out of order. The queue's max
    offset at pull time goes too (it depends on how far the producer got)."""
    out = _message(m)
    del out["queueId"], out["queueOffset"]
    out["properties"] = {k: v for k, v in out["properties"].items() if k not in ("MAX_OFFSET", "MIN_OFFSET")}
    return out


def _by_position(messages: list[dict]) -> list[dict]:
    return sorted(messages, key=lambda m: (m["queueId"], m["queueOffset"]))


def _messages(messages: list[dict], relabel: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Normalized, in (queue, offset) order after relabelling."""
    return _by_position([_message(m, relabel) for m in messages])


def _error(output: Any) -> dict[str, Any]:
    """A failed driver command as the client saw it: exception, message, response codes."""
    assert output.error is not None, f"expected an error, got {output.records}"
    return {k: _text(v) for k, v in output.error.items()}


def _progress(records: list[dict], relabel: dict[int, int] | None = None) -> list[tuple]:
    """A group's offsets per queue (consumer-progress)."""
    return sorted((r["topic"], relabel[r["queueId"]] if relabel else r["queueId"], r["brokerOffset"],
                   r["consumerOffset"]) for r in records)


def _index(m: dict) -> int:
    """The message index the driver wrote into the body ("<prefix>-<i>|xxx")."""
    return int(base64.b64decode(m["body"]).split(b"|")[0].rsplit(b"-", 1)[1])


# -- route and cluster -----------------------------------------------------------------------------------------------


def _route_shape(route: dict, target: Target) -> dict:
    for broker in route["brokerDatas"]:
        assert set(broker["brokerAddrs"].values()) == {target.broker_addr}
        broker["brokerAddrs"] = {k: "<addr>" for k in broker["brokerAddrs"]}
    return route


@params
def test_route_and_cluster(lab: Lab, target: str, serialize: str) -> None:
    r = Run(lab, "route", target, serialize)
    t = lab.target(target)
    topic = r.create_topic("Route")
    (route,) = r.s.call("route", namesrv=r.ns, topic=topic).records
    (cluster,) = r.s.call("cluster", namesrv=r.ns).records
    missing = r.s.call("route", namesrv=r.ns, topic=r.topic("NoSuchRoute"), check=False)
    for broker in cluster["brokerAddrTable"].values():
        broker["brokerAddrs"] = {k: "<addr>" for k in broker["brokerAddrs"]}
    r.observe({"route": _route_shape(route, t), "cluster": cluster, "missing": _error(missing)})

    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [
        (BROKER_NAME, QUEUES, QUEUES, 6)
    ]
    assert cluster["clusterAddrTable"] == {"DefaultCluster": [BROKER_NAME]}
    assert ResponseCode.TOPIC_NOT_EXIST in (missing.error.get("code"), missing.error.get("causeCode"))


# -- producer: sync, async, oneway, batch ----------------------------------------------------------------------------

MODES = ("sync", "async", "oneway", "batch")
USER_PROPERTIES = ["color=red", "n=1"]


def _read_all(r: Run, topic: str, count: int, **flags: object) -> list[dict]:
    """Every message of a topic, through a lite pull consumer of a group new to the topic: without a seek, it starts
    where the broker's QUERY_CONSUMER_OFFSET says such a group starts (0, CONSUME_FROM_FIRST_OFFSET)."""
    pulled = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=r.topic("ReadAll"), max=count,
                      **{"from": "committed"}, **flags)
    assert pulled.summary is not None and not pulled.summary["timedOut"] and not pulled.summary["stale"], pulled.summary
    return _by_position(pulled.records)


@pytest.mark.parametrize("mode", MODES)
@params
def test_produce(lab: Lab, target: str, serialize: str, mode: str) -> None:
    r = Run(lab, f"produce-{mode}", target, serialize)
    topic = r.create_topic(f"Produce{mode.title()}")
    sent = r.s.call("produce", namesrv=r.ns, topic=topic, count=COUNT, size=BODY_SIZE, mode=mode, batch=8,
                    tag=f"Tag{mode}", keys_prefix=f"{mode}-", property=USER_PROPERTIES).records
    consumed = _read_all(r, topic, COUNT)
    if mode == "oneway":
        assert sent == []
        relabel = _relabel(min(consumed, key=_index)["queueId"])
    else:
        relabel = _relabel(min(sent, key=lambda s: s["index"])["queueId"])
    offsets = r.s.call("offsets", namesrv=r.ns, topic=topic).records
    if mode in ("sync", "batch"):  # one send after the other: the positions are deterministic
        r.observe({
            "sent": _sent(sent, relabel),
            "consumed": _messages(consumed, relabel),
            "offsets": sorted((relabel[o["queueId"]], o["minOffset"], o["maxOffset"]) for o in offsets),
        })
    else:
        # oneway: sent in order from one thread, but Apache's send threads may store them out of order; async: the
        # queue is picked in the client's callback pool, each thread with its own round-robin index.
        positions = sorted((relabel[m["queueId"]], m["queueOffset"]) for m in consumed)
        r.observe({
            "sent": sorted((s["sendStatus"], s["topic"], s["keys"], s["tags"], s["bodyLength"], s["regionId"],
                            s["traceOn"]) for s in sent),
            "positions": positions if mode == "oneway" else len(positions),
            "consumed": sorted((_content(m) for m in consumed), key=lambda m: m["keys"]),
            "offsets": sorted((relabel[o["queueId"]], o["minOffset"], o["maxOffset"]) for o in offsets)
            if mode == "oneway" else sum(o["maxOffset"] - o["minOffset"] for o in offsets),
        })

    assert sorted(_index(m) for m in consumed) == list(range(COUNT))
    for m in consumed:
        i = _index(m)
        assert base64.b64decode(m["body"]) == driver_body(i, BODY_SIZE)
        assert (m["keys"], m["tags"]) == (f"{mode}-{i}", f"Tag{mode}")
        assert {k: m["properties"].get(k) for k in ("color", "n")} == {"color": "red", "n": "1"}
    if mode != "oneway":
        assert {s["sendStatus"] for s in sent} == {"SEND_OK"}
        by_index = {s["index"]: s for s in sent}
        for m in consumed:
            s = by_index[_index(m)]
            assert (m["queueId"], m["queueOffset"], m["msgId"]) == (s["queueId"], s["queueOffset"], s["msgId"])
            assert m["offsetMsgId"] == s["offsetMsgId"]
    per_queue = defaultdict(list)
    for m in consumed:
        per_queue[m["queueId"]].append(m["queueOffset"])
    assert all(offs == list(range(len(offs))) for offs in per_queue.values()), per_queue


# -- lite pull consumer: assign and seek -----------------------------------------------------------------------------


@params
def test_lite_pull_assign_seek(lab: Lab, target: str, serialize: str) -> None:
    r = Run(lab, "lite-pull", target, serialize)
    topic = r.create_topic("LitePull", queues=2)
    for q in (0, 1):
        r.s.call("produce", namesrv=r.ns, topic=topic, count=10, size=BODY_SIZE, queue=q, body_prefix=f"q{q}",
                 keys_prefix=f"q{q}-")
    group = r.topic("LitePullGroup")
    one = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=group, queue=1, max=6, **{"from": "offsets"},
                   offsets="1:4")
    both = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=group, max=13, **{"from": "offsets"},
                    offsets="0:7")
    beyond = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=group, queue=0, max=1, timeout_ms=2000,
                      check=False, **{"from": "offsets"}, offsets="0:11")
    at_end = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=group, queue=0, max=1, timeout_ms=1500,
                      **{"from": "offsets"}, offsets="0:10")
    # Pulls of 4 messages; the first 5 are taken and committed (offset 5), and a consumer of the group that does
    # not seek resumes there.
    committing = r.topic("LitePullCommit")
    polled = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=committing, queue=0, max=5, pull_batch=4,
                      commit=True, **{"from": "committed"})
    progress = r.s.call("consumer-progress", namesrv=r.ns, topic=topic, group=committing, wait_consumed=5).records
    resumed = r.s.call("consume-pull", namesrv=r.ns, topic=topic, group=committing, queue=0, max=2,
                       **{"from": "committed"})
    r.observe({
        "one": _messages(one.records),
        "both": _messages(both.records),
        "beyond": _error(beyond),
        "at_end": (at_end.records, at_end.summary["count"], at_end.summary["timedOut"]),
        "polled": _messages(polled.records),
        "progress": _progress(progress),
        "resumed": _messages(resumed.records),
    })

    assert [(m["queueId"], m["queueOffset"], m["keys"]) for m in _by_position(one.records)] == [
        (1, o, f"q1-{o}") for o in range(4, 10)
    ]
    assert [(m["queueId"], m["queueOffset"]) for m in _by_position(both.records)] == [
        (0, 7), (0, 8), (0, 9), *((1, o) for o in range(10))
    ]
    # The driver drops (and counts as stale) a message before the offset it expects next on its queue: none here.
    assert [x.summary["stale"] for x in (one, both, at_end, polled, resumed)] == [0] * 5
    assert "Seek offset illegal" in beyond.error["error"]
    assert at_end.records == [] and at_end.summary["timedOut"]
    assert [m["queueOffset"] for m in _by_position(polled.records)] == list(range(5))
    assert [(p["queueId"], p["brokerOffset"], p["consumerOffset"]) for p in progress if p["queueId"] == 0] == [
        (0, 10, 5)
    ]
    assert [m["queueOffset"] for m in _by_position(resumed.records)] == [5, 6]


# -- query by key and by id ------------------------------------------------------------------------------------------


@params
def test_query_by_key_and_id(lab: Lab, target: str, serialize: str) -> None:
    r = Run(lab, "query", target, serialize)
    topic = r.create_topic("Query")
    sent = {s["index"]: s for s in r.s.call("produce", namesrv=r.ns, topic=topic, count=COUNT, size=BODY_SIZE,
                                             keys_prefix="qk-", tag="TagQ").records}
    by_key = r.s.call("query-key", namesrv=r.ns, topic=topic, key="qk-7")
    no_key = r.s.call("query-key", namesrv=r.ns, topic=topic, key="no-such-key")
    by_id = r.s.call("query-id", namesrv=r.ns, topic=topic, id=sent[13]["msgId"])
    by_offset_id = r.s.call("query-id", namesrv=r.ns, topic=topic, offset_id=sent[13]["offsetMsgId"])
    no_id = r.s.call("query-id", namesrv=r.ns, topic=topic, id="0" * len(sent[13]["msgId"]))
    relabel = _relabel(sent[0]["queueId"])
    r.observe({
        "by_key": [_message(m, relabel) for m in by_key.records],
        "no_key": no_key.summary,
        "by_id": [_message(m, relabel) for m in by_id.records],
        "by_offset_id": [_message(m, relabel) for m in by_offset_id.records],
        "no_id": no_id.summary,
    })

    assert [(m["msgId"], m["keys"], m["queueOffset"]) for m in by_key.records] == [
        (sent[7]["msgId"], "qk-7", sent[7]["queueOffset"])
    ]
    assert no_key.records == [] and no_id.records == []
    assert [m["msgId"] for m in by_id.records] == [sent[13]["msgId"]]
    assert [(m["msgId"], m["offsetMsgId"]) for m in by_offset_id.records] == [
        (sent[13]["msgId"], sent[13]["offsetMsgId"])
    ]
    assert base64.b64decode(by_offset_id.records[0]["body"]) == driver_body(13, BODY_SIZE)


# -- push consumers: clustering, two instances, one leaves -----------------------------------------------------------


def _positions(messages: list[dict]) -> list[tuple[int, int]]:
    return sorted((m["queueId"], m["queueOffset"]) for m in messages)


@params
def test_push_clustering_takeover(lab: Lab, target: str, serialize: str) -> None:
    """Two push consumers of one group split the queues; one stops and the other takes its queues over from the
    committed offsets: every message of both rounds consumed, none twice."""
    r = Run(lab, "push-takeover", target, serialize)
    topic = r.create_topic("PushTakeover")
    group = r.topic("PushGroup")
    a, b = r.topic("push-a"), r.topic("push-b")
    for name in (a, b):
        r.s.call("push-start", namesrv=r.ns, topic=topic, group=group, name=name, heartbeat_ms=HEARTBEAT_MS)
    balanced = r.s.call("push-balance", names=f"{a},{b}", topic_queues=QUEUES).records
    split = {x["consumer"]: x["queues"] for x in balanced}
    r.s.call("produce", namesrv=r.ns, topic=topic, count=COUNT, size=BODY_SIZE, keys_prefix="round1-")
    first = r.s.call("push-await", names=f"{a},{b}", count=COUNT, settle_ms=300, timeout_ms=PUSH_TIMEOUT_MS)
    b_first = [m for m in first.records if m["consumer"] == b]
    stop_a = r.s.call("push-stop", name=a)
    # a committed its queues as it shut down; b commits every 5 s, so only a's queues are certain here.
    half = [p for p in r.s.call("consumer-progress", namesrv=r.ns, topic=topic, group=group,
                                wait_consumed=COUNT // 2).records if p["queueId"] in split[a]]
    (alone,) = r.s.call("push-balance", names=b, topic_queues=QUEUES).records
    r.s.call("produce", namesrv=r.ns, topic=topic, count=COUNT, size=BODY_SIZE, keys_prefix="round2-")
    second = r.s.call("push-await", names=b, count=len(b_first) + COUNT, settle_ms=300, timeout_ms=PUSH_TIMEOUT_MS)
    stop_b = r.s.call("push-stop", name=b)
    done = r.s.call("consumer-progress", namesrv=r.ns, topic=topic, group=group, wait_consumed=2 * COUNT).records
    every = first.records + stop_a.records + second.records + stop_b.records
    r.observe({
        "split": {("a" if k == a else "b"): v for k, v in split.items()},
        "after": alone["queues"],
        "first": {n: _positions([m for m in first.records if m["consumer"] == c]) for n, c in (("a", a), ("b", b))},
        "second": _positions(second.records + stop_b.records),
        "duplicates": sorted(k for k, n in Counter(m["msgId"] for m in every).items() if n > 1),
        "messages": sorted((_content(m) for m in every), key=lambda m: m["keys"]),
        "progress": (_progress(half), _progress(done)),
    })

    assert not first.summary["timedOut"] and not second.summary["timedOut"], (first.summary, second.summary)
    assert split == {a: [0, 1], b: [2, 3]}  # AllocateMessageQueueAveragely over the sorted client ids
    assert alone["queues"] == list(range(QUEUES))
    for name in (a, b):
        assert {m["queueId"] for m in first.records if m["consumer"] == name} <= set(split[name])
    keys = sorted(m["keys"] for m in every)
    assert keys == sorted([f"round1-{i}" for i in range(COUNT)] + [f"round2-{i}" for i in range(COUNT)]), keys
    assert {m["consumer"] for m in second.records} <= {b}
    assert _positions(second.records + stop_b.records) == sorted((q, o) for q in range(QUEUES) for o in range(5, 10))
    assert [(p["queueId"], p["consumerOffset"]) for p in sorted(half, key=lambda p: p["queueId"])] == [(0, 5), (1, 5)]
    assert [(p["queueId"], p["consumerOffset"]) for p in sorted(done, key=lambda p: p["queueId"])] == [
        (q, 10) for q in range(QUEUES)
    ]


@params
def test_push_orderly(lab: Lab, target: str, serialize: str) -> None:
    """An orderly push consumer (LOCK_BATCH_MQ before it consumes a queue): each queue in offset order."""
    r = Run(lab, "push-orderly", target, serialize)
    topic = r.create_topic("PushOrderly")
    sent = r.s.call("produce", namesrv=r.ns, topic=topic, count=COUNT, size=BODY_SIZE, keys_prefix="o-").records
    relabel = _relabel(min(sent, key=lambda s: s["index"])["queueId"])
    group = r.topic("OrderlyGroup")
    pushed = r.s.call("consume-push", namesrv=r.ns, topic=topic, group=group, max=COUNT, orderly=True,
                      heartbeat_ms=HEARTBEAT_MS, timeout_ms=PUSH_TIMEOUT_MS)
    # No consumer-progress here: an orderly consumer unlocks its queues (a 1 s RPC) before it persists its offsets,
    # and on a loaded machine a timed-out unlock closes the connection the offsets were to go on (seen on Apache).
    in_order: dict[int, list[int]] = defaultdict(list)
    for m in pushed.records:
        in_order[relabel[m["queueId"]]].append(m["queueOffset"])
    r.observe({
        "order": dict(sorted(in_order.items())),
        "messages": sorted((_content(m) for m in pushed.records), key=lambda m: m["keys"]),
    })

    assert not pushed.summary["timedOut"]
    assert all(offsets == list(range(5)) for offsets in in_order.values()) and len(in_order) == QUEUES, in_order


@params
def test_compressed_body(lab: Lab, target: str, serialize: str) -> None:
    """Bodies over compressMsgBodyOverHowmuch (4 KiB) go compressed (SysFlag COMPRESSED) and come back whole."""
    r = Run(lab, "compressed", target, serialize)
    topic = r.create_topic("Compressed", queues=1)
    size = 6000
    r.s.call("produce", namesrv=r.ns, topic=topic, count=3, size=size, keys_prefix="z-")
    consumed = _read_all(r, topic, 3)
    r.observe({"consumed": _messages(consumed)})

    assert [base64.b64decode(m["body"]) for m in consumed] == [driver_body(i, size) for i in range(3)]
    assert all(m["storeSize"] < size for m in consumed)  # stored compressed (the client clears the flag on decode)


# -- errors ----------------------------------------------------------------------------------------------------------


@params
def test_send_errors(lab: Lab, target: str, serialize: str) -> None:
    """What the broker answers a send it must refuse (seen raw, past the client's own checks), and what a producer
    reports for a topic nobody created (autoCreateTopicEnable=false) or a name it refuses itself."""
    r = Run(lab, "errors", target, serialize)
    existing = r.create_topic("ErrorsExisting")
    raw = {
        "illegal": r.s.call("send-raw", namesrv=r.ns, topic="Illegal#Topic").records,
        "not_exist": r.s.call("send-raw", namesrv=r.ns, topic=r.topic("NoSuchTopic")).records,
        "forbidden": r.s.call("send-raw", namesrv=r.ns, topic="SCHEDULE_TOPIC_XXXX").records,
        "bad_queue": r.s.call("send-raw", namesrv=r.ns, topic=existing, queue=QUEUES + 5).records,
        "ok": r.s.call("send-raw", namesrv=r.ns, topic=existing, queue=1).records,
        "too_long": r.s.call("send-raw", namesrv=r.ns, topic="L" * 128).records,
        # A retry topic is created on a send even without auto-creation (createTopicInSendMessageBackMethod);
        # a DLQ topic is not.
        "retry_topic": r.s.call("send-raw", namesrv=r.ns, topic=f"%RETRY%{r.topic('NoGroup')}").records,
        "dlq_topic": r.s.call("send-raw", namesrv=r.ns, topic=f"%DLQ%{r.topic('NoGroup')}").records,
    }
    produce_missing = r.s.call("produce", namesrv=r.ns, topic=r.topic("NoSuchTopic"), check=False, retries=0,
                               timeout_ms=3000)
    produce_illegal = r.s.call("produce", namesrv=r.ns, topic="Illegal#Topic", check=False)
    pull_missing = r.s.call("consume-pull", namesrv=r.ns, topic=r.topic("NoSuchTopic"), max=1, check=False)
    r.observe({
        "raw": {k: [{f: _text(v) for f, v in rec.items()} for rec in recs] for k, recs in raw.items()},
        "produce_missing": _error(produce_missing),
        "produce_illegal": _error(produce_illegal),
        "pull_missing": _error(pull_missing),
    })

    assert [x["code"] for x in raw["illegal"]] == [ResponseCode.INVALID_PARAMETER]
    assert [x["code"] for x in raw["not_exist"]] == [ResponseCode.TOPIC_NOT_EXIST]
    assert [x["code"] for x in raw["forbidden"]] == [ResponseCode.NO_PERMISSION]
    assert [x["code"] for x in raw["bad_queue"]] == [ResponseCode.INVALID_PARAMETER]
    assert raw["ok"] == [{"sendStatus": "SEND_OK", "queueId": 1, "queueOffset": 0}]
    assert [x["code"] for x in raw["too_long"]] == [ResponseCode.INVALID_PARAMETER]
    assert [x.get("sendStatus") for x in raw["retry_topic"]] == ["SEND_OK"]
    assert [x["code"] for x in raw["dlq_topic"]] == [ResponseCode.TOPIC_NOT_EXIST]


# -- the 4.9.x client ------------------------------------------------------------------------------------------------


@params
def test_client49_produce_pull_push(lab: Lab, target: str, serialize: str) -> None:
    """rocketmq-client 4.9.x: sync and batch sends, a lite pull with assign and seek, a push consumer."""
    r = Run(lab, "client49", target, serialize, client="49")
    sync_topic, batch_topic = r.create_topic("Client49Sync"), r.create_topic("Client49Batch")
    sync = r.s.call("produce", namesrv=r.ns, topic=sync_topic, count=COUNT, size=BODY_SIZE, keys_prefix="s-",
                    tag="T49", property=USER_PROPERTIES).records
    batch = r.s.call("produce", namesrv=r.ns, topic=batch_topic, count=COUNT // 2, size=BODY_SIZE, keys_prefix="b-",
                     mode="batch", batch=5, body_prefix="batch").records
    sync_relabel, batch_relabel = _relabel(sync[0]["queueId"]), _relabel(batch[0]["queueId"])
    group = r.topic("Pull49")
    # A new group, no seek: the broker's answer to QUERY_CONSUMER_OFFSET decides where it starts.
    pulled = r.s.call("consume-pull", namesrv=r.ns, topic=sync_topic, max=COUNT, group=group, **{"from": "committed"})
    pulled_batch = r.s.call("consume-pull", namesrv=r.ns, topic=batch_topic, max=COUNT // 2, group=group,
                            **{"from": "committed"})
    seek_q = sync[0]["queueId"]
    seeked = r.s.call("consume-pull", namesrv=r.ns, topic=sync_topic, queue=seek_q, max=2, group=group,
                      **{"from": "offsets"}, offsets=f"{seek_q}:3")
    pushed = r.s.call("consume-push", namesrv=r.ns, topic=sync_topic, group=r.topic("Push49"), max=COUNT,
                      timeout_ms=PUSH_TIMEOUT_MS, heartbeat_ms=HEARTBEAT_MS)
    r.observe({
        "sync": _sent(sync, sync_relabel),
        "batch": _sent(batch, batch_relabel),
        "pulled": _messages(pulled.records, sync_relabel),
        "pulled_batch": _messages(pulled_batch.records, batch_relabel),
        "seeked": _messages(seeked.records, sync_relabel),
        "pushed": _messages(pushed.records, sync_relabel),
    })

    assert {s["sendStatus"] for s in sync + batch} == {"SEND_OK"}
    assert sorted(m["keys"] for m in pulled.records) == sorted(s["keys"] for s in sync)
    assert sorted(m["keys"] for m in pulled_batch.records) == sorted(s["keys"] for s in batch)
    assert [(m["queueId"], m["queueOffset"]) for m in _by_position(seeked.records)] == [(seek_q, 3), (seek_q, 4)]
    assert [x.summary["stale"] for x in (pulled, pulled_batch, seeked)] == [0, 0, 0]
    assert not pushed.summary["timedOut"]
    assert sorted(m["keys"] for m in pushed.records) == sorted(s["keys"] for s in sync)


# -- differential: what a client saw on rmq must equal what it saw on Apache -----------------------------------------

SCENARIOS = ("route", *(f"produce-{m}" for m in MODES), "lite-pull", "query", "push-takeover", "push-orderly",
             "compressed", "errors", "client49")


@pytest.mark.parametrize("serialize", SERIALIZE)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rmq_observes_as_apache(lab: Lab, scenario: str, serialize: str) -> None:
    seen = {t: lab.observations.get((scenario, serialize, t)) for t in TARGETS}
    missing = [t for t, obs in seen.items() if obs is None]
    if missing:
        pytest.fail(f"scenario {scenario} ({serialize}) recorded nothing on {missing}: see its own test")
    differences = _differences(seen["rmq"], seen["apache"])
    assert not differences, "rmq != apache:\n" + "\n".join(differences[:30])


def _differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Leaf by leaf, where two observations differ (pytest's own diff truncates nested structures)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in list(ours) + [k for k in theirs if k not in ours]:
            if key not in theirs or key not in ours:
                out.append(f"{path}.{key}: rmq {ours.get(key, '<missing>')!r} apache {theirs.get(key, '<missing>')!r}")
            else:
                out += _differences(ours[key], theirs[key], f"{path}.{key}")
        return out
    if isinstance(ours, list | tuple) and isinstance(theirs, list | tuple) and len(ours) == len(theirs):
        pairs = enumerate(zip(ours, theirs, strict=True))
        return [d for i, (a, b) in pairs for d in _differences(a, b, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: rmq {ours!r} apache {theirs!r}"]
