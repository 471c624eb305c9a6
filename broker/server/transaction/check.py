"""TransactionalMessageCheckService: asks producers about half messages left open, every transactionCheckInterval.

A half message is first asked about once it is older than transactionTimeOut (or its CHECK_IMMUNITY_TIME_IN_SECONDS),
at the next round; then at every round until its producer ends it, at most transactionCheckMax times; after that it
is discarded to TRANS_CHECK_MAX_TIME_TOPIC (``TransactionalMessageService.check`` does one round).

Examples:
    >>> TransactionalMessageCheckService(controller).start()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.server.broker_controller import BrokerController

log = logging.getLogger(__name__)


class TransactionalMessageCheckService:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self.rounds = 0
        self.active = False
        self._scheduled = False

    def start(self) -> None:
        """Run a round every transactionCheckInterval until ``stop`` or the controller's shutdown (it owns the
        task)."""
        self.active = True
        if not self._scheduled:
            self._scheduled = True
            self.controller.every(self.controller.broker_config.transaction_check_interval / 1000, self._tick)

    def stop(self) -> None:
        """No more rounds (a DLedger member stopped being the master) until ``start`` again."""
        self.active = False

    async def _tick(self) -> None:
        if self.active:
            await self.run_round()

    async def run_round(self) -> int:
        begin = time.monotonic()
        asked = await self.controller.transactional_message_service.check()
        self.rounds += 1
        if asked:
            log.info("transaction check asked about %d half messages in %.0f ms", asked,
                     (time.monotonic() - begin) * 1000)
        return asked
