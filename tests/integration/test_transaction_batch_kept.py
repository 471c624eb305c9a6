"""The committed messages our broker keeps ready for END_TRANSACTION_BATCH (built when the prepared batch is stored)
are the ones it builds from the half records read back (after a restart, or once the bound pushed them out): a
consumer cannot tell which way a message was committed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.client import Message
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.message import (
    PROPERTY_CLUSTER,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from broker.common.record import MessageRecord
from broker.server.transaction.bridge import HALF_TOPIC
from tests.integration.transaction_batch_env import Env, start_env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from start_env(tmp_path_factory)


@pytest.mark.parametrize("encoded_ahead", [True, False])
def test_kept_and_read_back_commits_store_the_same_message(env: Env, encoded_ahead: bool) -> None:
    """``encoded_ahead``: the batch's records are made in one call (batch.half_batch_records); otherwise its last
    item sets a name the broker sets itself, which sends the batch the general way (StoreMessages)."""
    topic = f"TxbKept{encoded_ahead}"
    sent = [Message(topic, f"kept-{i}".encode(), tags="TagA", keys=f"k{i}", flag=7,
                    properties={"order": str(i), **({PROPERTY_CLUSTER: "theirs"} if i == 3 else {})})
            for i in range(4)]
    if encoded_ahead:
        sent[3].properties.pop(PROPERTY_CLUSTER)
    response, handles = env.send_half_batch(topic, 0, sent)
    assert response.code == 0, response.remark
    service = env.broker.transactional_message_service
    kept = [service.ready_commits.get(h.commit_log_offset) for h in handles]
    assert [type(k[0]).__name__ for k in kept] == ["bytearray" if encoded_ahead else "StoreMessage"] * 4
    for handle in handles[1:3]:  # as if the bound had pushed them out: these are built from the half records
        service.ready_commits.discard(handle.commit_log_offset)
    result = env.end(topic, LocalTransactionState.COMMIT_MESSAGE, handles)
    assert (result.ok, result.ended) == (True, 4), result
    assert len(service.ready_commits) == 0

    committed = env.records(topic, [0])
    assert [c.body for c in committed] == [m.body for m in sent]  # in handle order, kept and read mixed
    assert [c.prepared_transaction_offset for c in committed] == [h.commit_log_offset for h in handles]
    per_message = {"store_size", "body_crc", "queue_offset", "commit_log_offset", "store_timestamp",
                   "prepared_transaction_offset", "body", "properties"}
    for field_ in set(MessageRecord.__slots__) - per_message:
        assert len({getattr(c, field_) for c in committed}) == 1, field_
    ids = {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_TRANSACTION_ID, "KEYS", "order"}
    shapes = [{k: (v if k not in ids else k) for k, v in c.properties.items()} for c in committed]
    assert all(shape == shapes[0] for shape in shapes), shapes
    assert shapes[0][PROPERTY_CLUSTER] == env.broker.broker_config.broker_cluster_name
    assert not {PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID} & set(shapes[0])
    for c in committed:
        assert c.properties[PROPERTY_TRANSACTION_ID] == c.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    # each half record is its committed message's properties plus where it was bound
    halves = {h.commit_log_offset: h for h in env.records(HALF_TOPIC, [0])}
    for c in committed:
        half = halves[c.prepared_transaction_offset]
        assert half.properties == {**c.properties, PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QUEUE_ID: "0"}
        assert (half.flag, half.body) == (c.flag, c.body)
