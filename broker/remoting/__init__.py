"""RocketMQ's remoting protocol: codes, frames and commands (sans-IO), and the asyncio connection, server, client.

``codes``/``frame``/``command`` do no I/O, so the blocking client and the tests share them with the async side.
"""

from broker.remoting.client import RemotingClient
from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from broker.remoting.command import CommandFlag, RemotingCommand, create_request, create_response
from broker.remoting.connection import CloseReason, RemotingConnection, open_connection
from broker.remoting.frame import Frame, FrameDecoder, encode_frame
from broker.remoting.server import RemotingServer

__all__ = [
    # codes
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    # frames and commands (sans-IO)
    "CommandFlag",
    "Frame",
    "FrameDecoder",
    "RemotingCommand",
    "create_request",
    "create_response",
    "encode_frame",
    # asyncio
    "CloseReason",
    "RemotingClient",
    "RemotingConnection",
    "RemotingServer",
    "open_connection",
]
