"""The pre-authentication fuzz campaign's inputs: valid frames of every request code, and structure-aware mutations.

Seeds are what real clients send: every request code rmq knows (Apache's table, rmq's own, ACL 1.0's legacy ones), in
both header encodings, with the ext fields its header class declares, signed for ACL 2.0 or ACL 1.0 or not at all,
and the bodies the broker decodes (a SEND_BATCH_MESSAGE batch, an END_TRANSACTION_BATCH handle list, heartbeat and
lock JSON). A mutation works on the layer it names: the frame (length, header marker, serialize type byte, cuts and
concatenations), the command (code, flag, remark, ext fields replaced with values Java would refuse, keys dropped,
the signature broken, re-encoded in the other header encoding), the JSON text of a header (numbers where strings go,
nesting, escapes of lone surrogates), the batch bodies' length fields, and plain bytes (flips, interesting values,
inserts, deletes, splices of two seeds). One to four are stacked per input.

Every input is a pure function of (seed, index): ``generate(seed, index)`` rebuilds any input the campaign reports.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from dataclasses import replace

from bench.fuzz_headers import sample_fields
from broker.common.fastjson import encode_json
from broker.common.message_batch import BatchMessage, encode_batch_body
from broker.remoting.codes import AclV1RequestCode, LanguageCode, RequestCode, RmqRequestCode, SerializeType
from broker.remoting.command import RemotingCommand, create_request, decode, encode
from broker.remoting.frame import FRAME_PREFIX, FrameDecoder
from broker.remoting.signing import SIGNATURE, SessionCredentials, sign_request
from broker.remoting.transaction_batch import TransactionHandle, encode_end_batch_body

ACL2_SUPER = SessionCredentials("rocketmq", "12345678")  # the live broker's initAuthenticationUser
ACL2_USER = SessionCredentials("alice", "alicepw1")  # a NORMAL user with a few ACL entries
ACL1_ADMIN = SessionCredentials("rocketmq2", "012345678")  # plain_acl.yml's admin account
ACL1_USER = SessionCredentials("RocketMQ", "12345678")  # and its ordinary one
SIGNERS = (None, ACL2_SUPER, ACL2_USER, ACL1_ADMIN, ACL1_USER)

ALL_CODES = sorted({int(c) for c in (*RequestCode, *RmqRequestCode, *AclV1RequestCode)})

# values a Java header parser or a decoder of ours could trip on
INTERESTING_TEXT = (
    "", " ", "0", "-1", "1", "2147483647", "2147483648", "-2147483649", "9223372036854775808", "9" * 40, "1e3",
    "0x10", "1_000", " 7 ", "\u0661", "NaN", "true", "TRUE", "null", "%RETRY%", "%RETRY%G", "%DLQ%G", "*", "Top*",
    "RMQ_SYS_TRACE_TOPIC", "rocketmq", "alice", "\x00", "\x01\x02", "a\x01b\x02", "\u00e9", "\U0001f600", "\ufffd",
    "x" * 300, "/" * 10, "..", "Topic:T", "User:alice", "10.0.0.1", "{", "[]", "\\", '"',
)
INTERESTING_INTS = (0, 1, -1, 4, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0xFFFFFF,
                    0x1000000, 16 * 1024 * 1024, 2**31 - 8)
JSON_VALUES = ("1", "-1", "1.5", "1e400", "123456789012345678901234567890", "true", "false", "null", '""', "[]",
               "{}", '[1,"a"]', '{"a":{"b":[]}}', '"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"\\uffff"',
               "[" * 40 + "]" * 40, "[" * 1200 + "]" * 1200, '{"a":' * 1100 + "1" + "}" * 1100,
               "[" * 100_000 + "]" * 100_000, '"' + "\\u00e9" * 3 + '"')


def _body_for(code: int) -> bytes:
    """The body a client sends with ``code`` (the ones the broker decodes before or for its processor)."""
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        return b"hello fuzz"
    if code == RequestCode.SEND_BATCH_MESSAGE:
        return encode_batch_body([BatchMessage(b"one", {"UNIQ_KEY": "K1", "TAGS": "a"}),
                                  BatchMessage(b"two" * 20, {"KEYS": "k k2"}, flag=3)])
    if code == RmqRequestCode.END_TRANSACTION_BATCH:
        return encode_end_batch_body([TransactionHandle(4096, 7, "7F0000011F9018B4AAC2000000000001"),
                                      TransactionHandle(0, 0, "id\u00e9")])
    if code == RequestCode.HEART_BEAT:
        return encode_json({"clientID": "127.0.0.1@fuzz", "producerDataSet": [{"groupName": "PG"}],
                            "consumerDataSet": [{"groupName": "G1", "consumeType": "CONSUME_PASSIVELY",
                                                 "messageModel": "CLUSTERING", "consumeFromWhere":
                                                 "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                                                 "subscriptionDataSet": [{"topic": "TopicA", "subString": "*",
                                                                          "classFilterMode": False, "tagsSet": [],
                                                                          "codeSet": [], "subVersion": 1}]}]}
                           ).encode()
    if code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        return encode_json({"consumerGroup": "G1", "clientId": "c1", "mqSet": [
            {"topic": "TopicA", "brokerName": "b", "queueId": 0}]}).encode()
    return b""


def seed_commands() -> list[RemotingCommand]:
    """A valid request of every code, each in both header encodings, signed in turn by each signer (or not)."""
    commands = []
    for index, code in enumerate(ALL_CODES):
        for serialize_type in SerializeType:
            if serialize_type == SerializeType.ROCKETMQ and code > 0x7FFF:  # POP_MESSAGE and kin: JSON only
                continue
            request = create_request(code, sample_fields(code), _body_for(code), serialize_type=serialize_type,
                                     language=LanguageCode.JAVA)
            signer = SIGNERS[(index + serialize_type) % len(SIGNERS)]
            commands.append(sign_request(request, signer) if signer else request)
    return commands


def seed_frames() -> list[bytes]:
    """The seeds as bytes on the wire."""
    return [encode(cmd) for cmd in seed_commands()]


# -- mutations ---------------------------------------------------------------------------------------------------


def _commands_of(data: bytes) -> list[RemotingCommand]:
    """The commands ``data`` holds, as far as it decodes (none when the first frame is already bad)."""
    try:
        return [decode(frame) for frame in FrameDecoder().feed(data)]
    except Exception:  # noqa: BLE001 - a mutation of an input that is not a command anymore: fall back to bytes
        return []


def _rewrap(data: bytes, rng: random.Random, change: Callable[[RemotingCommand, random.Random], RemotingCommand]
            ) -> bytes:
    commands = _commands_of(data)
    if not commands:
        return _flip(data, rng)
    index = rng.randrange(len(commands))
    commands[index] = change(commands[index], rng)
    try:
        return b"".join(encode(cmd) for cmd in commands)
    except Exception:  # noqa: BLE001 - a value our encoder refuses to write: write the header by hand instead
        return data


def _text(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(1, 12)))
    return rng.choice(INTERESTING_TEXT)


def _ext_value(cmd: RemotingCommand, rng: random.Random) -> RemotingCommand:
    fields = dict(cmd.ext_fields)
    action = rng.randrange(4)
    if fields and action < 2:
        key = rng.choice(sorted(fields))
        if action == 0:
            fields[key] = _text(rng)
        else:
            del fields[key]
    elif action == 2:
        fields[rng.choice(("topic", "consumerGroup", "b", "a", "queueId", "AccessKey", SIGNATURE, "group",
                           "topicList", "filterGroups", "_UNIQUE_KEY_QUERY", _text(rng) or "k"))] = _text(rng)
    else:
        fields.pop(SIGNATURE, None) if rng.random() < 0.5 else fields.update({SIGNATURE: "A" * 27 + "="})
    return replace(cmd, ext_fields=fields)


def _scalars(cmd: RemotingCommand, rng: random.Random) -> RemotingCommand:
    which = rng.randrange(5)
    if which == 0:
        return replace(cmd, code=rng.choice((*ALL_CODES, *INTERESTING_INTS[:12], -1, 9999)))
    if which == 1:
        return replace(cmd, flag=rng.choice((0, 1, 2, 3, 0x7FFFFFFF, -1)))
    if which == 2:
        return replace(cmd, remark=rng.choice((None, _text(rng))))
    if which == 3:
        return replace(cmd, version=rng.choice((0, 399, 400, 515, -1, 0x7FFF)))
    other = SerializeType.JSON if cmd.serialize_type == SerializeType.ROCKETMQ else SerializeType.ROCKETMQ
    return replace(cmd, serialize_type=other, code=cmd.code & 0x7FFF)


def _body(cmd: RemotingCommand, rng: random.Random) -> RemotingCommand:
    body = bytes(cmd.body)
    if body and rng.random() < 0.6:  # a length field of a batch item or an end-batch handle
        pos = rng.randrange(0, max(1, len(body) - 3))
        value = rng.choice(INTERESTING_INTS) * rng.choice((1, -1))
        body = body[:pos] + struct.pack(">i", max(-2**31, min(2**31 - 1, value))) + body[pos + 4:]
    elif rng.random() < 0.5:
        body = rng.choice((_body_for(RequestCode.SEND_BATCH_MESSAGE), _body_for(RmqRequestCode.END_TRANSACTION_BATCH),
                           _body_for(RequestCode.HEART_BEAT), b"{", b"[]", b"\xff\xfe", b"null"))
    else:
        body = _flip(body, rng)
    return replace(cmd, body=body)


def _json_header(data: bytes, rng: random.Random) -> bytes:
    """A JSON header rewritten as text: a field's value swapped for another JSON value, or the text cut."""
    commands = _commands_of(data)
    if not commands:
        return _flip(data, rng)
    cmd = commands[0]
    try:
        header = json.loads(encode(replace(cmd, serialize_type=SerializeType.JSON, body=b""))[8:].decode())
    except Exception:  # noqa: BLE001 - a command our encoder refuses to write: mutate its bytes instead
        return _flip(data, rng)
    if header.get("extFields") and rng.random() < 0.5:
        target = header["extFields"]
        key = rng.choice(sorted(target))
    else:
        target, key = header, rng.choice(("code", "flag", "opaque", "version", "language", "remark", "extFields"))
    target[key] = "@@VALUE@@"
    text = json.dumps(header, ensure_ascii=False).replace('"@@VALUE@@"', rng.choice(JSON_VALUES))
    raw = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.1:
        raw = raw[:rng.randrange(len(raw) + 1)]
    return FRAME_PREFIX.pack(4 + len(raw) + len(bytes(cmd.body)), len(raw)) + raw + bytes(cmd.body)


def _frame(data: bytes, rng: random.Random) -> bytes:
    """The frame's own fields: length, header marker (serialize type byte, header length), cuts and repeats."""
    if len(data) < 8:
        return data + FRAME_PREFIX.pack(rng.choice(INTERESTING_INTS), rng.choice(INTERESTING_INTS))
    which = rng.randrange(6)
    buf = bytearray(data)
    if which == 0:
        struct.pack_into(">i", buf, 0, max(-2**31, min(2**31 - 1, rng.choice(INTERESTING_INTS) + rng.randrange(-2, 3))))
    elif which == 1:
        buf[4] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF))
    elif which == 2:
        struct.pack_into(">I", buf, 4, (buf[4] << 24) | (rng.choice(INTERESTING_INTS) & 0xFFFFFF))
    elif which == 3:
        return bytes(buf[:rng.randrange(len(buf))])
    elif which == 4:
        return bytes(buf) * rng.randrange(2, 4)
    else:
        return bytes(buf) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return bytes(buf)


def _flip(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data or b"\x00")
    for _ in range(rng.randrange(1, 5)):
        if not buf:
            buf.append(rng.randrange(256))
        pos = rng.randrange(len(buf))
        which = rng.randrange(4)
        if which == 0:
            buf[pos] ^= 1 << rng.randrange(8)
        elif which == 1:
            buf[pos] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xC0, 0xED, 0xFF))
        elif which == 2:
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        else:
            del buf[pos:pos + rng.randrange(1, 8)]
    return bytes(buf)


def _splice(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    other = rng.choice(seeds)
    return data[:rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1):]


def mutate(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    """One structure-aware mutation of ``data``, its layer chosen at random."""
    which = rng.randrange(10)
    if which < 2:
        return _rewrap(data, rng, _ext_value)
    if which == 2:
        return _rewrap(data, rng, _scalars)
    if which == 3:
        return _rewrap(data, rng, _body)
    if which == 4:
        return _json_header(data, rng)
    if which == 5:
        return _frame(data, rng)
    if which == 6:
        return _splice(data, rng, seeds)
    if which == 7:
        return data + rng.choice(seeds)  # a second command on the same stream
    return _flip(data, rng)


class Generator:
    """Inputs as a pure function of (seed, index): a seed frame, then one to four stacked mutations."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.seeds = seed_frames()

    def generate(self, index: int) -> bytes:
        rng = random.Random(self.seed * 1_000_003 + index)
        data = rng.choice(self.seeds)
        if index % 50 == 0:  # a few valid seeds pass unmutated: the accepting paths run too
            return data
        for _ in range(rng.randrange(1, 5)):
            data = mutate(data, rng, self.seeds)
            if len(data) > 65536:
                data = data[:65536]
        return data
