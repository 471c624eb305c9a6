"""What the mqadmin tests share besides their fixtures (conftest.py): the scenario's names, a consumer group that
looks online (``OnlineConsumer``), and small readers of what the tools print."""

from __future__ import annotations

import asyncio
import threading

from broker.client import protocol
from broker.client.blocking import BlockingRemotingClient
from broker.client.message import MessageQueue
from broker.common.fastjson import decode_json
from broker.remoting.client import RemotingClient
from broker.remoting.codes import ResponseCode
from broker.remoting.heartbeat import build_subscription_data
from tests.helpers import mqadmin, wait_until
from tests.helpers import mqadmin_ok as ok

BROKER_NAME = "broker-a"
TOPIC = "MqadminTopic"
GROUP = "MqadminGroup"
ROUTE_TIMEOUT_S = 10.0
REQUIRED_COMMANDS = ("updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "clusterList",
                     "brokerStatus", "consumerProgress", "consumerConnection", "queryMsgById", "queryMsgByKey",
                     "queryMsgByOffset", "updateSubGroup", "resetOffsetByTime", "getBrokerConfig",
                     "updateBrokerConfig", "updateTopicPerm", "wipeWritePerm", "addWritePerm", "statsAll",
                     "sendMessage", "consumeMessage", "checkMsgSendRT", "updateKvConfig", "deleteKvConfig",
                     "getNamesrvConfig", "updateNamesrvConfig")


def rows(text: str, first: str) -> list[list[str]]:
    """The whitespace-split lines of a table that start with ``first``."""
    return [line.split() for line in text.splitlines() if line.split()[:1] == [first]]


def await_route(namesrv: str, topic: str) -> None:
    wait_until(f"a route for {topic}", lambda: mqadmin("topicRoute", "-n", namesrv, "-t", topic).code == 0,
               ROUTE_TIMEOUT_S, interval=0.1)


class OnlineConsumer:
    """A push consumer of GROUP as the broker sees one: a HEART_BEAT on a connection kept open by its own thread."""

    CLIENT_ID = "127.0.0.1@mqadmin-test"

    def __init__(self, broker_addr: str) -> None:
        self.broker_addr = broker_addr
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        data = protocol.ConsumerData(GROUP, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                     [build_subscription_data(TOPIC, "TagA")])
        try:
            async with RemotingClient() as client:
                response = await client.invoke(self.broker_addr, protocol.heartbeat_request(self.CLIENT_ID, [], [data]))
                assert response.code == ResponseCode.SUCCESS, response.remark
                self._ready.set()
                await self._stop.wait()
        except BaseException as err:
            self._error = err
            self._ready.set()

    def __enter__(self) -> OnlineConsumer:
        self._thread.start()
        assert self._ready.wait(10), "the consumer did not come up"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def commit(broker_addr: str, offsets: dict[int, int]) -> None:
    with BlockingRemotingClient(broker_addr) as client:
        for queue_id, offset in offsets.items():
            mq = MessageQueue(TOPIC, BROKER_NAME, queue_id)
            assert client.invoke(protocol.update_consumer_offset_request(GROUP, mq, offset)).code == 0


def progress(ns: str) -> dict[int, tuple[int, int]]:
    """consumerProgress -g GROUP -t TOPIC: queue id -> (broker offset, consumer offset)."""
    table = rows(ok("consumerProgress", "-n", ns, "-g", GROUP, "-t", TOPIC), TOPIC)
    return {int(r[2]): (int(r[3]), int(r[4])) for r in table}


def perms(ns: str, topic: str) -> list[int]:
    """The perm of each broker's queues of ``topic`` in the NameServer's route."""
    return [q["perm"] for q in decode_json(ok("topicRoute", "-n", ns, "-t", topic))["queueDatas"]]
