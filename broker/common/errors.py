"""The one error tree of rmq. Expected outcomes (a full queue, an offset out of range, a flush timeout) are status
values, not exceptions; what is raised here means something is wrong with an input, a file or a peer.

Rule 1: which response codes a client retries, and which exception class each code raises, is decided here
(``for_code``) and nowhere else."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, ClassVar

from broker.remoting.codes import ResponseCode

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


class IllegalName(RmqError, ValueError):
    """A topic or group name that RocketMQ's rules reject."""


# -- subscription expressions (broker/server/filter/sql92.py) ----------------------------------------------------------


class FilterExpressionError(RmqError, ValueError):
    """A SQL92 selector that does not compile. ``str()`` is the reason worded as Java's broker words it in a remark
    (MQFilterException.getMessage(): the cause's class and message, e.g. ``java.lang.RuntimeException: Value ''x''
    cannot be compared.``)."""


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


class MalformedBody(RemoteProtocolError):
    """A well-formed command whose body is not the layout its code defines (a binary body that is cut short, runs
    on, or counts more items than allowed); the request is refused as a whole, nothing of it applied."""


class HAProtocolError(RemoteProtocolError):
    """A replication peer broke the HA protocol (an offset this side cannot follow, a frame that does not fit): the
    HA connection closes, and the slave connects again and reports where it is."""


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


class DLedgerError(RmqError):
    """A DLedger append (or request) refused with one of DLedger's response codes (``broker.dledger.protocol``'s
    DLedgerResponseCode: NOT_LEADER, LEADER_PENDING_FULL, WAIT_QUORUM_ACK_TIMEOUT, ...); ``leader_id`` is the
    leader this member knows, if any."""

    def __init__(self, code: int, message: str, *, leader_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.leader_id = leader_id


# -- metadata ---------------------------------------------------------------------------------------------------------


class MetadataError(RmqError):
    """Broker metadata (topics.json, subscriptionGroup.json, consumerOffset.json) cannot be used as found."""


class MetadataCorrupt(MetadataError):
    """A metadata file and its backup are both unreadable; starting empty would silently drop topics or offsets."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot load {path} (nor its .bak): {reason}")
        self.path = path
        self.reason = reason



# -- ACL 2.0 (broker/auth) --------------------------------------------------------------------------------------------
# Apache's AuthenticationException and AuthorizationException: the message is the remark a refused request is answered
# with (NO_PERMISSION), word for word, so it is Apache's text.


class AuthError(RmqError):
    """A request or an admin change refused by authentication or authorization; ``str()`` is Apache's remark."""


class AuthenticationError(AuthError):
    """Who sent the request could not be established: no or unknown user, a disabled user, a wrong signature; also a
    user change the user table refuses (``The user is existed``)."""


class AuthorizationError(AuthError):
    """The user may not do what the request asks, or an ACL change is refused (``The policies is empty.``)."""


class AclException(AuthError):
    """ACL 1.0 (``plain_acl.yml``) refused a request or an account change: Apache's ``AclException``. A refused
    request is answered SYSTEM_ERROR with ``remark``, the exception's ``toString()`` and its first stack frame
    (``UtilAll.exceptionSimpleDesc``), so ``frame`` names the Java method and line that throws it in 5.3.2."""

    JAVA_CLASS = "org.apache.rocketmq.acl.common.AclException"

    def __init__(self, message: str | None, frame: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame

    @property
    def remark(self) -> str:
        text = self.JAVA_CLASS if self.message is None else f"{self.JAVA_CLASS}: {self.message}"
        return f"{text}, {self.frame}" if self.frame else text

# -- client (broker/client) -------------------------------------------------------------------------------------------
# Java's MQClientException (our side refused or gave up) and MQBrokerException (the broker answered a code that is not
# an expected outcome). Expected outcomes (SEND_OK, FLUSH_DISK_TIMEOUT, PULL_NOT_FOUND...) are status values instead.


class ClientErrorCode(IntEnum):
    """org.apache.rocketmq.client.common.ClientErrorCode: the codes an MQClientError carries when no broker spoke."""

    CONNECT_BROKER_EXCEPTION = 10001
    ACCESS_BROKER_TIMEOUT = 10002
    BROKER_NOT_EXIST_EXCEPTION = 10003
    NO_NAME_SERVER_EXCEPTION = 10004
    NOT_FOUND_TOPIC_EXCEPTION = 10005
    REQUEST_TIMEOUT_EXCEPTION = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION = 10007


class MQClientError(RmqError):
    """The client refused a call (an invalid message or topic, no route, no broker) or gave up after its retries.

    ``code`` is a ResponseCode (MESSAGE_ILLEGAL for a bad message, as Java's Validators), a ClientErrorCode, or -1
    when Java gives none; ``remark`` is the text, Java's own where Java has one."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"CODE: {int(code)}  DESC: {remark}" if code != -1 else remark)
        self.code = int(code)
        self.remark = remark

    @property
    def retriable(self) -> bool:
        """Worth trying again later: the broker or NameServer was unreachable or slow, not the input wrong."""
        return self.code in (ClientErrorCode.CONNECT_BROKER_EXCEPTION, ClientErrorCode.ACCESS_BROKER_TIMEOUT,
                             ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, ClientErrorCode.NO_NAME_SERVER_EXCEPTION)


class MQBrokerError(RmqError):
    """A broker (or NameServer) answered ``code`` with ``remark`` where the call needed success; ``address`` is the
    server that answered.

    aiokafka's table: a response code the client or the connector treats specially has its own subclass, which
    declares the ``code`` it stands for and whether it is ``retriable`` (the producer then tries another broker:
    Java's DefaultMQProducer.retryResponseCodes). ``for_code(code)`` finds the class; raise through it, so that
    ``except OffsetNotFound`` or ``err.retriable`` see the right class. Any other code is a plain MQBrokerError.

    Examples:
        >>> err = for_code(ResponseCode.SYSTEM_BUSY)(ResponseCode.SYSTEM_BUSY, "too many requests", "127.0.0.1:10911")
        >>> type(err).__name__, err.retriable, str(err)
        ('SystemBusy', True, 'CODE: 2  DESC: too many requests BROKER: 127.0.0.1:10911')
    """

    code: int  # the answer's code; on a subclass also a class attribute, the ResponseCode it stands for
    retriable: ClassVar[bool] = False

    def __init__(self, code: int, remark: str | None, address: str | None = None) -> None:
        where = f" BROKER: {address}" if address else ""
        super().__init__(f"CODE: {int(code)}  DESC: {remark}{where}")
        self.code = int(code)
        self.remark = remark
        self.address = address

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _BROKER_ERRORS[int(cls.code)] = cls


_BROKER_ERRORS: dict[int, type[MQBrokerError]] = {}


def for_code(code: int) -> type[MQBrokerError]:
    """The MQBrokerError class of a response code: its own subclass, else MQBrokerError itself."""
    return _BROKER_ERRORS.get(int(code), MQBrokerError)


def broker_error(code: int, remark: str | None, address: str | None = None) -> MQBrokerError:
    """The exception for a broker's answer ``code``: an instance of ``for_code(code)``."""
    return for_code(code)(code, remark, address)


# DefaultMQProducer.retryResponseCodes: the producer sends again, to another broker when there is one.


class BrokerSystemError(MQBrokerError):
    """SYSTEM_ERROR: the broker failed on its side (an exception, a store that refused)."""

    code = ResponseCode.SYSTEM_ERROR
    retriable = True


class SystemBusy(MQBrokerError):
    """SYSTEM_BUSY: the broker sheds load (its send queue is full, or the page cache is busy)."""

    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class ServiceNotAvailable(MQBrokerError):
    """SERVICE_NOT_AVAILABLE: the broker cannot serve this now (a replica asked to write, a store shutting down)."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermission(MQBrokerError):
    """NO_PERMISSION: the topic or broker is not writable (or readable) now."""

    code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExist(MQBrokerError):
    """TOPIC_NOT_EXIST: this broker does not have the topic (another of its route may)."""

    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class NoBuyerId(MQBrokerError):
    code = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnit(MQBrokerError):
    code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


class GoAway(MQBrokerError):
    """GO_AWAY: the broker is shutting down and asks its clients to go elsewhere."""

    code = ResponseCode.GO_AWAY
    retriable = True


class OffsetNotFound(MQBrokerError):
    """QUERY_CONSUMER_OFFSET answered QUERY_NOT_FOUND: the group has no committed offset for the queue yet."""

    code = ResponseCode.QUERY_NOT_FOUND


# -- connector (connector/) -------------------------------------------------------------------------------------------


class ConnectorError(RmqError):
    """The Spark connector cannot go on; the message names the topic, broker, queue or option concerned."""


class ConnectorOptionError(ConnectorError, ConfigError):
    """An unknown, missing, malformed or contradictory ``format("rmq")`` option, reported when the query starts."""


class AccessDenied(ConnectorError):
    """The broker's access control refused a request the query needs (ACL 2.0's NO_PERMISSION, ACL 1.0's
    AclException): the message says which actions on which resources the query needs, and what the broker said."""


class DataLossError(ConnectorError):
    """A queue's minimum offset moved past the offset the query needs next (retention removed the data), and
    failOnDataLoss is true."""


# -- local processes and jobs (broker/tools/local_cluster.py, jobs/) ---------------------------------------------------


class ServerError(RmqError, RuntimeError):
    """A NameServer or broker process did not start or stop as expected; the message carries its console's tail."""


class JobError(RmqError):
    """A job cannot run as asked (a bad argument, an unreachable NameServer, a missing table); the message says which
    and what to do, and the command exits with status 2 without a traceback."""
