"""Which processor modules a broker registers: each has ``register(controller)``, which puts its handlers on the
controller's remoting server."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.server.broker_controller import BrokerController

MODULES = ("send", "pull", "client_manage", "consumer_manage", "admin", "send_back", "end_transaction")


def register_all(controller: BrokerController) -> None:
    for name in MODULES:
        module = importlib.import_module(f"broker.server.processors.{name}")
        module.register(controller)
