"""The pre-authentication fuzz target: one input through everything the broker runs on bytes before a processor.

In the broker's order: the frame decoder (the input whole, and again cut into pieces: both must give the same frames
and the same error), the command decode (JSON headers with orjson and with the standard library's json, the path of
an install without orjson; ROCKETMQ headers with the C decoder and its Python twin, which must agree), then per
command the signed content and the signature check, the request pipeline of a broker with ACL 1.0 and ACL 2.0 on
(``AuthPipeline``: ``PlainPermissionManager.validate``, ``AuthEvaluator.check``) and the encoding of its refusal,
the header classes of the command's code (``from_ext``), and the binary body decoders (SEND_BATCH_MESSAGE's and
END_TRANSACTION_BATCH's, C and Python, which must agree). The raw input also goes to the C decoders directly.

The rule: only errors of the error tree (``broker.common.errors.RmqError``) may come out of any step. Anything
else, or a C decoder and its Python twin disagreeing, is a ``Finding``.
"""

from __future__ import annotations

import json
import random
import tempfile
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.fuzz_headers import HEADER_CLASSES
from broker.auth.config import (
    LOCAL_AUTHENTICATION_METADATA_PROVIDER,
    LOCAL_AUTHORIZATION_METADATA_PROVIDER,
    parse_auth_config,
)
from broker.auth.evaluate import AuthEvaluator
from broker.auth.metadata import AuthMetadataManager
from broker.auth.model import Acl, User
from broker.auth.plain import PlainPermissionManager
from broker.auth.store import AuthStore
from broker.common import message_batch
from broker.common.errors import RmqError
from broker.remoting import command, transaction_batch
from broker.remoting.codes import SerializeType
from broker.remoting.frame import Frame, FrameDecoder
from broker.remoting.signing import signature_matches, signed_content
from broker.server.auth_pipeline import AuthPipeline

PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, TopicA=PUB|SUB, topicC=SUB]
    groupPerms: [G1=SUB]
  - accessKey: rocketmq2
    secretKey: "012345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
ALICE_ACL = {"subject": "User:alice", "policies": [{"entries": [
    {"resource": "Topic:TopicA", "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"resource": "Topic:Top*", "actions": ["Pub", "Sub", "Get"], "decision": "Allow"},
    {"resource": "Group:G1", "actions": ["Sub"], "decision": "Allow"},
    {"resource": "Group:G9", "actions": ["Sub"], "decision": "Allow", "sourceIps": ["10.0.0.0/8"]},
    {"resource": "Topic:TopicD*", "actions": ["Pub"], "decision": "Deny"}]}]}
PEERS = ("127.0.0.1:40000", "10.10.103.5:40000", "192.168.1.9:40000", "[::1]:40000", "unknown")


class Finding(Exception):
    """A step raised outside the error tree, or two decoders of one layout disagreed."""

    def __init__(self, step: str, detail: str, cause: BaseException | None = None) -> None:
        where = ""
        if cause is not None:
            frames = traceback.extract_tb(cause.__traceback__)
            if frames:
                where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}"
        super().__init__(f"{step}: {detail}{where}")
        self.step = step
        self.key = f"{step}: {type(cause).__name__ if cause else detail}{where}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one input came to: frames cut, commands decoded, requests refused by the pipeline, errors of the tree."""

    frames: int
    commands: int
    refused: int
    tree_errors: int


def _step(step: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, RmqError | None]:
    """``fn(*args)``, its error of the tree as a value; anything else raised becomes a Finding."""
    try:
        return fn(*args), None
    except RmqError as err:
        return None, err
    except Exception as err:  # noqa: BLE001 - the point: any other exception is what the campaign looks for
        raise Finding(step, f"{type(err).__name__}: {err}"[:300], err) from err


def _decode_with_json(frame: Frame) -> command.RemotingCommand:
    """``command.decode`` as it runs without orjson (the standard library's json reads the JSON header)."""
    saved = command._loads
    command._loads = json.loads
    try:
        return command.decode(frame)
    finally:
        command._loads = saved


class PreAuthTarget:
    """The broker's pre-processor path with ACL 1.0 and 2.0 on, over a throwaway home of its own."""

    def __init__(self, home: Path | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="rmq-fuzz-") if home is None else None
        home = Path(self._tmp.name) if self._tmp else home
        (home / "conf").mkdir(parents=True, exist_ok=True)
        (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL_YML)
        config = parse_auth_config({"authenticationEnabled": "true", "authorizationEnabled": "true",
                                    "authenticationMetadataProvider": LOCAL_AUTHENTICATION_METADATA_PROVIDER,
                                    "authorizationMetadataProvider": LOCAL_AUTHORIZATION_METADATA_PROVIDER,
                                    "authenticationWhitelist": "26", "authorizationWhitelist": "34"},
                                   "DefaultCluster")
        metadata = AuthMetadataManager(AuthStore(str(home / "config")))
        metadata.init_user("rocketmq", "12345678")
        metadata.create_user(User("alice", "alicepw1"))
        metadata.create_acl(Acl.from_info(ALICE_ACL, "User:alice"))
        self.pipeline = AuthPipeline(AuthEvaluator(config, metadata), PlainPermissionManager(home))

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def run(self, data: bytes) -> Outcome:
        """One input; raises Finding."""
        errors = 0
        frames, error = self._frames(data)
        errors += error is not None
        errors += self._raw_decoders(data)
        commands = refused = 0
        for frame in frames:
            for cmd in self._commands(frame):
                if cmd is None:
                    errors += 1
                    continue
                commands += 1
                refused_now, errors_now = self._request(cmd, PEERS[zlib.crc32(frame.header) % len(PEERS)])
                refused += refused_now
                errors += errors_now
        return Outcome(len(frames), commands, refused, errors)

    # -- layers -----------------------------------------------------------------------------------------------------

    @staticmethod
    def _frames(data: bytes) -> tuple[list[Frame], RmqError | None]:
        """The frames of ``data`` fed whole, checked against the same bytes fed in pieces (as TCP reads cut them)."""
        whole, error = _feed(FrameDecoder(), [data])
        rng = random.Random(zlib.crc32(data))
        pieces, pos = [], 0
        while pos < len(data):
            size = rng.choice((1, 2, 3, 7, 8, 9, 64, 1024))
            pieces.append(data[pos:pos + size])
            pos += size
        cut, cut_error = _feed(FrameDecoder(), pieces)
        if cut != whole or type(cut_error) is not type(error):
            raise Finding("frame", f"fed whole: {len(whole)} frames, {error!r}; in pieces: {len(cut)}, {cut_error!r}")
        return whole, error

    @staticmethod
    def _commands(frame: Frame) -> list[command.RemotingCommand | None]:
        """The frame's command as the broker decodes it, and as an install without orjson (JSON) or without the C
        extension (ROCKETMQ) does; None for a decode refused with an error of the tree."""
        cmd, _ = _step("command.decode", command.decode, frame)
        if frame.serialize_type == SerializeType.ROCKETMQ:
            c_fields, _ = _step("rocketmq_header_fields (C)", command.rocketmq_header_fields, frame.header)
            py_fields, _ = _step("rocketmq_header_fields (Python)", command._rocketmq_header_fields_py, frame.header)
            if c_fields != py_fields:
                raise Finding("rocketmq_header_fields", f"C {c_fields!r} != Python {py_fields!r}"[:300])
            return [cmd]
        other, _ = _step("command.decode (json)", _decode_with_json, frame)
        return [cmd] if other == cmd else [cmd, other]

    def _request(self, cmd: command.RemotingCommand, peer: str) -> tuple[int, int]:
        """What the broker runs on a decoded request before its processor; (refused, errors of the tree)."""
        errors = 0
        _, error = _step("signed_content", _signed_content, cmd)
        errors += error is not None
        _, error = _step("signature_matches", signature_matches, cmd, "12345678")
        errors += error is not None
        answer, error = _step("AuthPipeline", self.pipeline, SimpleNamespace(remote_address=peer), cmd)
        errors += error is not None
        if answer is not None:
            _, error = _step("encode refusal", command.encode, answer)
            errors += error is not None
        for cls, wire in HEADER_CLASSES.get(cmd.code, ()):
            _, error = _step(f"{cls.__name__}.from_ext", cls.from_ext, cmd.ext_fields, wire)
            errors += error is not None
        errors += _body_decoders(bytes(cmd.body))
        return answer is not None, errors

    @staticmethod
    def _raw_decoders(data: bytes) -> int:
        c_fields, _ = _step("rocketmq_header_fields (C, raw)", command.rocketmq_header_fields, data)
        py_fields, _ = _step("rocketmq_header_fields (Python, raw)", command._rocketmq_header_fields_py, data)
        if c_fields != py_fields:
            raise Finding("rocketmq_header_fields (raw)", f"C {c_fields!r} != Python {py_fields!r}"[:300])
        return _body_decoders(data[8:])


def _feed(decoder: FrameDecoder, pieces: list[bytes]) -> tuple[list[Frame], RmqError | None]:
    frames: list[Frame] = []
    for piece in pieces:
        try:
            frames += decoder.feed(piece)
        except RmqError as err:
            frames += getattr(err, "frames", [])
            return frames, err
        except Exception as err:  # noqa: BLE001
            raise Finding("FrameDecoder.feed", f"{type(err).__name__}: {err}", err) from err
    return frames, None


def _signed_content(cmd: command.RemotingCommand) -> bytes:
    """The content a broker rebuilds to check a request's signature."""
    return signed_content(cmd.ext_fields, cmd.body, version=cmd.version)


def _body_decoders(body: bytes) -> int:
    """SEND_BATCH_MESSAGE's and END_TRANSACTION_BATCH's body decoders, C against Python; errors of the tree."""
    errors = 0
    items, error = _step("decode_batch_items", message_batch.decode_batch_items, body)
    py_items, py_error = _step("decode_batch_items (Python)", message_batch._decode_batch_items_py, body)
    if items != py_items or type(error) is not type(py_error):
        raise Finding("decode_batch_items", f"C {items!r}/{error!r} != Python {py_items!r}/{py_error!r}"[:300])
    errors += error is not None
    handles, error = _step("decode_end_batch_body", transaction_batch.decode_end_batch_body, body)
    py_handles, py_error = _step("decode_end_batch_body (Python)", transaction_batch._decode_end_batch_body_py, body)
    if handles != py_handles or type(error) is not type(py_error):
        raise Finding("decode_end_batch_body", f"C {handles!r}/{error!r} != Python {py_handles!r}/{py_error!r}"[:300])
    return errors + (error is not None)
