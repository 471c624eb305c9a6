"""Issue 4 with Apache RocketMQ's own Java code as the judge: the SQL92 selector against Apache's SelectorParser
(rocketmq-filter, through tests/java/sql92/Sql92Oracle.java), and the official Java client's MessageSelector.bySql /
byTag push consumers and MessageListenerOrderly consumers through our NameServer and broker.

Orderly consumption is checked the way it can be seen from outside: per queue, no message is delivered before its
predecessor was (re-deliveries after a hand-over are allowed, as the Java client commits at least once), every
message arrives, and the consumers' deliveries are put in one order by the driver's JVM-wide "seq" counter.
"""

from __future__ import annotations

import base64
import random
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.common.errors import FilterExpressionError
from broker.remoting.codes import ResponseCode
from broker.server.filter.sql92 import compile_selector
from broker.server.filter.sql92_expressions import JavaThrow
from tests.apache import DriverError, DriverSession, apache_client
from tests.integration.cluster import ClusterPool
from tests.javatools import JavaProgram, JavaToolError, build_program, rocketmq_artifact
from tests.unit.test_sql92 import EVALUATIONS, PARSE_ERRORS, SYNTAX_ERRORS, TEXTS

pytestmark = [pytest.mark.java]

FILTER_VERSION = "5.5.0"  # the rocketmq-filter of the Apache broker the other interop tests run


# -- the selector against Apache's SelectorParser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sql92_oracle() -> JavaProgram:
    try:
        return build_program("sql92", "Sql92Oracle", [rocketmq_artifact("rocketmq-filter", FILTER_VERSION)])
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the SQL92 oracle: {reason}", pytrace=False)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def java_answers(oracle: JavaProgram, cases: list[tuple[str, dict[str, str]]]) -> list[tuple[str, ...]]:
    """("OK", toString, TRUE|FALSE|NULL|THROW) or ("ERR", message) per case, from Apache's parser."""
    lines = [" ".join([_b64(expr), *(f"{_b64(k)}:{_b64(v)}" for k, v in props.items())]) for expr, props in cases]
    done = subprocess.run(oracle.command(), input=("\n".join(lines) + "\n").encode(), capture_output=True,
                          timeout=300, check=True)
    answers = []
    for line in done.stdout.decode().splitlines():
        kind, *rest = line.split(" ")
        answers.append((kind, base64.b64decode(rest[0]).decode(), *rest[1:]))
    assert len(answers) == len(cases), done.stderr.decode()[-2000:]
    return answers


def our_answer(expression: str, properties: dict[str, str]) -> tuple[str, ...]:
    try:
        selector = compile_selector(expression)
    except FilterExpressionError as err:
        return ("ERR", str(err))
    try:
        value = selector.evaluate(properties)
        result = "NULL" if value is None else str(value).upper()
    except JavaThrow:
        result = "THROW"
    return ("OK", selector.text, result)


def _same(java: tuple[str, ...], ours: tuple[str, ...]) -> bool:
    """Equal answers; for syntax errors the Java class and position (JavaCC's token lists are not reproduced)."""
    if java == ours:
        return True
    if java[0] == ours[0] == "ERR" and "parser." in java[1]:
        return java[1].split(".\n")[0] == ours[1].split(".\n")[0] or java[1].split(":")[0] == ours[1].split(":")[0]
    return False


def test_unit_tables_are_javas(sql92_oracle: JavaProgram) -> None:
    """Every expectation of tests/unit/test_sql92.py is what Apache's selector does."""
    cases = [(e, p) for e, p, _ in EVALUATIONS] + [(e, {}) for e, _ in TEXTS + PARSE_ERRORS]
    cases += [(e, {}) for e in SYNTAX_ERRORS if e]
    java = java_answers(sql92_oracle, cases)
    mismatches = [(case, j, our_answer(*case)) for case, j in zip(cases, java, strict=True)
                  if not _same(j, our_answer(*case))]
    assert not mismatches


def _random_expression(rng: random.Random, depth: int = 0) -> str:
    operand = rng.choice(["a", "b", "c", "5", "-5", "2147483648", "1.5", "-1.5E3", "'x'", "'5'", "TRUE", "NULL"])
    if depth > 2 or rng.random() < 0.3:
        return operand
    pick = rng.randrange(11)
    sub = _random_expression(rng, depth + 1)
    if pick == 0:
        return f"{sub} {rng.choice(['=', '<>', '>', '>=', '<', '<='])} {_random_expression(rng, depth + 1)}"
    if pick == 1:
        return f"{sub} {rng.choice(['AND', 'OR'])} {_random_expression(rng, depth + 1)}"
    if pick == 2:
        return f"NOT {sub}"
    if pick == 3:
        return f"({sub})"
    if pick == 4:
        return f"{sub} {rng.choice(['', 'NOT '])}BETWEEN {operand} AND {rng.choice(['10', '2.5', 'b', '-1'])}"
    if pick == 5:
        return f"{rng.choice(['a', 'b', sub])} {rng.choice(['', 'NOT '])}IN ('x', '5', 'true')"
    if pick == 6:
        return f"{sub} IS {rng.choice(['', 'NOT '])}NULL"
    if pick == 7:
        return f"{sub} {rng.choice(['', 'NOT '])}{rng.choice(['CONTAINS', 'STARTSWITH', 'ENDSWITH'])} 'x'"
    return f"{sub} {rng.choice(['=', '>', 'AND', 'OR'])} {_random_expression(rng, depth + 1)}"


def test_random_selectors_agree_with_java(sql92_oracle: JavaProgram) -> None:
    """Generated selectors over mixed types: the same parse result, error text and verdict as Apache's."""
    rng = random.Random(4)
    values = ["5", "-5", "x", "5.0", "true", "TRUE", " 7", "NaN", "2147483648", "", "1e3"]
    cases = []
    for _ in range(1500):
        props = {name: rng.choice(values) for name in ("a", "b", "c") if rng.random() < 0.7}
        cases.append((_random_expression(rng), props))
    java = java_answers(sql92_oracle, cases)
    mismatches = [(case, j, our_answer(*case)) for case, j in zip(cases, java, strict=True)
                  if not _same(j, our_answer(*case))]
    assert not mismatches[:10]
    assert sum(1 for j in java if j[0] == "OK") > 300  # the generator must reach evaluation, not only errors


# -- the official Java client through our broker ------------------------------------------------------------------


@pytest.fixture(scope="module")
def rmq(clusters: ClusterPool, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The suite's shared cluster with SQL92 filters on, and a directory for the client's logs."""
    return clusters.shared(enablePropertyFilter=True).namesrv_addr, tmp_path_factory.mktemp("java-filters-ordered")


@pytest.fixture(scope="module")
def session(rmq: tuple[str, Path]) -> Iterator[DriverSession]:
    try:
        client = apache_client(rmq[1] / "client")
    except JavaToolError as err:
        pytest.fail(f"cannot build the Apache client driver: {err}", pytrace=False)
    with client.session() as started:
        yield started


def _bodies(records: list[dict[str, Any]]) -> list[str]:
    return sorted(base64.b64decode(r["body"]).decode().split("|")[0] for r in records)


def test_java_selectors_by_sql_and_by_tag(rmq: tuple[str, Path], session: DriverSession) -> None:
    namesrv = rmq[0]
    topic = f"JavaSel{uuid.uuid4().hex[:6]}"
    session.call("create-topic", namesrv=namesrv, topic=topic, queues=4)
    sql, tag = "price BETWEEN 10 AND 19 AND TAGS <> 'TagB'", "TagA || TagC"
    session.call("push-start", namesrv=namesrv, topic=topic, group="java_cg_sql", name="sql", sql=sql)
    session.call("push-start", namesrv=namesrv, topic=topic, group="java_cg_tag", name="tag", tag=tag)
    try:
        session.call("produce", namesrv=namesrv, topic=topic, count=30, property_seq="price",
                     tag_cycle="TagA,TagB,TagC", body_prefix="sel")
        want_sql = sorted(f"sel-{i}" for i in range(10, 20) if i % 3 != 1)
        want_tag = sorted(f"sel-{i}" for i in range(30) if i % 3 != 1)
        got_sql = session.call("push-await", names="sql", count=len(want_sql), settle_ms=1000, timeout_ms=45_000)
        got_tag = session.call("push-await", names="tag", count=len(want_tag), settle_ms=500, timeout_ms=45_000)
        assert _bodies(got_sql.records) == want_sql
        assert _bodies(got_tag.records) == want_tag
        assert all(10 <= int(r["properties"]["price"]) <= 19 for r in got_sql.records)
    finally:
        session.call("push-stop", name="sql")
        session.call("push-stop", name="tag")


def test_java_consumer_with_a_bad_selector_does_not_start(rmq: tuple[str, Path], session: DriverSession) -> None:
    namesrv = rmq[0]
    topic = f"JavaBad{uuid.uuid4().hex[:6]}"
    session.call("create-topic", namesrv=namesrv, topic=topic, queues=4)
    with pytest.raises(DriverError) as caught:
        session.call("consume-push", namesrv=namesrv, topic=topic, group="java_cg_bad", max=1, timeout_ms=5000,
                     sql="price > 'x'")
    error = next(line for line in caught.value.output if "error" in line)
    assert error["code"] == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "java.lang.RuntimeException: Value ''x'' cannot be compared." in error["error"]


def _assert_in_order(records: list[dict[str, Any]], expected_per_queue: dict[int, int]) -> None:
    """No message before its predecessor (by the JVM-wide seq), every message of every queue delivered, and each
    queue handed from consumer to consumer at most three times (join, restart, join): two consumers taking turns
    on one queue would mean both held it."""
    by_queue: dict[int, list[int]] = defaultdict(list)
    owners: dict[int, list[str]] = defaultdict(list)
    for record in sorted(records, key=lambda r: r["seq"]):
        by_queue[record["queueId"]].append(record["queueOffset"])
        if not owners[record["queueId"]] or owners[record["queueId"]][-1] != record["consumer"]:
            owners[record["queueId"]].append(record["consumer"])
    assert all(len(names) <= 4 for names in owners.values()), dict(owners)
    for queue, count in expected_per_queue.items():
        seen: set[int] = set()
        for offset in by_queue[queue]:
            assert offset == 0 or offset - 1 in seen, (queue, offset, by_queue[queue])
            seen.add(offset)
        assert seen == set(range(count)), (queue, sorted(set(range(count)) - seen))


def test_java_orderly_consumers_keep_order_across_a_rebalance_and_a_restart(rmq: tuple[str, Path],
                                                                            session: DriverSession) -> None:
    namesrv = rmq[0]
    topic = f"JavaOrd{uuid.uuid4().hex[:6]}"
    group = "java_cg_orderly"
    session.call("create-topic", namesrv=namesrv, topic=topic, queues=4)
    sent: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []

    def produce(count: int, prefix: str) -> None:
        sent.extend(session.call("produce", namesrv=namesrv, topic=topic, count=count, mode="ordered", shard_keys=8,
                                 body_prefix=prefix).records)

    def start(name: str, **flags: object) -> None:
        session.call("push-start", namesrv=namesrv, topic=topic, group=group, name=name, orderly=True, **flags)

    produce(40, "p1")
    start("o1", suspend_every=7)
    records += session.call("push-await", names="o1", count=20, timeout_ms=45_000).records
    start("o2")  # joins midway: two of the four queues move to it
    produce(160, "p2")
    session.call("push-balance", names="o1,o2", topic_queues=4, timeout_ms=60_000)
    records += session.call("push-await", names="o1,o2", count=150, timeout_ms=60_000).records
    records += session.call("push-stop", name="o1").records  # a restart: its queues move to o2, then some back
    start("o3")
    session.call("push-balance", names="o2,o3", topic_queues=4, timeout_ms=60_000)
    produce(40, "p3")
    keys_of = {(r["queueId"], r["queueOffset"]) for r in sent}
    deadline = time.monotonic() + 90
    while {(r["queueId"], r["queueOffset"]) for r in records} != keys_of and time.monotonic() < deadline:
        records += session.call("push-await", names="o2,o3", count=0, settle_ms=500).records
    records += session.call("push-stop", name="o2").records
    records += session.call("push-stop", name="o3").records
    per_queue: dict[int, int] = defaultdict(int)
    for r in sent:
        per_queue[r["queueId"]] = max(per_queue[r["queueId"]], r["queueOffset"] + 1)
    _assert_in_order(records, dict(per_queue))
    assert {r["consumer"] for r in records} == {"o1", "o2", "o3"}
    queues_of_key: dict[str, set[int]] = defaultdict(set)  # SelectMessageQueueByHash: one queue per sharding key
    for r in records:
        queues_of_key[r["properties"]["orderKey"]].add(r["queueId"])
    assert len(queues_of_key) == 8 and all(len(queues) == 1 for queues in queues_of_key.values())
