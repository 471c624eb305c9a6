"""The one error tree of rmq. Expected outcomes (a full queue, an offset out of range, a flush timeout) are status
values, not exceptions; what is raised here means something is wrong with an input, a file or a peer."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.remoting.frame import Frame


class RmqError(Exception):
    """Root of every error rmq raises on purpose."""


class ConfigError(RmqError, ValueError):
    """A bad configuration key or value; the message names both."""


# -- store ------------------------------------------------------------------------------------------------------------


class StoreError(RmqError):
    pass


class CorruptRecord(StoreError):
    """Bytes at a CommitLog position are not a whole, well-formed record."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"no valid record at offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


class StoreFull(StoreError):
    pass


class IllegalName(RmqError, ValueError):
    """A topic or group name that RocketMQ's rules reject."""


# -- remoting (broker/remoting) ---------------------------------------------------------------------------------------
# h11's split: a LocalProtocolError is our bug (we tried to send what the protocol cannot carry), a
# RemoteProtocolError is the peer's (its bytes are not RocketMQ remoting). RemotingError is about the transport.


class ProtocolError(RmqError):
    """Bytes or a command that break the remoting protocol; ``reason`` says what, for logs and error responses."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LocalProtocolError(ProtocolError, ValueError):
    """We were asked to encode something the protocol cannot carry (a code beyond 16 bits in a ROCKETMQ header)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something that is not a valid remoting frame or command."""


class MalformedFrame(RemoteProtocolError):
    """The byte stream cannot be split into frames any more, so the connection must close.

    ``frames`` holds the whole frames decoded from the same input before the bad one: they are valid and the
    caller should still handle them."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.frames: list[Frame] = []


class MalformedCommand(RemoteProtocolError):
    """A well-framed command whose header cannot be decoded. ``opaque`` and ``is_response`` are what could be
    read before the error (None when unknown), so the receiver can still answer the right request."""

    def __init__(self, reason: str, *, opaque: int | None = None, is_response: bool | None = None) -> None:
        super().__init__(reason)
        self.opaque = opaque
        self.is_response = is_response


class RemotingError(RmqError):
    """A remoting call failed for a transport reason (not a response code: those are values)."""


class RequestTimeout(RemotingError, TimeoutError):
    """No response arrived within the timeout; the message names the request code, opaque and peer."""

    def __init__(self, message: str, *, opaque: int, code: int) -> None:
        super().__init__(message)
        self.opaque = opaque
        self.code = code


class ConnectionClosed(RemotingError, ConnectionError):
    """The connection closed before the call completed; ``reason`` is a broker.remoting.connection.CloseReason."""

    def __init__(self, reason: object, detail: str = "") -> None:
        name = getattr(reason, "name", reason)
        super().__init__(f"connection closed ({name}){': ' + detail if detail else ''}")
        self.reason = reason


class RemotingConnectError(RemotingError, ConnectionError):
    """Could not open a connection to ``address`` ("host:port")."""

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot connect to {address}: {detail}")
        self.address = address


# -- metadata ---------------------------------------------------------------------------------------------------------


class MetadataError(RmqError):
    """Broker metadata (topics.json, subscriptionGroup.json, consumerOffset.json) cannot be used as found."""


class MetadataCorrupt(MetadataError):
    """A metadata file and its backup are both unreadable; starting empty would silently drop topics or offsets."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot load {path} (nor its .bak): {reason}")
        self.path = path
        self.reason = reason
