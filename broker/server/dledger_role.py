"""DLedgerRoleChangeHandler: a DLedger member's elections turn its broker into a master or a slave.

The elector's role changes are handled one at a time, in order, on the event loop (Apache's single-thread executor):
- FOLLOWER, or CANDIDATE while not a slave already: ``change_to_slave`` with the member's brokerId (its self id's
  number + 1): master-only services stop, metadata sync from the master starts, and the broker registers at once.
- LEADER: once every entry in the log is committed and dispatched (or leadership is lost meanwhile: nothing), the
  queue offsets are rebuilt from the ConsumeQueues and ``change_to_master(SYNC_MASTER)``: brokerId 0, the master-only
  services (delayed delivery, transaction checks), an immediate registration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.common.tasks import cancel_and_wait
from broker.dledger.config import slave_broker_id
from broker.dledger.member_state import Role
from broker.store.config import BrokerRole

if TYPE_CHECKING:
    from broker.dledger.message_store import DLedgerMessageStore
    from broker.server.broker_controller import BrokerController

log = logging.getLogger(__name__)

COMMIT_POLL_S = 0.1  # how often a new leader checks that its log is committed and dispatched


class DLedgerRoleChangeHandler:
    def __init__(self, controller: BrokerController, store: DLedgerMessageStore) -> None:
        self.controller = controller
        self.store = store
        self.broker_id = slave_broker_id(store.dledger.setup.self_id)
        self._changes: asyncio.Queue[tuple[int, Role]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        store.server.add_role_change_handler(self.handle)

    def handle(self, term: int, role: Role) -> None:
        """The elector's callback: queued, handled in order by ``start``'s task."""
        self._changes.put_nowait((term, role))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._work(), name="dledger-role-change")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _work(self) -> None:
        while True:
            term, role = await self._changes.get()
            begin = time.monotonic()
            try:
                log.info("Begin handling broker role change term=%s role=%s currStoreRole=%s", term, role.name,
                         self.controller.broker_config.broker_role)
                done = await self._change(role)
                log.info("Finish handling broker role change succ=%s term=%s role=%s currStoreRole=%s cost=%.0f",
                         done, term, role.name, self.controller.broker_config.broker_role,
                         (time.monotonic() - begin) * 1000)
            except Exception:
                log.exception("[MONITOR]Failed handling broker role change term=%s role=%s", term, role.name)

    async def _change(self, role: Role) -> bool:
        controller = self.controller
        if role is Role.FOLLOWER or (role is Role.CANDIDATE
                                     and controller.broker_config.broker_role is not BrokerRole.SLAVE):
            await controller.change_to_slave(self.broker_id)
        elif role is Role.LEADER:
            dledger = self.store.dledger.store
            while dledger.ledger_end_index != -1 and not self.store.caught_up:
                if not dledger.member_state.is_leader:
                    return False
                await asyncio.sleep(COMMIT_POLL_S)
            if not dledger.member_state.is_leader:
                return False
            self.store.recover_topic_queue_table()
            await controller.change_to_master(BrokerRole.SYNC_MASTER)
        return True
