"""An in-process stand-in for a NameServer and brokers, on our RemotingServer: just enough RocketMQ for client tests.

``FakeBroker`` keeps queues of real CommitLog records (broker.store.layout.encode_record) and answers sends, pulls,
offset calls, heartbeats and the consumer list; ``fail_sends`` makes it answer sends with a code instead,
``busy_sends`` the first few with SYSTEM_BUSY; ``transaction_batch`` makes its GET_BROKER_CONFIG say it takes rmq's
prepared batches (rmqTransactionBatchEnable=true; it stores their items as it stores any batch's). It sends
NOTIFY_CONSUMER_IDS_CHANGED (oneway) to a group's clients when the group changes, as a broker does.
``FakeNamesrv`` serves routes set by the test. Independent of the real broker, so client behaviour (retries, fault
avoidance, rebalance) is tested on its own.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import Any

from broker.common.fastjson import decode_json, encode_json
from broker.common.message import encode_properties, java_hash, offset_msg_id, pack_host
from broker.common.message_batch import decode_batch_body
from broker.common.record import decode_record, encode_record
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from broker.remoting.server import RemotingServer
from tests.helpers import run as run_bounded

TEST_TIMEOUT_S = 30.0


# tests.helpers.run with the client tests' ceiling: a hang fails the test instead of the run.
run = functools.partial(run_bounded, timeout=TEST_TIMEOUT_S)


@dataclass
class FakeBroker:
    name: str
    queue_nums: int = 4
    server: RemotingServer = field(default_factory=RemotingServer)
    queues: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    consumer_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    heartbeats: list[dict[str, Any]] = field(default_factory=list)
    groups: dict[str, dict[RemotingConnection, str]] = field(default_factory=dict)
    sent_back: list[ConsumerSendMsgBackRequestHeader] = field(default_factory=list)
    requests: list[RemotingCommand] = field(default_factory=list)
    addr: str = ""
    fail_sends: int | None = None  # answer sends with this code
    busy_sends: int = 0  # answer this many sends first with SYSTEM_BUSY (flow control), storing nothing
    send_back_code: int = ResponseCode.SUCCESS
    physical: int = 0
    broker_id: int = 0  # a slave (> 0) shares its master's name, and its queues when given them
    suggest_which_broker_id: int = 0  # what every pull response suggests
    transaction_batch: bool = False  # GET_BROKER_CONFIG says rmqTransactionBatchEnable=true

    async def start(self) -> FakeBroker:
        self.server.register_default_processor(self._process)
        await self.server.start()
        self.addr = self.server.address  # kept after stop(): a dead broker stays in the routes
        return self

    async def stop(self) -> None:
        await self.server.stop()

    def route_json(self) -> tuple[dict[str, Any], dict[str, Any]]:
        queue_data = {"brokerName": self.name, "perm": 6, "readQueueNums": self.queue_nums,
                      "topicSysFlag": 0, "writeQueueNums": self.queue_nums}
        broker_data = {"brokerAddrs": {self.broker_id: self.addr}, "brokerName": self.name, "cluster": "DefaultCluster",
                       "enableActingMaster": False}
        return queue_data, broker_data

    def requests_of(self, code: int) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code == code]

    def messages(self, topic: str, queue_id: int) -> list[Any]:
        return [decode_record(r) for r in self.queues.get((topic, queue_id), [])]

    # -- requests ---------------------------------------------------------------------------------------------

    async def _process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(request)
        code = request.code
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            return self._send(request)
        if code == RequestCode.PULL_MESSAGE:
            return await self._pull(request)
        if code == RequestCode.GET_BROKER_CONFIG and self.transaction_batch:
            return create_response(request, ResponseCode.SUCCESS, body=b"rmqTransactionBatchEnable=true\n")
        if code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
            queue = self.queues.get((request.ext_fields["topic"], int(request.ext_fields["queueId"])), [])
            offset = len(queue) if code == RequestCode.GET_MAX_OFFSET else 0
            return create_response(request, ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            return create_response(request, ResponseCode.SUCCESS, ext_fields={"offset": "0"})
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            ext = request.ext_fields
            offset = self.consumer_offsets.get((ext["consumerGroup"], ext["topic"], int(ext["queueId"])))
            if offset is None:
                return create_response(request, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe")
            return create_response(request, ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            ext = request.ext_fields
            self.consumer_offsets[(ext["consumerGroup"], ext["topic"], int(ext["queueId"]))] = int(ext["commitOffset"])
            return create_response(request, ResponseCode.SUCCESS)
        if code == RequestCode.HEART_BEAT:
            return self._heartbeat(conn, request)
        if code == RequestCode.UNREGISTER_CLIENT:
            group = request.ext_fields.get("consumerGroup")
            if group and self.groups.get(group, {}).pop(conn, None) is not None:
                await self._notify(group)
            return create_response(request, ResponseCode.SUCCESS)
        if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            ids = sorted(self.groups.get(request.ext_fields["consumerGroup"], {}).values())
            return create_response(request, ResponseCode.SUCCESS, body=encode_json({"consumerIdList": ids}).encode())
        if code == RequestCode.CONSUMER_SEND_MSG_BACK:
            self.sent_back.append(ConsumerSendMsgBackRequestHeader.from_ext(dict(request.ext_fields)))
            return create_response(request, self.send_back_code, None if self.send_back_code == 0 else "no")
        return create_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")

    def _append(self, topic: str, queue_id: int, body: bytes, properties: str, flag: int, sys_flag: int,
                born: int) -> tuple[int, str]:
        queue = self.queues.setdefault((topic, queue_id), [])
        store_host = pack_host("127.0.0.1", int(self.addr.rsplit(":", 1)[1]))  # the port stays known after stop()
        record = encode_record(topic=topic.encode(), queue_id=queue_id, body=body, properties=properties.encode(),
                               flag=flag, sys_flag=sys_flag, born_timestamp=born,
                               born_host=pack_host("127.0.0.1", 1), store_host=store_host,
                               store_timestamp=born, queue_offset=len(queue), commit_log_offset=self.physical)
        queue.append(record)
        msg_id = offset_msg_id(store_host, self.physical)
        self.physical += len(record)
        return len(queue) - 1, msg_id

    def _send(self, request: RemotingCommand) -> RemotingCommand:
        if self.fail_sends is not None:
            return create_response(request, self.fail_sends, f"{self.name} refuses sends")
        if self.busy_sends > 0:
            self.busy_sends -= 1
            return create_response(request, ResponseCode.SYSTEM_BUSY,
                                   "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while")
        wire = None if request.code == RequestCode.SEND_MESSAGE else SendMessageRequestHeader.V2_WIRE
        header = SendMessageRequestHeader.from_ext(dict(request.ext_fields), wire)
        queue_id = header.queue_id % self.queue_nums
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            results = [self._append(header.topic, queue_id, m.body, encode_properties(m.properties), m.flag,
                                    header.sys_flag, header.born_timestamp) for m in decode_batch_body(request.body)]
            first, ids = results[0][0], ",".join(r[1] for r in results)
        else:
            first, ids = self._append(header.topic, queue_id, request.body, header.properties or "", header.flag,
                                      header.sys_flag, header.born_timestamp)
        ext = {"msgId": ids, "queueId": str(queue_id), "queueOffset": str(first), "MSG_REGION": "DefaultRegion"}
        return create_response(request, ResponseCode.SUCCESS, ext_fields=ext)

    async def _pull(self, request: RemotingCommand) -> RemotingCommand:
        header = PullMessageRequestHeader.from_ext(dict(request.ext_fields))
        queue = self.queues.get((header.topic, header.queue_id), [])
        if header.sys_flag & 1:  # COMMIT_OFFSET
            self.consumer_offsets[(header.consumer_group, header.topic, header.queue_id)] = header.commit_offset
        if header.queue_offset == len(queue) and header.sys_flag & 2:  # long polling, briefly
            for _ in range(int(min(header.suspend_timeout_millis, 500) / 20)):
                await asyncio.sleep(0.02)
                if len(queue) > header.queue_offset:
                    break
        ext = {"suggestWhichBrokerId": str(self.suggest_which_broker_id), "minOffset": "0",
               "maxOffset": str(len(queue))}
        if header.queue_offset > len(queue):
            return create_response(request, ResponseCode.PULL_OFFSET_MOVED,
                                   ext_fields={**ext, "nextBeginOffset": str(len(queue))})
        records = queue[header.queue_offset:header.queue_offset + header.max_msg_nums]
        if not records:
            return create_response(request, ResponseCode.PULL_NOT_FOUND,
                                   ext_fields={**ext, "nextBeginOffset": str(header.queue_offset)})
        wanted = _tags(header.subscription)
        if wanted:
            records = [r for r in records if java_hash(decode_record(r).properties.get("TAGS", "")) in wanted]
        next_offset = str(header.queue_offset + min(header.max_msg_nums, len(queue) - header.queue_offset))
        if not records:
            return create_response(request, ResponseCode.PULL_RETRY_IMMEDIATELY,
                                   ext_fields={**ext, "nextBeginOffset": next_offset})
        return create_response(request, ResponseCode.SUCCESS, ext_fields={**ext, "nextBeginOffset": next_offset},
                               body=b"".join(records))

    def _heartbeat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        data = decode_json(request.body.decode())
        self.heartbeats.append(data)
        for consumer in data.get("consumerDataSet", ()):
            group = consumer["groupName"]
            members = self.groups.setdefault(group, {})
            if members.get(conn) != data["clientID"]:
                members[conn] = data["clientID"]
                asyncio.get_running_loop().create_task(self._notify(group))
        return create_response(request, ResponseCode.SUCCESS)

    async def _notify(self, group: str) -> None:
        for conn in list(self.groups.get(group, {})):
            notify = create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
            try:
                await conn.invoke_oneway(notify)
            except Exception:
                pass


def _tags(subscription: str | None) -> set[int]:
    if not subscription or subscription == "*":
        return set()
    return {java_hash(t.strip()) for t in subscription.split("||") if t.strip()}


@dataclass
class FakeNamesrv:
    server: RemotingServer = field(default_factory=RemotingServer)
    routes: dict[str, list[FakeBroker]] = field(default_factory=dict)
    route_queries: list[str] = field(default_factory=list)

    async def start(self) -> FakeNamesrv:
        self.server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route)
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.stop()

    @property
    def addr(self) -> str:
        return self.server.address

    async def _route(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_fields["topic"]
        self.route_queries.append(topic)
        brokers = self.routes.get(topic)
        if not brokers:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST,
                                   f"No topic route info in name server for the topic: {topic}")
        queue_datas: dict[str, dict[str, Any]] = {}
        broker_datas: dict[str, dict[str, Any]] = {}
        for broker in brokers:  # replicas of one name: one queue data, one broker data with every address
            queue_data, broker_data = broker.route_json()
            queue_datas.setdefault(broker.name, queue_data)
            broker_datas.setdefault(broker.name, broker_data)["brokerAddrs"][broker.broker_id] = broker.addr
        body = {"brokerDatas": list(broker_datas.values()), "filterServerTable": {},
                "queueDatas": list(queue_datas.values())}
        return create_response(request, ResponseCode.SUCCESS, body=encode_json(body).encode())
