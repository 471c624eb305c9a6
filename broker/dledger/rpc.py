"""DLedgerRpcService: DLedger's calls between members, over RocketMQ remoting, as DLedgerRpcNettyService makes them.

A member listens on its own peer address (``dLegerPeers``) and calls the others there. Each call is a request
command with a DLedgerRequestCode and the request object as JSON body; the answer is a command with code 200
(DLedger's SUCCESS, not remoting's 0) carrying the response object (``protocol.py``). A peer that cannot be reached
answers for itself, as Java's client does: a vote with result UNKNOWN, any other call with code NETWORK_ERROR (a
push or append with the request's ids and term). Calls time out after 3 s (Java's invokeAsync timeout). A handler
may answer later (an append waits for its quorum) or never (a push the follower dropped): then nothing is written.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from broker.common.errors import RemotingError
from broker.dledger.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    Body,
    DLedgerRequestCode,
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    RequestOrResponse,
    VoteRequest,
    VoteResponse,
)
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.exchange import parse_address
from broker.remoting.server import Processor, RemotingServer

log = logging.getLogger(__name__)

RPC_TIMEOUT_MS = 3000


class DLedgerProtocolHandler(Protocol):
    """What a member answers (DLedgerServer's handle* methods)."""

    def handle_vote(self, request: VoteRequest) -> VoteResponse: ...

    def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse: ...

    def handle_metadata(self, request: MetadataRequest) -> MetadataResponse: ...

    def handle_push(self, request: PushEntryRequest) -> Awaitable[PushEntryResponse | None]: ...

    def handle_append(self, request: AppendEntryRequest) -> Awaitable[AppendEntryResponse]: ...


class DLedgerRpcClient:
    """Calls to the members of a group (and METADATA to any address); usable again after ``close``."""

    def __init__(self, peers: Mapping[str, str], timeout_ms: float = RPC_TIMEOUT_MS) -> None:
        self.peers = dict(peers)
        self.timeout_ms = timeout_ms
        self._client = RemotingClient(default_timeout_ms=timeout_ms)

    async def close(self) -> None:
        client, self._client = self._client, RemotingClient(default_timeout_ms=self.timeout_ms)
        await client.close()

    async def vote(self, request: VoteRequest) -> VoteResponse:
        answer = await self._call(DLedgerRequestCode.VOTE, request)
        return VoteResponse() if answer is None else VoteResponse.decode(answer)

    async def heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        answer = await self._call(DLedgerRequestCode.HEART_BEAT, request)
        return (HeartBeatResponse(code=DLedgerResponseCode.NETWORK_ERROR) if answer is None
                else HeartBeatResponse.decode(answer))

    async def metadata(self, request: MetadataRequest, address: str | None = None) -> MetadataResponse:
        """The group's members and leader as the member ``request.remote_id`` (or the one at ``address``) knows."""
        answer = await self._call(DLedgerRequestCode.METADATA, request, address)
        return (MetadataResponse(code=DLedgerResponseCode.NETWORK_ERROR) if answer is None
                else MetadataResponse.decode(answer))

    async def push(self, request: PushEntryRequest) -> PushEntryResponse:
        answer = await self._call(DLedgerRequestCode.PUSH, request)
        return PushEntryResponse.decode(answer) if answer is not None else _network_error(PushEntryResponse(), request)

    async def append(self, request: AppendEntryRequest) -> AppendEntryResponse:
        answer = await self._call(DLedgerRequestCode.APPEND, request)
        return (AppendEntryResponse.decode(answer) if answer is not None
                else _network_error(AppendEntryResponse(), request))

    async def _call(self, code: DLedgerRequestCode, request: RequestOrResponse,
                    address: str | None = None) -> bytes | None:
        """The answer's body, or None when the peer did not answer (down, timed out, or not a DLedger member)."""
        address = address or self.peers.get(request.remote_id or "")
        if address is None:
            raise KeyError(f"{request.remote_id!r} is not a peer of group {request.group}")
        try:
            response = await self._client.invoke(address, create_request(code, body=request.encode()))
        except RemotingError as err:
            log.debug("DLedger %s to %s failed: %s", code.name, address, err)
            return None
        if response.code != DLedgerResponseCode.SUCCESS:
            log.warning("DLedger %s to %s answered %s %s", code.name, address, response.code, response.remark)
            return None
        return bytes(response.body)


class DLedgerRpcService:
    """The member's server on its peer address and its client to the other members."""

    def __init__(self, address: str, handler: DLedgerProtocolHandler, peers: Mapping[str, str],
                 timeout_ms: float = RPC_TIMEOUT_MS) -> None:
        host, port = parse_address(address)
        self.client = DLedgerRpcClient(peers, timeout_ms)
        routes: dict[DLedgerRequestCode, tuple[type[RequestOrResponse], Callable[..., object]]] = {
            DLedgerRequestCode.VOTE: (VoteRequest, handler.handle_vote),
            DLedgerRequestCode.HEART_BEAT: (HeartBeatRequest, handler.handle_heart_beat),
            DLedgerRequestCode.METADATA: (MetadataRequest, handler.handle_metadata),
            DLedgerRequestCode.PUSH: (PushEntryRequest, handler.handle_push),
            DLedgerRequestCode.APPEND: (AppendEntryRequest, handler.handle_append),
        }
        processors = {code: _processor(body_type, handle) for code, (body_type, handle) in routes.items()}
        for code in set(DLedgerRequestCode) - set(routes):  # GET, PULL and leadership transfer: not yet
            processors[code] = _processor(RequestOrResponse, _unsupported)
        self._server = RemotingServer(host, port, processors=processors)

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()
        await self.client.close()


def _network_error(response: Body, request: RequestOrResponse) -> Body:
    response.copy_base_info(request)
    response.code = DLedgerResponseCode.NETWORK_ERROR
    return response


def _unsupported(request: RequestOrResponse) -> RequestOrResponse:
    """A DLedger body with code UNSUPPORTED, so that a Java member reads an answer rather than an empty body."""
    answer = RequestOrResponse()
    answer.copy_base_info(request)
    answer.code = DLedgerResponseCode.UNSUPPORTED
    return answer


def _processor(body_type: type[RequestOrResponse], handle: Callable[..., object]) -> Processor:
    async def process(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        answer = handle(body_type.decode(bytes(request.body)))
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None:
            return None
        return create_response(request, DLedgerResponseCode.SUCCESS, body=answer.encode())

    return process
