"""DLedger's RPC as openmessaging/dledger 0.3.2 puts it on the wire: request codes, response codes, and the bodies.

Rule 1: DLedger's code tables and the field names of its bodies appear here and nowhere else.

Every DLedger call is a RemotingCommand whose code is a ``DLedgerRequestCode``, with no header fields: the request
object travels as the JSON body (fastjson's bean properties, alphabetical, nulls left out, enums by name). The
response is a command with code SUCCESS (200) whatever the outcome, again with the whole response object as its
body; the outcome is the body's ``code`` (a ``DLedgerResponseCode``), and for a vote its ``voteResult``::

    {"code":200,"group":"g","leaderId":"n1","ledgerEndIndex":-1,"ledgerEndTerm":-1,"localId":"n1","remoteId":"n0",
     "term":3}                                                                  VoteRequest, code 51001
    {"code":200,"group":"g","leaderId":"n1","localId":"n1","remoteId":"n0","term":3,"voteResult":"ACCEPT"}

A vote answers with the request's ids copied (``copyBaseInfo``); a heartbeat's answer is a fresh object (no ids).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any, ClassVar, TypeVar

from broker.common.errors import MalformedBody
from broker.common.fastjson import decode_json, encode_json


class DLedgerRequestCode(IntEnum):
    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005


class DLedgerResponseCode(IntEnum):
    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506
    LOAD_SNAPSHOT_ERROR = 507


class VoteResult(Enum):
    """``VoteResponse.RESULT``, sent by name."""

    UNKNOWN = "UNKNOWN"  # no answer (the peer is down or timed out): not counted as valid
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"  # the candidate is not a member of the group
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"  # another node claims the voter's own id
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"  # the candidate's term is behind the voter's
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"  # the voter gave this term's vote to another
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"  # ... and follows a leader in it
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"  # the candidate's term is ahead: the voter catches up first
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"  # the term is below the voter's last entry's
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"  # the candidate's last entry has an older term
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"  # same last term, shorter log
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"  # the voter is taking over leadership itself


class ParseResult(Enum):
    """What a candidate makes of a round of votes (``VoteResponse.ParseResult``)."""

    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"  # vote again later in the same term
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"  # vote again now, same term (voters were catching up on it)
    PASSED = "PASSED"  # elected
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"  # vote again later in the next term


Body = TypeVar("Body", bound="RequestOrResponse")

_BASE_NAMES = {"group": "group", "remote_id": "remoteId", "local_id": "localId", "code": "code",
               "leader_id": "leaderId", "term": "term"}


@dataclass(slots=True)
class RequestOrResponse:
    """The fields every DLedger body has; ``code`` is a DLedgerResponseCode (SUCCESS in requests)."""

    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    code: int = DLedgerResponseCode.SUCCESS
    leader_id: str | None = None
    term: int = -1

    JSON_NAMES: ClassVar[Mapping[str, str]] = _BASE_NAMES  # attribute -> bean property

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key in self.JSON_NAMES.items():
            value = getattr(self, name)
            if value is not None:
                out[key] = value.value if isinstance(value, Enum) else value
        return dict(sorted(out.items()))

    def encode(self) -> bytes:
        return encode_json(self.to_json()).encode()

    @classmethod
    def decode(cls: type[Body], body: bytes) -> Body:
        """Read a body; MalformedBody when it is not JSON, not an object, or a field has the wrong type."""
        try:
            data = decode_json(body.decode())
        except (UnicodeDecodeError, ValueError) as err:
            raise MalformedBody(f"{cls.__name__}: not JSON ({err})") from None
        if not isinstance(data, dict):
            raise MalformedBody(f"{cls.__name__}: a JSON object expected, got {type(data).__name__}")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = cls.JSON_NAMES.get(f.name)
            if key is None or data.get(key) is None:
                continue
            values[f.name] = _typed(cls.__name__, key, data[key], f.default)
        return cls(**values)

    def copy_base_info(self, other: RequestOrResponse) -> None:
        for name in _BASE_NAMES:
            setattr(self, name, getattr(other, name))


def _typed(owner: str, key: str, value: Any, default: Any) -> Any:
    """A JSON value as the type of the field's default (an int, ``code`` too, whatever its value; a str; an enum by
    name; a map of strings)."""
    ok = True
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, Enum):
        try:
            return type(default)(value)
        except ValueError:
            ok = False
    elif key == "peers":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    else:
        ok = isinstance(value, str)
    if not ok:
        raise MalformedBody(f"{owner}: {key} is {value!r}")
    return value


def _names(**extra: str) -> Mapping[str, str]:
    return {**_BASE_NAMES, **extra}


@dataclass(slots=True)
class VoteRequest(RequestOrResponse):
    """A candidate (``leaderId``, also ``localId``) asks ``remoteId`` for its vote in ``term``, with its log's end."""

    ledger_end_index: int = -1
    ledger_end_term: int = -1

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(ledger_end_index="ledgerEndIndex", ledger_end_term="ledgerEndTerm")


@dataclass(slots=True)
class VoteResponse(RequestOrResponse):
    vote_result: VoteResult = VoteResult.UNKNOWN

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(vote_result="voteResult")

    @classmethod
    def answer(cls, request: VoteRequest, term: int, result: VoteResult) -> VoteResponse:
        """``new VoteResponse(request).term(term).voteResult(result)``: the request's ids, the voter's term."""
        response = cls(vote_result=result)
        response.copy_base_info(request)
        response.term = term
        return response


@dataclass(slots=True)
class HeartBeatRequest(RequestOrResponse):
    """The leader (``leaderId``) tells ``remoteId`` it leads in ``term``."""


@dataclass(slots=True)
class HeartBeatResponse(RequestOrResponse):
    pass


@dataclass(slots=True)
class MetadataRequest(RequestOrResponse):
    pass


@dataclass(slots=True)
class MetadataResponse(RequestOrResponse):
    """The group, its members ({id: address}) and the leader as this member knows it."""

    peers: dict[str, str] | None = field(default=None)

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(peers="peers")
