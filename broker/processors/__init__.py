"""Request processors, one module per request family. Each module has ``register(controller)``, which puts its
handlers on the controller's remoting server."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.broker_controller import BrokerController

MODULES = ("send", "pull", "client", "consumer", "admin", "send_back", "end_transaction")


def register_all(controller: BrokerController) -> None:
    for name in MODULES:
        module = importlib.import_module(f"broker.processors.{name}")
        module.register(controller)
