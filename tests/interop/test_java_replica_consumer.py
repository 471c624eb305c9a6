"""The official Java push consumer against our master and slave: when our master is SIGKILLed it goes on consuming
from our slave (its pulls fall back to the slave, its offsets are committed there), and when the master is back it
returns to it and commits there the progress it made on the slave. Java's client is the judge of what our brokers
and NameServer tell it: the route without the master, the slave's pull answers and suggestWhichBrokerId.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, MessageQueue, SendStatus
from tests.apache import DriverSession, apache_client
from tests.helpers import wait_until
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv
from tests.integration.replication import (
    committed_offsets,
    consumed_to_the_end,
    create_topic_on,
    ha_address,
    has_topic,
    max_offsets,
)
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java]

TOPIC = "JavaHaTopic"
GROUP = "java_ha_group"
QUEUES = 2
PAIR_CONF: dict[str, object] = {"slaveSynchronizeInterval": 2000}
SLAVE_CONF: dict[str, object] = {"brokerId": 1, "brokerRole": "SLAVE", "slaveReadEnable": True}
# The consumer sees the route change within 0.5 s, commits every 0.5 s, and fetches at most 4 messages a pull: while
# suspended it can only have what its pulls held by the master bring back, so most of a batch is left for the slave.
CONSUMER = {"heartbeat_ms": 1000, "poll_namesrv_ms": 500, "persist_offset_ms": 500, "pull_batch_size": 4,
            "pull_threshold_for_queue": 5, "body_format": "utf8"}
WAIT_S = 30.0


def _send(namesrv: ServerProcess, first: int, count: int) -> list[str]:
    bodies = [f"java-ha-{i}" for i in range(first, first + count)]
    with BlockingClient(namesrv.addr) as client:
        for body in bodies:
            assert client.send(Message(TOPIC, body.encode())).send_status is SendStatus.SEND_OK
    return bodies


def _received(session: DriverSession, total: int) -> list[str]:
    """What the consumer got since the last call, once it has received ``total`` messages since it started."""
    out = session.call("push-await", names="c1", count=total, timeout_ms=int(WAIT_S * 1000))
    assert out.summary is not None and not out.summary["timedOut"], out.summary
    return [record["body"] for record in out.records]


def test_java_consumer_follows_our_master_to_the_slave_and_back(tmp_path: Path) -> None:
    try:
        driver = apache_client(tmp_path / "java")
    except JavaToolError as err:
        pytest.fail(f"cannot build the Apache client driver: {err}", pytrace=False)
    mqs = [MessageQueue(TOPIC, "broker-a", i) for i in range(QUEUES)]
    with start_namesrv(tmp_path / "namesrv") as namesrv:
        master = start_broker(tmp_path / "master", namesrv.addr, **PAIR_CONF)
        slave = start_broker(tmp_path / "slave", namesrv.addr, haMasterAddress=ha_address(master),
                             **(PAIR_CONF | SLAVE_CONF))
        try:
            create_topic_on(master.addr, TOPIC, QUEUES)
            with driver.session() as session:
                session.call("push-start", namesrv=namesrv.addr, topic=TOPIC, group=GROUP, name="c1", **CONSUMER)
                sent = _send(namesrv, 0, 20)
                got = _received(session, 20)
                assert sorted(got) == sorted(sent)

                session.call("push-suspend", name="c1")
                sent += _send(namesrv, 20, 60)
                wait_until("the slave has the topic", lambda: has_topic(slave.addr, TOPIC), WAIT_S)
                wait_until("the slave holds every message",
                            lambda: max_offsets(slave.addr, mqs) == max_offsets(master.addr, mqs), WAIT_S)
                port = master.port
                master.kill()
                held = _received(session, 20)  # what the held pulls brought before the kill
                assert len(held) <= QUEUES * 4, held
                session.call("push-resume", name="c1")
                got += held + _received(session, 80)
                assert set(got) == set(sent)  # at least 52 of them read from the slave: the master was dead
                wait_until("the Java consumer's offsets are committed on the slave",
                           lambda: consumed_to_the_end(slave.addr, [GROUP], mqs), WAIT_S)

                master = start_broker(tmp_path / "master", namesrv.addr, port=port, **PAIR_CONF)
                sent += _send(namesrv, 80, 20)
                got += _received(session, 100)
                assert set(got) == set(sent)
                # the master had what it flushed before the kill; the consumer commits what it did on the slave
                wait_until("the Java consumer's offsets are committed on the restarted master",
                           lambda: consumed_to_the_end(master.addr, [GROUP], mqs), WAIT_S)
                wait_until("the slave copies them back from its master",
                           lambda: committed_offsets(slave.addr, GROUP, mqs) == max_offsets(master.addr, mqs), WAIT_S)
                session.call("push-stop", name="c1")
        finally:
            slave.close()
            master.close()
