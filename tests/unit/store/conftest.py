"""Store fixtures: tiny files, so that rolling, BLANK fillers and recovery across files really happen."""

from __future__ import annotations

import dataclasses

import pytest

from broker.store.config import DispatchMode, MessageStoreConfig
from broker.store.message_store import MessageStore


@pytest.fixture(params=list(DispatchMode), ids=lambda mode: mode.value.lower())
def store_config(tmp_path, request) -> MessageStoreConfig:
    """Every store test runs with dispatch in the dispatch process (the broker's) and in a thread."""
    return MessageStoreConfig(
        dispatch_mode=request.param,
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=10 * 20,
        max_hash_slot_num=64,
        max_index_num=256,
        flush_interval_commit_log=50,
        flush_interval_consume_queue=50,
    )


@pytest.fixture
def open_store(store_config):
    """A factory for started stores on the fixture's directory; every store it made is shut down at the end."""
    stores: list[MessageStore] = []

    def start(**overrides) -> MessageStore:
        store = MessageStore(dataclasses.replace(store_config, **overrides))
        store.start()
        stores.append(store)
        return store

    yield start
    for store in stores:
        store.shutdown()
