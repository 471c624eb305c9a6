"""Held pulls: a PULL_MESSAGE with SUSPEND held by a real BrokerController until a matching message arrives or its
suspend timeout passes (long polling, and short polling when it is off), and PullRequestHoldService on its own.
"""

from __future__ import annotations

import asyncio
import threading
import time

from broker.common.message import PullSysFlag, tags_code
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.heartbeat import parse_subscription
from broker.server.consumer_manager import SubscriptionData
from broker.server.filter.message_filter import TagMessageFilter
from broker.server.long_polling import PullRequest, PullRequestHoldService
from tests.helpers import run
from tests.integration.send_pull import (
    StubConnection,
    records,
    running_broker,
    send_tagged,
)


def test_a_held_pull_returns_as_soon_as_a_message_arrives(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicLp", ["TagA"])
            started = time.monotonic()
            held = asyncio.ensure_future(b.pull("TopicLp", 1, subscription="TagA", sys_flag=PullSysFlag.SUSPEND,
                                                suspend_ms=10_000, timeout_ms=15_000))
            await asyncio.sleep(0.3)
            assert not held.done()
            await b.send("TopicLp", b"other", {"TAGS": "TagB"})  # filtered out: the pull stays held
            await asyncio.sleep(0.3)
            assert not held.done()
            await b.send("TopicLp", b"wanted", {"TAGS": "TagA"})
            response = await held
            assert time.monotonic() - started < 3
            assert (response.code, [r.body for r in records(response)]) == (ResponseCode.SUCCESS, [b"wanted"])
            assert response.ext_fields["nextBeginOffset"] == "3"

    run(scenario())


def test_a_held_pull_answers_not_found_after_its_suspend_timeout(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicTo", ["A"])
            started = time.monotonic()
            response = await b.pull("TopicTo", 1, sys_flag=PullSysFlag.SUSPEND, suspend_ms=600)
            elapsed = time.monotonic() - started
            assert 0.55 <= elapsed < 3
            assert (response.code, response.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            without_suspend = await b.pull("TopicTo", 1, suspend_ms=600)
            assert without_suspend.code == ResponseCode.PULL_NOT_FOUND  # at once: no SUSPEND flag

    run(scenario())


def test_short_polling_holds_for_short_polling_time_mills(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path, long_polling_enable=False, short_polling_time_mills=400) as b:
            await send_tagged(b, "TopicSp", ["A"])
            started = time.monotonic()
            response = await b.pull("TopicSp", 1, sys_flag=PullSysFlag.SUSPEND, suspend_ms=10_000)
            assert 0.35 <= time.monotonic() - started < 3 and response.code == ResponseCode.PULL_NOT_FOUND

    run(scenario())



class FakeStore:
    def __init__(self) -> None:
        self.max_offsets: dict[tuple[str, int], int] = {}

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max_offsets.get((topic, queue_id), 0)


def test_hold_service_wakes_on_a_matching_arrival_from_another_thread():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        store, woken = FakeStore(), []
        hold = PullRequestHoldService(store, woken.append, loop)
        tag_a = TagMessageFilter(parse_subscription("T", "TagA"))
        held = PullRequest(create_request(RequestCode.PULL_MESSAGE), StubConnection(), 5000, time.monotonic(), 1,
                           SubscriptionData("T"), tag_a)
        hold.suspend_pull_request("T", 0, held)
        assert hold.held_count == 1

        def arrive(offset: int, tag: str, queue_id: int = 0) -> None:
            store.max_offsets["T", queue_id] = offset + 1
            arrivals = {("T", queue_id): (offset + 1, [tags_code(tag)])}
            threading.Thread(target=hold.on_message_arriving, args=(arrivals,)).start()

        arrive(1, "TagB")  # not for this filter
        arrive(0, "TagA", queue_id=1)  # another queue
        await asyncio.sleep(0.1)
        assert woken == [] and hold.held_count == 1
        arrive(2, "TagA")
        await asyncio.sleep(0.1)
        assert woken == [held] and hold.held_count == 0 and held.timer is None

    run(scenario())


def test_hold_service_expires_requests_on_their_own_timer():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        woken: list[PullRequest] = []
        hold = PullRequestHoldService(FakeStore(), woken.append, loop)
        everything = TagMessageFilter(None)
        short, long = (PullRequest(create_request(RequestCode.PULL_MESSAGE), StubConnection(), ms, time.monotonic(),
                                   0, SubscriptionData("T"), everything) for ms in (100, 5000))
        hold.suspend_pull_request("T", 0, short)
        hold.suspend_pull_request("T", 0, long)
        await asyncio.sleep(0.3)
        assert woken == [short] and hold.held_count == 1
        hold.check_hold_requests()  # nothing newer: the long one stays
        assert hold.held_count == 1
        hold.close()
        assert hold.held_count == 0

    run(scenario())
