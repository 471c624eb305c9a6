"""rmq's transactional batches end to end: a SEND_BATCH_MESSAGE of half messages (TRANSACTION_PREPARED sysFlag) and
END_TRANSACTION_BATCH, against one broker of ours for the whole module (``transaction_batch_env``), then against
Apache's broker taking over the same store.

The last test hands the store to Apache's broker: it must be the module's last, as it stops ours.
"""

from __future__ import annotations

import dataclasses
import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from broker.client import Message, MessageExt
from broker.client.blocking import BlockingClient, BlockingRemotingClient
from broker.client.message import MessageQueue
from broker.client.protocol import send_message_request
from broker.client.transaction_protocol import (
    LocalTransactionState,
    supports_transaction_batch,
)
from broker.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    create_uniq_id,
    encode_properties,
    transaction_type,
)
from broker.common.message_batch import BatchMessage, encode_batch_body
from broker.remoting.codes import ResponseCode, RmqRequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import EndTransactionBatchRequestHeader, SendMessageRequestHeader
from broker.remoting.transaction_batch import (
    END_TRANSACTION_BATCH_MAX,
    TransactionHandle,
    decode_end_batch_body,
    encode_end_batch_body,
)
from broker.server.transaction.bridge import HALF_TOPIC, OP_TOPIC, op_offsets
from tests.helpers import wait_until
from tests.integration.in_process import BROKER_NAME
from tests.integration.transaction_batch_env import (
    APACHE_STORE_CONF,
    GROUP,
    MAX_MESSAGE_SIZE,
    TIMEOUT_MS,
    Env,
    orders,
    start_env,
    uniq_keys,
)
from tests.integration.transactions import Listener


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from start_env(tmp_path_factory)


# -- prepared, committed, rolled back ---------------------------------------------------------------------------------


def test_a_prepared_batch_is_open_until_one_batched_end_commits_or_rolls_it_back(env: Env) -> None:
    topic = "TxbCommit"
    assert supports_transaction_batch(env.remote)
    sent = orders(topic, "paid", 5)
    response, handles = env.send_half_batch(topic, 1, sent)
    assert response.code == ResponseCode.SUCCESS, response.remark
    halves = [r for r in env.records(HALF_TOPIC, [0]) if r.properties.get(PROPERTY_REAL_TOPIC) == topic]
    # As Apache answers a batch: offsetMsgIds joined by ",", the first (half queue) offset, the real queue id.
    assert [h.queue_offset for h in halves] == [handles[0].queue_offset + i for i in range(5)]
    assert [h.commit_log_offset for h in halves] == [h.commit_log_offset for h in handles]
    assert response.ext_fields["queueId"] == "1"
    for half, msg in zip(halves, sent, strict=True):  # each item its own half message, as if sent alone
        assert transaction_type(half.sys_flag) == TRANSACTION_NOT_TYPE
        assert half.properties[PROPERTY_REAL_QUEUE_ID] == "1"
        assert half.properties[PROPERTY_TRANSACTION_ID] == msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        assert half.properties[PROPERTY_PRODUCER_GROUP] == GROUP and half.body == msg.body
    assert set(uniq_keys(sent)) <= set(env.broker.transactional_message_service.open)
    assert env.records(topic) == [], "a half message is visible"

    result = env.end(topic, LocalTransactionState.COMMIT_MESSAGE, handles)
    assert (result.ok, result.ended, result.already_ended) == (True, 5, 0), result
    committed = env.records(topic)
    assert [(c.queue_id, c.body) for c in committed] == [(1, m.body) for m in sent]  # once each, in order
    for c, msg in zip(committed, sent, strict=True):
        assert transaction_type(c.sys_flag) == TRANSACTION_COMMIT_TYPE
        assert {k: c.properties.get(k) for k in ("order", "KEYS", "TAGS", PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)} \
            == {k: msg.properties.get(k) for k in ("order", "KEYS", "TAGS", PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)}
    assert {c.prepared_transaction_offset for c in committed} == {h.commit_log_offset for h in handles}
    assert not set(uniq_keys(sent)) & set(env.broker.transactional_message_service.open)
    # Op records as Apache writes and reads them: tag "d", the half queue offsets joined by ",".
    ended = [o for op in env.records(OP_TOPIC, [0]) for o in op_offsets(op)]
    assert {h.queue_offset for h in handles} <= set(ended)

    cancelled = orders(topic, "cancelled", 3)
    _, rolled = env.send_half_batch(topic, 2, cancelled)
    result = env.end(topic, LocalTransactionState.ROLLBACK_MESSAGE, rolled)
    assert (result.ok, result.ended) == (True, 3), result
    assert [c.body for c in env.records(topic)] == [m.body for m in sent], "a rolled-back message is visible"
    assert {h.queue_offset for h in rolled} <= {o for op in env.records(OP_TOPIC, [0]) for o in op_offsets(op)}


def test_a_thousand_ends_in_one_request_write_apaches_op_batches(env: Env) -> None:
    """END_TRANSACTION_BATCH_MAX handles: every message committed once; op records no longer than Apache's op
    batches (transactionOpMsgMaxSize 4096 plus the last entry), naming every half offset."""
    topic = "TxbMany"
    sent = [Message(topic, b"m%d" % i) for i in range(END_TRANSACTION_BATCH_MAX)]
    handles: list[TransactionHandle] = []
    ops_before = len(env.records(OP_TOPIC, [0]))
    for start in range(0, len(sent), 256):
        response, part = env.send_half_batch(topic, 0, sent[start:start + 256])
        assert response.code == ResponseCode.SUCCESS, response.remark
        handles += part
    result = env.end(topic, LocalTransactionState.COMMIT_MESSAGE, handles)
    assert (result.ok, result.ended) == (True, END_TRANSACTION_BATCH_MAX), result
    assert [c.body for c in env.records(topic)] == [m.body for m in sent]
    ops = env.records(OP_TOPIC, [0])[ops_before:]
    assert sorted(o for op in ops for o in op_offsets(op)) == sorted(h.queue_offset for h in handles)
    assert max(len(op.body or b"") for op in ops) <= 4096 + 20


def test_the_check_asks_about_each_half_of_a_batch_nobody_ended(env: Env) -> None:
    group, topic = "txb_check_group", "TxbCheck"
    sent = orders(topic, "open", 3)
    response, _ = env.send_half_batch(topic, 0, sent, group)
    assert response.code == ResponseCode.SUCCESS, response.remark
    listener = Listener(execute=LocalTransactionState.UNKNOW)
    producer = env.producer(group, listener)
    try:
        wait_until("the producer's heartbeat", lambda: env.broker.producer_manager.any_channel(group))
        time.sleep(TIMEOUT_MS / 1000)  # older than transactionTimeOut: due for the check
        env.check_round()
        wait_until("a check per half", lambda: len(listener.checked) >= 3)
        wait_until("committed on check", lambda: len(env.records(topic)) == 3)
    finally:
        env.loop.run(producer.shutdown())
    assert sorted(listener.asked()) == sorted(uniq_keys(sent))
    assert sorted(m.body for _, m in listener.checked) == sorted(m.body for m in sent)
    assert sorted(c.body for c in env.records(topic)) == sorted(m.body for m in sent)


# -- refusals: nothing stored -----------------------------------------------------------------------------------------


def raw_batch(topic: str, items: Sequence[BatchMessage], *, group: str = GROUP,
              sys_flag: int = TRANSACTION_PREPARED_TYPE,
              batch_properties: dict[str, str] | None = None) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties(batch_properties or {}), batch=True, bname=BROKER_NAME)
    return send_message_request(header, encode_batch_body(items), batch=True)


def half_item(body: bytes, group: str = GROUP, **props: str) -> BatchMessage:
    base = {PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: group,
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id()}
    return BatchMessage(body, {k: v for k, v in {**base, **props}.items() if v})


def raw_end(topic: str, body: bytes, *, commit_or_rollback: int = TRANSACTION_COMMIT_TYPE,
            group: str = GROUP, **fields: object) -> RemotingCommand:
    header = EndTransactionBatchRequestHeader(producer_group=group, topic=topic, commit_or_rollback=commit_or_rollback,
                                              bname=BROKER_NAME, **fields)
    return create_request(RmqRequestCode.END_TRANSACTION_BATCH, header.to_ext(), body)


def assert_refused(env: Env, request: RemotingCommand, code: int, *remark_parts: str) -> str:
    before = env.snapshot()
    response = env.invoke(request)
    assert response.code == code, (response.code, response.remark)
    for part in remark_parts:
        assert part in (response.remark or ""), response.remark
    assert env.snapshot() == before, "a refused request stored something"
    return response.remark or ""


def test_bad_prepared_batches_are_refused_whole(env: Env) -> None:
    topic = "TxbBadSend"
    illegal = ResponseCode.MESSAGE_ILLEGAL
    mixing = "a batch mixing prepared and plain messages is refused: item 1"
    assert_refused(env, raw_batch(topic, [half_item(b"a"), half_item(b"b", **{PROPERTY_TRANSACTION_PREPARED: ""})]),
                   illegal, mixing)
    assert_refused(env, raw_batch(topic, [half_item(b"a"), half_item(b"b", group="other")]), illegal, mixing,
                   "PGROUP=other")
    assert_refused(env, raw_batch(topic, [half_item(b"a"), half_item(b"b", DELAY="2")]), illegal,
                   "item 1 of a prepared batch has delay level 2")
    assert_refused(env, raw_batch(topic, [half_item(b"a")], batch_properties={"DELAY": "3"}), illegal,
                   "a prepared batch cannot be delayed (DELAY=3)")
    assert_refused(env, raw_batch(topic, [half_item(b"a", **{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: ""})]),
                   illegal, "item 0 of a prepared batch has no UNIQ_KEY")
    twin = half_item(b"a")
    assert_refused(env, raw_batch(topic, [twin, twin]), illegal, "item 1 of a prepared batch repeats the UNIQ_KEY")
    assert_refused(env, raw_batch(topic, [half_item(b"x" * MAX_MESSAGE_SIZE)]), ResponseCode.SYSTEM_ERROR,
                   "message body size exceeded")  # as any batch over maxMessageSize
    assert_refused(env, raw_batch(topic, []), illegal, "the batch body holds no message")
    request = raw_batch(topic, [half_item(b"a")])
    assert_refused(env, dataclasses.replace(request, body=request.body[:-3]), illegal, "the batch body is malformed")
    assert_refused(env, raw_batch(topic, [half_item(b"a")], sys_flag=TRANSACTION_COMMIT_TYPE), illegal,
                   "the message is illegal")  # a commit type in a batch: the store's refusal, as ever

    env.update_config("rejectTransactionMessage", "true")
    try:
        assert_refused(env, raw_batch(topic, [half_item(b"a")]), ResponseCode.NO_PERMISSION,
                       "sending transaction message is forbidden")
    finally:
        env.update_config("rejectTransactionMessage", "false")


def test_bad_batched_ends_are_refused_whole(env: Env) -> None:
    topic, other = "TxbBadEnd", "TxbBadEndOther"
    _, handles = env.send_half_batch(topic, 0, orders(topic, "a", 3))
    _, elsewhere = env.send_half_batch(other, 0, orders(other, "b", 1))
    _, ended = env.send_half_batch(topic, 1, orders(topic, "c", 1))
    assert env.end(topic, LocalTransactionState.ROLLBACK_MESSAGE, ended).ended == 1
    error = ResponseCode.SYSTEM_ERROR
    h0, h1, h2 = handles

    def end(hs: Sequence[TransactionHandle], **kw: object) -> RemotingCommand:
        return raw_end(topic, encode_end_batch_body(hs), **kw)

    bogus = TransactionHandle(h2.commit_log_offset + 1, h2.queue_offset, h2.msg_id)
    assert_refused(env, end([h0, bogus]), error, f"handle 1 (commitLogOffset={bogus.commit_log_offset}, "
                   f"msgId={h2.msg_id}): no half message at this offset")
    assert_refused(env, end([h0, h1, ended[0]]), error, "handle 2", "was ended before")
    assert_refused(env, end([h0, h1, h0]), error, "handle 2", "repeats handle 0")
    assert_refused(env, end([h0, bogus, h0]), error, "handle 1", "no half message")  # the first fault is named
    assert_refused(env, end([h1, h1, bogus]), error, "handle 1", "repeats handle 0")
    assert_refused(env, end([h0, elsewhere[0]]), error, "handle 1", f"topic is {other}, the request says {topic}")
    assert_refused(env, end([h0._replace(msg_id="not-its-key")]), error, "UNIQ_KEY is")
    assert_refused(env, end([h1._replace(queue_offset=h1.queue_offset + 1)]), error, "tranStateTableOffset is")
    assert_refused(env, end([h0], group="someone_else"), error, "producer group is")
    assert_refused(env, raw_end(topic, struct.pack(">i", 0)), error, "handle count 0 is out of range")
    too_many = struct.pack(">i", END_TRANSACTION_BATCH_MAX + 1) + encode_end_batch_body([h0])[4:]
    assert_refused(env, raw_end(topic, too_many), error, "handle count 1025 is out of range")
    assert_refused(env, raw_end(topic, encode_end_batch_body([h0, h1])[:-2]), error, "malformed",
                   "handle 1: msgId length")
    assert_refused(env, raw_end(topic, encode_end_batch_body([h0]) + b"\0"), error, "1 bytes follow")
    for kind in (0, TRANSACTION_PREPARED_TYPE):
        assert_refused(env, end([h0], commit_or_rollback=kind), error, f"commitOrRollback {kind} is neither")
    assert_refused(env, end([h0], from_transaction_check=True), error, "fromTransactionCheck must be false")
    # Past its check immunity, as a single END_TRANSACTION: the check decides.
    _, late = env.send_half_batch(topic, 2, [Message(topic, b"late", properties={
        "CHECK_IMMUNITY_TIME_IN_SECONDS": "0"})])
    time.sleep(TIMEOUT_MS / 1000 + 0.1)  # older than max(immunity, transactionTimeOut)
    assert_refused(env, end([h0, *late]), ResponseCode.ILLEGAL_OPERATION, "handle 1", "past its check immunity")

    result = env.end(topic, LocalTransactionState.COMMIT_MESSAGE, handles)  # the valid ones still end
    assert (result.ok, result.ended) == (True, 3)
    assert [c.body for c in env.records(topic)] == [b"a-0", b"a-1", b"a-2"]


def test_capability_off_answers_as_apache(env: Env) -> None:
    topic = "TxbOff"
    _, handles = env.send_half_batch(topic, 0, orders(topic, "x", 1))
    env.update_config("rmqTransactionBatchEnable", "false")
    try:
        assert not supports_transaction_batch(env.remote)
        remark = assert_refused(env, raw_batch(topic, [half_item(b"a")]), ResponseCode.MESSAGE_ILLEGAL,
                                "the message is illegal")
        assert remark == OFF_REMARK
        assert_refused(env, raw_end(topic, encode_end_batch_body(handles)), ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                       f" request type {int(RmqRequestCode.END_TRANSACTION_BATCH)} not supported")
    finally:
        env.update_config("rmqTransactionBatchEnable", "true")
    assert supports_transaction_batch(env.remote)
    assert env.end(topic, LocalTransactionState.COMMIT_MESSAGE, handles).ended == 1


OFF_REMARK = ("the message is illegal, maybe msg body or properties length not matched. msg body length limit "
              f"{MAX_MESSAGE_SIZE}B, msg properties length limit 32KB.")


# -- restarts -------------------------------------------------------------------------------------------------------


def test_a_restart_keeps_prepared_batches_open_and_ended_ones_ended(env: Env) -> None:
    group, topic = "txb_restart_group", "TxbRestart"
    ends_after, stays_open = orders(topic, "later", 4), orders(topic, "open", 2)
    _, handles = env.send_half_batch(topic, 0, ends_after, group)
    _, open_handles = env.send_half_batch(topic, 1, stays_open, group)
    env.restart()
    result = env.end(topic, LocalTransactionState.COMMIT_MESSAGE, handles, group)
    assert (result.ok, result.ended) == (True, 4), result
    assert [c.body for c in env.records(topic)] == [m.body for m in ends_after]
    env.restart()
    assert [c.body for c in env.records(topic)] == [m.body for m in ends_after], "committed twice"
    assert not set(uniq_keys(ends_after)) & set(env.broker.transactional_message_service.open)
    listener = Listener(execute=LocalTransactionState.UNKNOW)
    producer = env.producer(group, listener)
    try:
        wait_until("the producer's heartbeat", lambda: env.broker.producer_manager.any_channel(group))
        time.sleep(TIMEOUT_MS / 1000)
        env.check_round()
        wait_until("a check per open half", lambda: len(listener.checked) >= 2)
        wait_until("committed on check", lambda: len(env.records(topic)) == 6)
    finally:
        env.loop.run(producer.shutdown())
    assert sorted(listener.asked()) == sorted(uniq_keys(stays_open)), "asked about an ended half"
    assert open_handles and sorted(c.body for c in env.records(topic)) == sorted(
        m.body for m in ends_after + stays_open)


# -- Apache's broker: refuses the extension, takes the store over (the module's last test) -------------------------


@pytest.mark.java
@pytest.mark.slow
def test_apaches_broker_refuses_the_extension_and_takes_over_a_store_with_batches(env: Env) -> None:
    from tests.apache import start_apache_broker, start_apache_namesrv

    group, topic = "txb_takeover_group", "TxbTakeover"
    committed, rolled_back, left_open = orders(topic, "c", 4), orders(topic, "r", 3), orders(topic, "o", 3)
    _, c_handles = env.send_half_batch(topic, 0, committed, group)
    _, r_handles = env.send_half_batch(topic, 1, rolled_back, group)
    _, o_handles = env.send_half_batch(topic, 2, left_open, group)
    assert env.end(topic, LocalTransactionState.COMMIT_MESSAGE, c_handles, group).ended == 4
    assert env.end(topic, LocalTransactionState.ROLLBACK_MESSAGE, r_handles, group).ended == 3
    store = Path(env.broker.store_config.store_path_root_dir)
    env.loop.run(env.broker.shutdown())

    with start_apache_namesrv(env.tmp / "apache-namesrv") as namesrv, \
            start_apache_broker(env.tmp / "apache-broker", namesrv, store, **APACHE_STORE_CONF) as apache, \
            BlockingRemotingClient(apache.addr) as remote:
        # The extension is Apache's to refuse: a prepared batch as its store refuses it, the code as unknown.
        assert not supports_transaction_batch(remote)
        refused = remote.invoke(raw_batch(topic, [half_item(b"a")]), 10_000)
        assert (refused.code, refused.remark) == (ResponseCode.MESSAGE_ILLEGAL, OFF_REMARK)
        end = remote.invoke(raw_end(topic, encode_end_batch_body(o_handles), group=group), 10_000)
        assert end.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, (end.code, end.remark)

        listener = Listener(execute=LocalTransactionState.UNKNOW)
        producer = env.producer(group, listener, namesrv.addr)
        try:
            wait_until("Apache's checks of the open halves", lambda: len(set(listener.asked())) >= 3, timeout=60)
            asked = set(listener.asked())
            with BlockingClient(namesrv.addr) as client:
                def consumed() -> list[bytes]:
                    return [m.body for q in range(4) for m in pull_queue(client, MessageQueue(topic, BROKER_NAME, q))]
                wait_until("the checked halves committed", lambda: len(consumed()) >= 7, timeout=30)
                bodies = consumed()
        finally:
            env.loop.run(producer.shutdown())
        assert asked == set(uniq_keys(left_open)), "Apache asked about a half a batched END had ended"
        assert sorted(bodies) == sorted(m.body for m in committed + left_open), "lost or committed twice"
        apache.kill()


def pull_queue(client: BlockingClient, mq: MessageQueue) -> list[MessageExt]:
    found: list[MessageExt] = []
    offset = 0
    while offset < client.get_max_offset(mq):
        result = client.pull(mq, offset, 32, decode=True)
        found += result.messages
        offset = result.next_begin_offset
    return found


def test_handles_survive_the_wire() -> None:
    handles = [TransactionHandle(2**40, 3, "AC11000100002A9F0000000000000001"), (7, 8, "\u00fc")]
    assert decode_end_batch_body(encode_end_batch_body(handles)) == [TransactionHandle(*h) for h in handles]
