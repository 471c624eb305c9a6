"""SYNC_MASTER puts waiting for their slaves: released in offset order by reports from other threads, or timed out."""

from __future__ import annotations

import asyncio
import threading

from broker.replication.group_transfer import GroupTransferService
from tests.helpers import run


def test_reports_release_every_put_at_or_below_them_and_others_time_out():
    async def scenario() -> list[bool]:
        service = GroupTransferService()
        service.start(asyncio.get_running_loop())
        waits = [asyncio.ensure_future(service.wait(offset, 0.5)) for offset in (100, 200, 300)]
        await asyncio.sleep(0.01)
        reporter = threading.Thread(target=service.replicated, args=(250,))
        reporter.start()
        reporter.join()
        results = await asyncio.gather(*waits)
        assert await service.wait(150, 0.01)  # already replicated: no wait at all
        return results

    assert run(scenario()) == [True, True, False]


def test_shutdown_answers_every_waiting_put():
    async def scenario() -> bool:
        service = GroupTransferService()
        service.start(asyncio.get_running_loop())
        waiting = asyncio.ensure_future(service.wait(10, 30))
        await asyncio.sleep(0.01)
        service.release_all()
        return await waiting

    assert run(scenario()) is False
