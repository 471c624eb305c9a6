"""Delayed delivery (SCHEDULE_TOPIC_XXXX, delayOffset.json) and CONSUMER_SEND_MSG_BACK (%RETRY%, %DLQ%).

Most tests run a BrokerController in-process on 127.0.0.1 and speak raw remoting to it, so they can look at what is
stored: the scheduled record, its ConsumeQueue unit (tagsCode = deliver timestamp), the delivered copy, the retry
and DLQ copies. Delivery is timed at the consumer with long-polling pulls. Restarts are clean (stop, start on the
same store) or simulated crashes (delayOffset.json rolled back to before the deliveries). The same with the broker
as a process (a SIGKILL, our push consumer) is test_delay_retry_processes.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.common.fastjson import decode_json
from broker.common.message import PullSysFlag, encode_properties
from broker.common.record import MessageRecord, iter_records
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)
from broker.server.broker_controller import BrokerController
from broker.server.metadata.paths import delay_offset_path
from broker.server.schedule import SCHEDULE_TOPIC
from tests.helpers import free_port, now_ms
from tests.helpers import run as run_bounded
from tests.integration.in_process import running_controller

FAQ_HINT = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
# Every retry level 1 s, so a message reaches the DLQ in seconds (the levels a retry uses are 3 + reconsumeTimes).
FAST_RETRY_LEVELS = " ".join(["1s"] * 18)
DUE_SLACK_MS = 1500  # "delivered within 1 s", plus what a loaded test machine adds
CLOCK_SLACK_MS = 5  # store and test clocks are the same clock, read a few ms apart
run = functools.partial(run_bounded, timeout=90.0)


@dataclass
class Broker:
    controller: BrokerController
    client: RemotingClient
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # next pull offset per (topic, queue)

    @property
    def addr(self) -> str:
        return self.controller.broker_addr

    async def invoke(self, request: RemotingCommand, timeout_ms: float = 5000) -> RemotingCommand:
        return await self.client.invoke(self.addr, request, timeout_ms)

    async def send(self, topic: str, body: bytes, properties: dict[str, str], *, queue_id: int = 0) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=0, born_timestamp=now_ms(), flag=0, properties=encode_properties(properties))
        response = await self.invoke(create_request(RequestCode.SEND_MESSAGE, header.to_ext(), body))
        assert response.code == ResponseCode.SUCCESS, response.remark
        return response

    async def pull(self, topic: str, queue_id: int = 0, *, group: str = "CG",
                   suspend_ms: int = 0) -> list[MessageRecord]:
        """Messages from where the last pull of this queue stopped; long-polls up to ``suspend_ms``."""
        offset = self.offsets.get((topic, queue_id), 0)
        flags = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if suspend_ms else 0)
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
            sys_flag=int(flags), commit_offset=0, suspend_timeout_millis=suspend_ms, sub_version=0, subscription="*",
            expression_type="TAG")
        response = await self.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext()), suspend_ms + 5000)
        if response.code != ResponseCode.SUCCESS:
            return []
        self.offsets[topic, queue_id] = int(response.ext_fields["nextBeginOffset"])
        return list(iter_records(response.body))

    async def receive(self, topic: str, count: int, timeout_s: float, queue_id: int = 0,
                      group: str = "CG") -> list[tuple[int, MessageRecord]]:
        """(receive time in ms, record) for ``count`` messages, by long polling."""
        got: list[tuple[int, MessageRecord]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count:
            left_ms = int((deadline - time.monotonic()) * 1000)
            assert left_ms > 0, f"received {len(got)} of {count} messages from {topic}"
            records = await self.pull(topic, queue_id, group=group, suspend_ms=min(left_ms, 2000))
            got += [(now_ms(), record) for record in records]
        return got

    async def query(self, topic: str, key: str) -> list[MessageRecord]:
        header = QueryMessageRequestHeader(topic=topic, key=key, max_num=32, begin_timestamp=0,
                                           end_timestamp=2**63 - 1)
        response = await self.invoke(create_request(RequestCode.QUERY_MESSAGE, header.to_ext()))
        return list(iter_records(response.body)) if response.code == ResponseCode.SUCCESS else []

    async def send_back(self, record: MessageRecord, group: str, delay_level: int = 0,
                        max_reconsume_times: int | None = None, **fields) -> RemotingCommand:
        header = ConsumerSendMsgBackRequestHeader(
            offset=record.commit_log_offset, group=group, delay_level=delay_level,
            origin_msg_id=record.properties.get("UNIQ_KEY"), origin_topic=record.topic,
            max_reconsume_times=max_reconsume_times, **fields)
        return await self.invoke(create_request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext()))

    async def last_scheduled(self, level: int) -> MessageRecord:
        """The newest record parked at ``level``, once dispatched."""
        store = self.controller.store
        while store.dispatch_behind_bytes:
            await asyncio.sleep(0.01)
        cq = store.get_consume_queue(SCHEDULE_TOPIC, level - 1)
        assert cq is not None and cq.max_offset, f"nothing parked at level {level}"
        record = store.lookup_message(cq.get_unit(cq.max_offset - 1).commit_log_offset)
        assert record is not None
        return record

    async def update_group(self, group: str, **config: object) -> None:
        body = json.dumps({"groupName": group, **config}).encode()
        response = await self.invoke(create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body))
        assert response.code == ResponseCode.SUCCESS, response.remark


@contextlib.asynccontextmanager
async def running_broker(store_dir: Path, port: int | None = None, **broker_fields: object) -> AsyncIterator[Broker]:
    """An in-process broker (tests/integration/in_process.py) on ``store_dir``; the same ``port`` for a restart."""
    async with running_controller(store_dir, port, **broker_fields) as controller:
        client = RemotingClient()
        try:
            yield Broker(controller, client)
        finally:
            await client.close()


def scheduled_record(b: Broker, send_response: RemotingCommand) -> MessageRecord:
    """The record a send stored (the scheduled one, for a delayed message), found by the offsetMsgId answered."""
    offset = int(send_response.ext_fields["msgId"][-16:], 16)
    record = b.controller.store.lookup_message(offset)
    assert record is not None
    return record


def delay_offsets(store_dir: Path) -> dict[int, int]:
    with open(delay_offset_path(str(store_dir))) as f:
        return {int(k): v for k, v in decode_json(f.read())["offsetTable"].items()}


# -- parking and delivery ----------------------------------------------------------------------------------------------


def test_delayed_message_is_parked_in_the_schedule_topic(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store") as b:
            sent = await b.send("TopicDelay", b"later", {"DELAY": "2", "KEYS": "k-park", "TAGS": "TagA",
                                                          "UNIQ_KEY": "UNIQ-PARK"}, queue_id=3)
            # Java answers the queue the producer chose, and the offset in the schedule queue
            assert (sent.ext_fields["queueId"], sent.ext_fields["queueOffset"]) == ("3", "0")
            record = scheduled_record(b, sent)
            assert (record.topic, record.queue_id) == (SCHEDULE_TOPIC, 1)
            assert {k: record.properties[k] for k in ("REAL_TOPIC", "REAL_QID", "DELAY")} == {
                "REAL_TOPIC": "TopicDelay", "REAL_QID": "3", "DELAY": "2"}
            # the iteration order of a Java HashMap(128) holding these keys (printed by java.util.HashMap)
            assert list(record.properties) == ["MSG_REGION", "UNIQ_KEY", "CLUSTER", "DELAY", "TAGS", "KEYS",
                                               "TRACE_ON", "REAL_TOPIC", "REAL_QID"]
            await asyncio.sleep(0.1)
            cq = b.controller.store.get_consume_queue(SCHEDULE_TOPIC, 1)
            unit = cq.get_unit(0)
            assert unit.tags_code == record.store_timestamp + 5000  # the deliver timestamp, not the tag's hash
            assert b.controller.store.max_offset_in_queue("TopicDelay", 3) == 0
            # before delivery the key is indexed under the schedule topic, as in Java
            (found,) = await b.query(SCHEDULE_TOPIC, "k-park")
            assert found.properties["REAL_TOPIC"] == "TopicDelay"
            assert await b.query("TopicDelay", "k-park") == []

    run(scenario())


def test_delay_level_above_the_highest_is_capped(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", message_delay_level="1s 2s") as b:
            record = scheduled_record(b, await b.send("TopicCap", b"x", {"DELAY": "7"}))
            assert (record.queue_id, record.properties["DELAY"]) == (1, "2")
            plain = scheduled_record(b, await b.send("TopicCap", b"y", {"DELAY": "0"}))
            assert (plain.topic, "REAL_TOPIC" in plain.properties) == ("TopicCap", False)

    run(scenario())


@pytest.mark.parametrize(("level", "delay_ms"), [(1, 1000), (2, 5000)])
def test_delayed_message_is_delivered_when_due(tmp_path, level, delay_ms):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store") as b:
            sent = [await b.send("TopicTimed", b"m%d" % i, {"DELAY": str(level), "KEYS": f"k{i}",
                                                            "UNIQ_KEY": f"U{level}-{i}"}) for i in range(3)]
            scheduled = [scheduled_record(b, s) for s in sent]
            got = await b.receive("TopicTimed", 3, timeout_s=delay_ms / 1000 + 10)
            for (received_at, copy), original in zip(got, scheduled, strict=True):
                due = original.store_timestamp + delay_ms
                assert due - CLOCK_SLACK_MS <= received_at <= due + DUE_SLACK_MS, (received_at - due)
                assert copy.store_timestamp >= due
                # the copy is the scheduled record on its real topic and queue, properties verbatim
                assert (copy.topic, copy.queue_id, copy.body) == ("TopicTimed", 0, original.body)
                assert copy.properties == original.properties
                assert (copy.born_timestamp, copy.born_host, copy.flag) == (
                    original.born_timestamp, original.born_host, original.flag)
            # after delivery the key and UNIQ_KEY find it on its real topic too
            (by_key,) = await b.query("TopicTimed", "k1")
            assert by_key.properties["UNIQ_KEY"] == f"U{level}-1"
            assert [r.topic for r in await b.query("TopicTimed", f"U{level}-2")] == ["TopicTimed"]
            assert len(await b.query(SCHEDULE_TOPIC, "k1")) == 1

    run(scenario())


def test_idle_levels_sleep_until_a_message_is_parked_at_theirs(tmp_path):
    """With nothing parked no level looks at its queue (each polled ten times a second before); a parked message
    wakes its own level only, which delivers it when due."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", message_delay_level="1s 1s 1s") as b:
            service = b.controller.schedule_message_service
            passes: list[int] = []
            deliver_due = service._deliver_due

            async def counted(level: int, offset: int) -> tuple[int, float | None]:
                passes.append(level)
                return await deliver_due(level, offset)

            await asyncio.sleep(0.05)  # the first pass of each level, at start
            service._deliver_due = counted
            await asyncio.sleep(0.5)
            assert passes == []
            original = scheduled_record(b, await b.send("TopicIdle", b"x", {"DELAY": "2"}))
            ((received_at, copy),) = await b.receive("TopicIdle", 1, timeout_s=10)
            due = original.store_timestamp + 1000
            assert due - CLOCK_SLACK_MS <= received_at <= due + DUE_SLACK_MS, (received_at - due)
            assert copy.body == b"x" and set(passes) == {2}

    run(scenario())


def test_delay_offsets_are_persisted_as_java_writes_them(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", message_delay_level="1s 1s 1s") as b:
            for level in (1, 3, 3):
                await b.send("TopicPersist", b"x", {"DELAY": str(level)})
            await b.receive("TopicPersist", 3, timeout_s=10)
            await asyncio.sleep(0.2)  # the level tasks record the offset right after the put
        text = Path(delay_offset_path(str(tmp_path / "store"))).read_text()
        assert text.startswith('{\n\t"dataVersion":{\n\t\t"counter":0,\n\t\t"stateVersion":0,\n\t\t"timestamp":')
        assert text.endswith('\n\t"offsetTable":{\n\t\t1:1,\n\t\t3:2\n\t}\n}')

    run(scenario())


# -- restarts ----------------------------------------------------------------------------------------------------------


def test_restart_with_delayed_messages_pending_delivers_each_once(tmp_path):
    async def scenario() -> None:
        store, port = tmp_path / "store", free_port()
        async with running_broker(store, port, message_delay_level="1s 3s") as b:
            for i in range(5):
                await b.send("TopicRestart", b"early-%d" % i, {"DELAY": "1", "UNIQ_KEY": f"E{i}"})
            for i in range(5):
                await b.send("TopicRestart", b"late-%d" % i, {"DELAY": "2", "UNIQ_KEY": f"L{i}"})
            early = await b.receive("TopicRestart", 5, timeout_s=10)
            assert sorted(r.properties["UNIQ_KEY"] for _, r in early) == [f"E{i}" for i in range(5)]
            late_due = [r.store_timestamp + 3000 for r in
                        (b.controller.store.lookup_message(u.commit_log_offset)
                         for u in b.controller.store.get_consume_queue(SCHEDULE_TOPIC, 1).iter_units(0, 5))]
        assert delay_offsets(store) == {1: 5, 2: 0}
        async with running_broker(store, port, message_delay_level="1s 3s") as b:
            b.offsets["TopicRestart", 0] = 5
            got = await b.receive("TopicRestart", 5, timeout_s=10)
            assert sorted(r.properties["UNIQ_KEY"] for _, r in got) == [f"L{i}" for i in range(5)]
            for (received_at, _), due in zip(got, late_due, strict=True):
                assert due - CLOCK_SLACK_MS <= received_at <= due + DUE_SLACK_MS
            await asyncio.sleep(1.5)  # nothing else comes: no level-1 message is delivered again
            assert b.controller.store.max_offset_in_queue("TopicRestart", 0) == 10

    run(scenario())


def test_restart_after_a_crash_does_not_deliver_again(tmp_path):
    """A crash leaves delayOffset.json behind the deliveries (Java persists every 10 s): rolled back here to what
    it said before anything was delivered, the restarted broker finds the delivered copies and skips them."""
    async def scenario() -> None:
        store, port = tmp_path / "store", free_port()
        async with running_broker(store, port, message_delay_level="1s 30s") as b:
            b.controller.schedule_message_service.persist()
            stale = Path(delay_offset_path(str(store))).read_text()
            for i in range(6):
                await b.send("TopicCrash", b"m", {"DELAY": "1", "UNIQ_KEY": f"C{i}", "KEYS": f"k{i}"})
            await b.send("TopicCrash", b"m", {"DELAY": "2", "UNIQ_KEY": "LATER"})
            await b.receive("TopicCrash", 6, timeout_s=10)
        Path(delay_offset_path(str(store))).write_text(stale)
        async with running_broker(store, port, message_delay_level="1s 30s") as b:
            assert b.controller.schedule_message_service.offset_table == {1: 6}  # level 2: not due, not skipped
            await asyncio.sleep(1.5)
            assert b.controller.store.max_offset_in_queue("TopicCrash", 0) == 6

    run(scenario())


def test_restart_with_a_retry_pending_delivers_it_once(tmp_path):
    async def scenario() -> None:
        store, port = tmp_path / "store", free_port()
        async with running_broker(store, port, message_delay_level="1s 1s 3s") as b:
            await b.send("TopicRetryRestart", b"x", {"UNIQ_KEY": "URR"})
            ((_, original),) = await b.receive("TopicRetryRestart", 1, timeout_s=5)
            assert (await b.send_back(original, "GRR")).code == ResponseCode.SUCCESS  # level 3: due in 3 s
        async with running_broker(store, port, message_delay_level="1s 1s 3s") as b:
            ((_, retried),) = await b.receive("%RETRY%GRR", 1, timeout_s=10, group="GRR")
            assert (retried.properties["UNIQ_KEY"], retried.reconsume_times) == ("URR", 1)
            await asyncio.sleep(1.5)
            assert b.controller.store.max_offset_in_queue("%RETRY%GRR", 0) == 1

    run(scenario())


def test_schedule_queue_rebuilt_from_the_commit_log_keeps_deliver_timestamps(tmp_path):
    async def scenario() -> None:
        store, port = tmp_path / "store", free_port()
        async with running_broker(store, port, message_delay_level="1s 20s") as b:
            record = scheduled_record(b, await b.send("TopicRebuild", b"x", {"DELAY": "2"}))
        shutil.rmtree(store / "consumequeue")
        async with running_broker(store, port, message_delay_level="1s 20s") as b:
            unit = b.controller.store.get_consume_queue(SCHEDULE_TOPIC, 1).get_unit(0)
            assert unit.tags_code == record.store_timestamp + 20_000

    run(scenario())


# -- CONSUMER_SEND_MSG_BACK --------------------------------------------------------------------------------------------


def test_send_back_retries_with_growing_delay_then_goes_to_the_dlq(tmp_path):
    """Group retryMaxTimes 2 (set with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP; the request carries no
    maxReconsumeTimes): two retries through SCHEDULE_TOPIC_XXXX and %RETRY%, then %DLQ%."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", message_delay_level=FAST_RETRY_LEVELS) as b:
            await b.update_group("GRetry", retryMaxTimes=2)
            sent = await b.send("TopicOrig", b"payload", {"KEYS": "kr", "TAGS": "TagR", "UNIQ_KEY": "URETRY"})
            ((_, original),) = await b.receive("TopicOrig", 1, timeout_s=5)
            current = original
            for times in (1, 2):
                back = await b.send_back(current, "GRetry")
                assert (back.code, back.remark) == (ResponseCode.SUCCESS, None)
                # parked at level 3 + reconsumeTimes, in queue level - 1 of the schedule topic
                parked = await b.last_scheduled(3 + times - 1)
                assert (parked.properties["REAL_TOPIC"], parked.properties["DELAY"]) == (
                    "%RETRY%GRetry", str(3 + times - 1))
                ((_, current),) = await b.receive("%RETRY%GRetry", 1, timeout_s=5, group="GRetry")
                assert (current.topic, current.reconsume_times) == ("%RETRY%GRetry", times)
            back = await b.send_back(current, "GRetry")
            assert back.code == ResponseCode.SUCCESS
            ((_, dead),) = await b.receive("%DLQ%GRetry", 1, timeout_s=5, group="GDlqReader")
            assert (dead.body, dead.reconsume_times, dead.born_timestamp) == (b"payload", 3, original.born_timestamp)
            props = dead.properties
            assert (props["RETRY_TOPIC"], props["ORIGIN_MESSAGE_ID"], props["UNIQ_KEY"], props["KEYS"]) == (
                "TopicOrig", sent.ext_fields["msgId"], "URETRY", "kr")
            assert (props["DELAY"], props["WAIT"], props["TAGS"]) == ("0", "false", "TagR")
            dlq = b.controller.topic_config_manager.select_topic_config("%DLQ%GRetry")
            assert (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, 6)
            retry = b.controller.topic_config_manager.select_topic_config("%RETRY%GRetry")
            assert (retry.read_queue_nums, retry.perm) == (1, 6)
            assert [r.topic for r in await b.query("%DLQ%GRetry", "kr")] == ["%DLQ%GRetry"]

    run(scenario())


def test_send_back_max_reconsume_times_of_the_request_wins_over_the_group(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", message_delay_level=FAST_RETRY_LEVELS) as b:
            await b.send("TopicMax", b"x", {"UNIQ_KEY": "UMAX"})
            ((_, original),) = await b.receive("TopicMax", 1, timeout_s=5)
            back = await b.send_back(original, "GMax", max_reconsume_times=0)  # the group allows 16
            assert back.code == ResponseCode.SUCCESS
            ((_, dead),) = await b.receive("%DLQ%GMax", 1, timeout_s=5)
            assert (dead.reconsume_times, dead.properties["ORIGIN_MESSAGE_ID"]) == (1, original.msg_id)

    run(scenario())


def test_send_back_with_a_level_or_a_negative_level(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", message_delay_level="1s 2s 3s") as b:
            await b.send("TopicLvl", b"x", {"UNIQ_KEY": "ULVL"})
            ((_, original),) = await b.receive("TopicLvl", 1, timeout_s=5)
            assert (await b.send_back(original, "GLvl", delay_level=2)).code == ResponseCode.SUCCESS
            parked = await b.last_scheduled(2)
            unit = b.controller.store.get_consume_queue(SCHEDULE_TOPIC, 1).get_unit(0)
            assert (parked.properties["DELAY"], parked.properties["REAL_TOPIC"]) == ("2", "%RETRY%GLvl")
            assert unit.tags_code == parked.store_timestamp + 2000
            assert (await b.send_back(original, "GLvl", delay_level=-1)).code == ResponseCode.SUCCESS
            ((_, dead),) = await b.receive("%DLQ%GLvl", 1, timeout_s=5)
            assert (dead.reconsume_times, dead.properties["DELAY"]) == (1, "0")

    run(scenario())


def test_send_back_refusals(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path / "store", auto_create_subscription_group=False) as b:
            original = scheduled_record(b, await b.send("TopicRef", b"x", {}))  # no group may pull here
            missing = await b.send_back(original, "GNone")
            assert (missing.code, missing.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                      f"subscription group not exist, GNone {FAQ_HINT}")
            await b.update_group("GRef")
            bad = await b.send_back(dataclasses.replace(original, commit_log_offset=7), "GRef")
            assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "look message by offset failed, 7")
            no_header = await b.invoke(create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "GRef"}))
            assert no_header.code == ResponseCode.SYSTEM_ERROR and "offset" in no_header.remark
            await b.update_group("GNoRetry", retryQueueNums=0)  # Java: success, and nothing is stored
            before = b.controller.store.max_phy_offset
            assert (await b.send_back(original, "GNoRetry")).code == ResponseCode.SUCCESS
            assert b.controller.store.max_phy_offset == before

    run(scenario())
