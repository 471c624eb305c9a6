"""What every request processor shares: the handler type, the processor interface, Java's answers to a request that
does not parse, JSON bodies, the FAQ hint and the version and flag numbers several processors compare against.

Rule 1: a helper two processors use lives here, not in one of them (a processor imports no sibling processor).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from broker.common.errors import IllegalName, RemoteProtocolError
from broker.common.fastjson import decode_json, encode_json
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection, exception_simple_desc
from broker.remoting.headers import HeaderError
from broker.server.config import BrokerRole

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

Handler = Callable[[RemotingConnection, RemotingCommand], Awaitable[RemotingCommand | None]]

FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"  # FAQUrl.DEFAULT_FAQ_URL (every FAQ constant)
INDEX_PERM_READ = 2  # PermName.INDEX_PERM_READ: the forbidden bit of a group reading a topic
TOPIC_SYS_FLAG_UNIT, TOPIC_SYS_FLAG_UNIT_SUB = 0x1, 0x2  # TopicSysFlag: a unit topic, a unit-mode consumer's retry
# MQVersion.Version ordinals: what a client of at least this version understands
V3_0_7_SNAPSHOT = 28  # RESET_CONSUMER_CLIENT_OFFSET and GET_CONSUMER_STATUS_FROM_CLIENT
V3_1_8_SNAPSHOT = 62  # GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY passed on by the broker
V3_4_9 = 165  # a send or send-back may carry maxReconsumeTimes
DISPATCH_WAIT_POLLS = 200  # of 1 ms: how long a max-offset query waits for dispatch to catch up


class RequestProcessor(Protocol):
    """A processor of one request family (Java's NettyRequestProcessor): the handler of each code it serves. One
    that may turn requests away also has ``reject_request`` (RejectingProcessor); the others reject nothing."""

    def handlers(self) -> Mapping[int, Handler]: ...


class RejectingProcessor(RequestProcessor, Protocol):
    def reject_request(self) -> bool:
        """NettyRequestProcessor.rejectRequest: True answers every request SYSTEM_BUSY ([REJECTREQUEST]) before any
        handler runs (broker.remoting.server)."""
        ...


def is_slave(broker_config: BrokerConfig) -> bool:
    return broker_config.broker_role is BrokerRole.SLAVE


def sends_rejected(broker_config: BrokerConfig) -> bool:
    """SendMessageProcessor.rejectRequest, for sends and send-backs: a slave stores no message (an rmq slave never
    acts as master). Java also rejects while the OS page cache is busy, which rmq does not measure."""
    return is_slave(broker_config)


class ProcessorFamily:
    """Several processors registered under one name (``registry.MODULES``): the handlers of all of them."""

    def __init__(self, *processors: RequestProcessor) -> None:
        self.processors = processors

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {}
        for processor in self.processors:
            handlers.update(processor.handlers())
        return handlers


def suggest_todo(url: str = FAQ_URL) -> str:
    """FAQUrl.suggestTodo: the hint Java appends to some remarks."""
    return f"\nSee {url} for further details."


def bad_header_response(request: RemotingCommand, err: HeaderError) -> RemotingCommand:
    """What Java answers a request whose custom header does not decode (SYSTEM_ERROR, the exception's text)."""
    return create_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(err))


def guarded(handler: Handler) -> Handler:
    """Answer a request whose header or body does not parse as Java does (SYSTEM_ERROR with the exception)."""

    @functools.wraps(handler)
    async def wrapper(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            return await handler(conn, request)
        except (HeaderError, RemoteProtocolError) as err:
            log.warning("bad request code %s from %s: %s", request.code, conn.remote_address, err)
            return create_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(err))

    return wrapper


def decode_body(request: RemotingCommand) -> Any:
    """The request's JSON body (fastjson's dialect); RemoteProtocolError when it is missing or not JSON."""
    if not request.body:
        raise RemoteProtocolError(f"request code {request.code} needs a JSON body")
    try:
        return decode_json(request.body.decode())
    except (UnicodeDecodeError, ValueError) as err:
        raise RemoteProtocolError(f"request code {request.code} has a malformed JSON body: {err}") from err


def json_body(value: Any) -> bytes:
    return encode_json(value).encode()


def success(request: RemotingCommand, body: bytes = b"", ext_fields: dict[str, str] | None = None) -> RemotingCommand:
    return create_response(request, ResponseCode.SUCCESS, body=body, ext_fields=ext_fields)


def queue_value(read: Callable[[], int], missing: int) -> int:
    """A per-queue store value; a topic that cannot name a queue directory has no queue (``missing``)."""
    try:
        return read()
    except IllegalName:
        return missing


async def wait_dispatched(store: MessageStore) -> None:
    """Wait (briefly) until what the CommitLog held when the request came is in the ConsumeQueues: a client that
    asks right after SEND_OK then sees its messages, as with Java's dispatch (a thread that wakes every millisecond).
    Java's committed=true max offset counts dispatched messages only; so does this."""
    target = store.max_phy_offset
    for _ in range(DISPATCH_WAIT_POLLS):
        if store.is_dispatched(target):
            return
        await asyncio.sleep(0.001)
