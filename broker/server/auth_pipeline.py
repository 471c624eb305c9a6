"""The broker's request check with ACL 2.0 on (Apache's AuthenticationPipeline and AuthorizationPipeline): every
request, before its processor, goes through ``broker.auth.evaluate``; a refusal is answered NO_PERMISSION (16) with
Apache's message as the remark, and the processor never sees the request."""

from __future__ import annotations

import logging

from broker.auth.evaluate import AuthEvaluator
from broker.common.errors import AuthError
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection

log = logging.getLogger(__name__)


def source_ip(remote_address: str) -> str:
    """The remote address before its last ``:`` (Apache's ``substringBeforeLast``), an IPv6 one without brackets."""
    host = remote_address.rpartition(":")[0] or remote_address
    return host.removeprefix("[").removesuffix("]")


class AuthPipeline:
    """``RemotingServer.set_request_pipeline``'s check for a broker with authentication or authorization on."""

    def __init__(self, evaluator: AuthEvaluator) -> None:
        self.evaluator = evaluator

    def __call__(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            self.evaluator.check(request, source_ip(conn.remote_address))
        except AuthError as err:
            log.info("request code %s from %s refused: %s", request.code, conn.remote_address, err)
            return create_response(request, ResponseCode.NO_PERMISSION, str(err))
        return None
