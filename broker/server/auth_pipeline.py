"""The broker's request check (Apache's server RPC hook for ACL 1.0, then its AuthenticationPipeline and
AuthorizationPipeline for ACL 2.0): every request, before its processor.

Either may be on, or both (as on Apache 5.3.0-5.3.2). ACL 1.0 (``broker.auth.plain``) runs first; its refusal is
held while ACL 2.0 (``broker.auth.evaluate``) runs, as Apache's ``buildProcessRequestHandler`` holds a hook's
exception: a 2.0 refusal is answered NO_PERMISSION (16) with Apache's message, else a 1.0 refusal SYSTEM_ERROR (1)
with the ``AclException`` remark. The processor never sees a refused request.
"""

from __future__ import annotations

import logging

from broker.auth.evaluate import AuthEvaluator
from broker.auth.plain import PlainPermissionManager
from broker.common.errors import AclException, AuthError
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection

log = logging.getLogger(__name__)


def source_ip(remote_address: str) -> str:
    """The remote address before its last ``:`` (Apache's ``substringBeforeLast``), an IPv6 one without brackets."""
    host = remote_address.rpartition(":")[0] or remote_address
    return host.removeprefix("[").removesuffix("]")


class AuthPipeline:
    """``RemotingServer.set_request_pipeline``'s check for a broker with ACL 1.0, ACL 2.0, or both on."""

    def __init__(self, evaluator: AuthEvaluator | None, plain: PlainPermissionManager | None = None) -> None:
        self.evaluator = evaluator
        self.plain = plain

    def __call__(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        ip = source_ip(conn.remote_address)
        held: AclException | None = None
        if self.plain is not None:
            try:
                self.plain.validate(request, ip)
            except AclException as err:
                held = err
        if self.evaluator is not None:
            try:
                self.evaluator.check(request, ip)
            except AuthError as err:
                log.info("request code %s from %s refused: %s", request.code, conn.remote_address, err)
                return create_response(request, ResponseCode.NO_PERMISSION, str(err))
        if held is not None:
            log.info("request code %s from %s refused by ACL 1.0: %s", request.code, conn.remote_address, held)
            return create_response(request, ResponseCode.SYSTEM_ERROR, held.remark)
        return None
