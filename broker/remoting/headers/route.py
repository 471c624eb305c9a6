"""The route lookup's header (GET_ROUTEINFO_BY_TOPIC): the one NameServer request every client sends.

Java keeps it with the NameServer's headers (remoting/protocol/header/namesrv); here it has a module of its own, so
a client process (a Spark executor that pulls or sends and asks for a topic's route) loads no NameServer header
module. The NameServer parses it from here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.remoting.headers.base import Header


@dataclass(slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None
