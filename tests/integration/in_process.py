"""Our BrokerController inside the test's own process, for tests that look at what a broker stores and keeps (its
store, its managers) while speaking remoting to it on 127.0.0.1.

Each test gets a fresh broker on a free port with tiny store files (``TINY_STORE``: 64 KiB CommitLog files,
100-unit ConsumeQueue files, a 64-slot index), so rolling and recovery run; no NameServer unless the test gives one.
``broker_configs`` builds the configuration (a test that restarts a broker on the same store and port reuses it),
``running_controller`` starts and shuts one down, ``dispatched`` waits until the store has built the ConsumeQueues of
everything written. The process clusters (tests/integration/cluster.py) are for tests of the whole system.

Examples:
    >>> async with running_controller(tmp_path / "store", store={"max_message_size": 8192}) as controller:
    ...     await RemotingClient().invoke(controller.broker_addr, request)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from unittest import mock

from broker.server.broker_controller import BrokerController
from broker.server.config import BrokerConfig
from broker.server.processors import registry
from broker.store.config import MessageStoreConfig
from broker.store.layout import CQ_UNIT_SIZE
from broker.store.message_store import MessageStore
from broker.tools.local_cluster import free_broker_port

HOST = "127.0.0.1"
BROKER_NAME = "broker-a"
TINY_STORE: dict[str, object] = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 100 * CQ_UNIT_SIZE,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
}
DISPATCH_POLLS = 500  # of 10 ms
START_TRIES = 3


def broker_configs(store_dir: Path, port: int | None = None, *, namesrv_addr: str = "",
                   store: Mapping[str, object] | None = None,
                   **broker_fields: object) -> tuple[BrokerConfig, MessageStoreConfig]:
    """broker-a on 127.0.0.1:``port`` (a free one if None) with its store in ``store_dir``. ``store`` overrides
    TINY_STORE's MessageStoreConfig fields; ``broker_fields`` are BrokerConfig fields."""
    broker_config = BrokerConfig(broker_name=BROKER_NAME, namesrv_addr=namesrv_addr,
                                 listen_port=port or free_broker_port(), broker_ip1=HOST, broker_ip2=HOST,
                                 **broker_fields)
    store_config = MessageStoreConfig(store_path_root_dir=str(store_dir), **{**TINY_STORE, **(store or {})})
    return broker_config, store_config


async def start_on_free_port(build: Callable[[int], BrokerController], tries: int = START_TRIES) -> BrokerController:
    """``build(port)`` on a free port, started. Another test process may bind the port between its choice and the
    bind (the suite runs in parallel), so a start that finds it taken tries a new port."""
    for attempt in range(tries):
        controller = build(free_broker_port())
        try:
            await controller.start()
            return controller
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or attempt == tries - 1:
                raise
    raise ValueError("tries must be at least 1")


@contextlib.asynccontextmanager
async def running_controller(store_dir: Path, port: int | None = None, *, namesrv_addr: str = "",
                         store: Mapping[str, object] | None = None, processors: tuple[str, ...] | None = None,
                         **broker_fields: object) -> AsyncIterator[BrokerController]:
    """A started broker (see ``broker_configs``), shut down on exit. ``processors`` limits the processor modules
    registered at start (the registry's MODULES) to those named."""
    def build(free: int) -> BrokerController:
        return BrokerController(*broker_configs(store_dir, port or free, namesrv_addr=namesrv_addr, store=store,
                                                **broker_fields), bind_host=HOST)

    with mock.patch.object(registry, "MODULES", processors) if processors else contextlib.nullcontext():
        controller = await start_on_free_port(build, tries=1 if port else START_TRIES)
    try:
        yield controller
    finally:
        await controller.shutdown()


async def dispatched(store: MessageStore) -> None:
    """Until the store's dispatch has put everything written into the ConsumeQueues (5 s at most)."""
    for _ in range(DISPATCH_POLLS):
        if store.dispatch_behind_bytes == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("dispatch did not catch up")
