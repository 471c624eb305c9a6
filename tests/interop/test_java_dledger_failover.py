"""The official Java client across a DLedger failover of ours (tests/integration/dledger_processes.py: three
``python -m broker`` members on short DLedger timings).

ClientDriver's producer sends one message at a time (failed sends recorded, not fatal; its route polled every
POLL_MS) while the master is SIGKILLed; it goes on through the new master. Then a push consumer reads from offset 0
and gets every message the producer saw acknowledged, with the msgId and queue offset its send answered.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from broker.client.blocking import BlockingClient
from broker.common.message import MessageQueue
from tests.apache import ApacheClient, DriverOutput, apache_client
from tests.helpers import wait_until
from tests.integration.dledger_processes import GROUP, QUEUES, dledger_group
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC = "DLedgerJavaFailover"
COUNT = 400
PAUSE_MS = 20  # COUNT sends take 8 s and more: the kill falls among them
POLL_MS = 500  # the producer's pollNameServerInterval


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    try:
        return apache_client(tmp_path_factory.mktemp("dledger-java-client"))
    except JavaToolError as err:
        pytest.fail(f"cannot build the Apache client driver: {err}", pytrace=False)


def stored_count(client: BlockingClient) -> int:
    return sum(client.get_max_offset(MessageQueue(TOPIC, GROUP, q)) for q in range(QUEUES))


def test_java_producer_and_push_consumer_across_a_master_kill(tmp_path: Path, driver: ApacheClient) -> None:
    with dledger_group(tmp_path, TOPIC) as group, BlockingClient(group.namesrv.addr) as client:
        master = group.master()
        before = stored_count(client)
        produced: list[DriverOutput] = []
        producer = threading.Thread(target=lambda: produced.append(driver.run(
            "produce", namesrv=group.namesrv.addr, topic=TOPIC, count=COUNT, size=64, body_prefix="jf",
            keys_prefix="jf-", keep_going="true", pause_ms=PAUSE_MS, poll_namesrv_ms=POLL_MS, timeout_ms=3000,
            timeout=180)))
        producer.start()
        wait_until("the producer's first sends are stored", lambda: stored_count(client) >= before + 50, timeout=60)
        killed_at = time.monotonic()
        group.procs[master].kill()
        producer.join(200)
        assert produced, "the producer did not finish"
        records = produced[0].records
        acked = [r for r in records if r.get("sendStatus") == "SEND_OK"]
        failed = [r for r in records if "sendFailure" in r]
        assert len(acked) + len(failed) == COUNT
        new_master = group.member_at(group.ids()[0])
        assert new_master != master
        after_kill = [r for r in acked if r["sentAtMs"] / 1000 > time.time() - (time.monotonic() - killed_at)]
        assert after_kill, f"no send acknowledged after the kill; failures: {failed[:3]}"

        # everything stored, which can hold a message twice: a send the old master committed but never answered is
        # sent again by the producer's retry (at least once, as with Apache's brokers); the retry's copy is acked
        client.get_route(TOPIC, refresh=True)  # the new master's address
        stored = stored_count(client)
        consumed = driver.run("consume-push", namesrv=group.namesrv.addr, topic=TOPIC, group="dledger_java_cg",
                              max=stored, timeout_ms=60_000, timeout=120).records
        by_id: dict[str, set[tuple]] = {}
        for m in consumed:
            by_id.setdefault(m["msgId"], set()).add((m["keys"], m["queueId"], m["queueOffset"]))
        missing = [r["keys"] for r in acked if r["msgId"] not in by_id]
        assert not missing, f"{len(missing)} acknowledged messages not consumed: {missing[:5]}"
        for record in acked:
            assert (record["keys"], record["queueId"], record["queueOffset"]) in by_id[record["msgId"]]
