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

Log replication: a PUSH carries the leader's entries as DLedgerEntry beans (``_entry_json``: every header field and
the body in base64, fastjson's byte[]), one in ``entry`` or several in ``batchEntry``, and the getters fastjson also
writes (``batch``, ``count``, ``firstEntryIndex``, ``lastEntryIndex``, ``totalSize``)::

    {"batch":false,"batchEntry":[],"code":200,"commitIndex":4,"count":1,"entry":{"body":"AAAA","bodyCrc":0,
     "chainCrc":0,"channel":0,"index":5,"magic":1,"pos":260,"size":51,"term":2},"firstEntryIndex":5,"group":"g",
     "lastEntryIndex":5,"leaderId":"n0","localId":"n0","remoteId":"n1","term":2,"totalSize":0,"type":"APPEND"}
    {"beginIndex":0,"code":200,"count":1,"endIndex":5,"group":"g","index":5,"term":2}        its answer

An APPEND from a client carries one body (``body``, base64) and is answered with the entry's index and pos.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any, ClassVar, TypeVar

from broker.common.errors import MalformedBody
from broker.common.fastjson import decode_bean, encode_bean
from broker.dledger.layout import BODY_OFFSET, DLedgerEntry


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
        return encode_bean(self.to_json()).encode()

    @classmethod
    def decode(cls: type[Body], body: bytes) -> Body:
        """Read a body; MalformedBody when it is not JSON, not an object, or a field has the wrong type."""
        try:
            data = decode_bean(body.decode())
        except (UnicodeDecodeError, ValueError) as err:
            raise MalformedBody(f"{cls.__name__}: not JSON ({err})") from None
        if not isinstance(data, dict):
            raise MalformedBody(f"{cls.__name__}: a JSON object expected, got {type(data).__name__}")
        return cls(**cls._values(data))

    @classmethod
    def _values(cls, data: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = cls.JSON_NAMES.get(f.name)
            if key is None or data.get(key) is None:
                continue
            values[f.name] = _typed(cls.__name__, key, data[key], f)
        return values

    def copy_base_info(self, other: RequestOrResponse) -> None:
        for name in _BASE_NAMES:
            setattr(self, name, getattr(other, name))


def _typed(owner: str, key: str, value: Any, f: dataclasses.Field) -> Any:
    """A JSON value as the field's type (an int, ``code`` too, whatever its value; a str; an enum by name; bytes
    from base64; a map of strings)."""
    ok = True
    default = f.default
    if str(f.type).startswith("int"):
        ok = _is_int(value)
    elif str(f.type).startswith("bytes"):
        return _base64(owner, key, value)
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _base64(owner: str, key: str, value: Any) -> bytes:
    """fastjson's byte[]: a base64 string."""
    try:
        if isinstance(value, str):
            return base64.b64decode(value, validate=True)
    except binascii.Error:
        pass
    raise MalformedBody(f"{owner}: {key} is not base64: {str(value)[:40]!r}")


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


# -- log replication --------------------------------------------------------------------------------------------------


class PushType(Enum):
    """``PushEntryRequest.Type``, sent by name."""

    APPEND = "APPEND"  # entries for the follower's log
    COMMIT = "COMMIT"  # only the committed index (no entry)
    COMPARE = "COMPARE"  # does the follower hold this entry?
    TRUNCATE = "TRUNCATE"  # make this entry the follower's last


_ENTRY_NAMES = {"body": "body", "body_crc": "bodyCrc", "chain_crc": "chainCrc", "channel": "channel",
                "index": "index", "magic": "magic", "pos": "pos", "size": "size", "term": "term"}


def _entry_json(entry: DLedgerEntry) -> dict[str, Any]:
    return {"body": base64.b64encode(entry.body).decode("ascii"), "bodyCrc": entry.body_crc,
            "chainCrc": entry.chain_crc, "channel": entry.channel, "index": entry.index, "magic": entry.magic,
            "pos": entry.pos, "size": entry.size, "term": entry.term}


def _entry_of(owner: str, data: Any) -> DLedgerEntry:
    """A DLedgerEntry bean; its size as DLedger computes it before writing (header + body)."""
    if not isinstance(data, dict) or not isinstance(data.get("body"), str):
        raise MalformedBody(f"{owner}: an entry is an object with a body, got {str(data)[:80]!r}")
    values: dict[str, Any] = {"body": _base64(owner, "entry.body", data["body"])}
    for name, key in _ENTRY_NAMES.items():
        value = data.get(key)
        if name == "body" or value is None:
            continue
        if not _is_int(value):
            raise MalformedBody(f"{owner}: entry.{key} is {value!r}")
        values[name] = value
    values.setdefault("size", BODY_OFFSET + len(values["body"]))
    for name in ("index", "term", "pos"):
        values.setdefault(name, 0)
    return DLedgerEntry(**values)


@dataclass(slots=True)
class PushEntryRequest(RequestOrResponse):
    """The leader's push to ``remoteId``: entries to append, one to compare or truncate at, or only the committed
    index. ``entry`` for one entry, ``batch_entry`` for a batch (enableBatchPush)."""

    commit_index: int = -1
    type: PushType = PushType.APPEND
    entry: DLedgerEntry | None = None
    batch_entry: list[DLedgerEntry] = field(default_factory=list)

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(commit_index="commitIndex", type="type")

    @property
    def entries(self) -> list[DLedgerEntry]:
        return self.batch_entry or ([self.entry] if self.entry is not None else [])

    @property
    def first_entry_index(self) -> int:
        entries = self.entries
        return entries[0].index if entries else -1

    @property
    def last_entry_index(self) -> int:
        entries = self.entries
        return entries[-1].index if entries else -1

    def to_json(self) -> dict[str, Any]:
        out = RequestOrResponse.to_json(self)
        out.update(batch=bool(self.batch_entry), batchEntry=[_entry_json(e) for e in self.batch_entry],
                   count=len(self.entries), firstEntryIndex=self.first_entry_index,
                   lastEntryIndex=self.last_entry_index, totalSize=sum(e.size for e in self.batch_entry))
        if self.entry is not None:
            out["entry"] = _entry_json(self.entry)
        return out

    @classmethod
    def _values(cls, data: dict[str, Any]) -> dict[str, Any]:
        values = super(PushEntryRequest, cls)._values(data)
        if data.get("entry") is not None:
            values["entry"] = _entry_of(cls.__name__, data["entry"])
        batch = data.get("batchEntry") or []
        if not isinstance(batch, list):
            raise MalformedBody(f"{cls.__name__}: batchEntry is {str(batch)[:80]!r}")
        values["batch_entry"] = [_entry_of(cls.__name__, each) for each in batch]
        return values


@dataclass(slots=True)
class PushEntryResponse(RequestOrResponse):
    """A follower's answer: the request's first index and count (none for COMMIT), and its log's bounds."""

    index: int | None = None
    begin_index: int = 0
    end_index: int = 0
    count: int = 0

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(index="index", begin_index="beginIndex", end_index="endIndex",
                                                     count="count")


@dataclass(slots=True)
class AppendEntryRequest(RequestOrResponse):
    """A client's append: ``body`` becomes the leader's next entry."""

    body: bytes | None = None

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(body="body")

    def to_json(self) -> dict[str, Any]:
        out = RequestOrResponse.to_json(self)
        if self.body is not None:
            out["body"] = base64.b64encode(self.body).decode("ascii")
        return out


@dataclass(slots=True)
class AppendEntryResponse(RequestOrResponse):
    """The committed entry's index and pos (-1 when refused)."""

    index: int = -1
    pos: int = -1

    JSON_NAMES: ClassVar[Mapping[str, str]] = _names(index="index", pos="pos")
