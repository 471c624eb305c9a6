"""A broker whose listen port is taken fails to start and leaves its store and metadata as a clean stop does: the
message it held and the topic it knew are there when it starts on a free port."""

from __future__ import annotations

import asyncio
import errno
import socket
from pathlib import Path

import pytest

from broker.remoting.codes import ResponseCode
from broker.server.broker_controller import BrokerController
from tests.integration.in_process import HOST, broker_configs
from tests.integration.send_pull import records, running_broker


def test_a_start_on_a_taken_port_fails_and_keeps_the_store(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            assert (await b.send("KeptTopic", b"kept")).code == ResponseCode.SUCCESS
            await b.dispatched()
        store = tmp_path / "store"
        with socket.socket() as taken:
            taken.bind((HOST, 0))
            taken.listen()
            port = taken.getsockname()[1]
            controller = BrokerController(*broker_configs(store, port), bind_host=HOST)
            with pytest.raises(OSError) as raised:
                await controller.start()
            assert raised.value.errno == errno.EADDRINUSE
        assert not (store / "abort").exists(), "a failed start closes the store as a clean stop does"
        assert "KeptTopic" in (store / "config" / "topics.json").read_text(), "a failed start persists nothing"
        async with running_broker(tmp_path) as again:
            pulled = await again.pull("KeptTopic", 0)
            assert pulled.code == ResponseCode.SUCCESS
            assert [r.body for r in records(pulled)] == [b"kept"]

    asyncio.run(scenario())
