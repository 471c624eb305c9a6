"""Which request processors a broker registers, in order: ``BrokerController`` builds each one (a class per request
family, given the parts it uses) and ``register_all`` puts the handlers of those named in MODULES on the remoting
server."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.remoting.server import RemotingServer
    from broker.server.processors.common import RequestProcessor

MODULES = ("send", "pull", "client_manage", "consumer_manage", "admin", "send_back", "end_transaction", "auth_admin",
           "acl_admin")


def register_all(server: RemotingServer,
                 builders: Mapping[str, Callable[[], RequestProcessor]]) -> dict[str, RequestProcessor]:
    """Build the processors MODULES names (``builders``: name -> a function that builds it) and register their
    handlers on ``server``, with the processor's ``reject_request`` if it has one; returns them by name."""
    processors = {}
    for name in MODULES:
        processor = builders[name]()
        reject_request = getattr(processor, "reject_request", None)  # RejectingProcessor
        for code, handler in processor.handlers().items():
            server.register_processor(code, handler, reject_request)
        processors[name] = processor
    return processors
