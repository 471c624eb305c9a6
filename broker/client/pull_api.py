"""PullAPIWrapper (client/impl/consumer/PullAPIWrapper.java): every pull of a consumer goes through here, so the
broker decides where the next pull of a queue goes.

Each pull response carries suggestWhichBrokerId; it is kept per queue (``PullFromWhichNode``, in route.py with the
other addressing rules) and the next pull of that queue asks for that replica. When the route has no address for it
(the master is gone, or the suggested slave), findBrokerAddressInSubscribe falls back to another replica of the
brokerName, so a consumer reads from a slave while its master is down and returns to the master once the route has
it again and a response suggests it (a broker with slaveReadEnable off, or a group whose brokerId is 0, suggests the
master). A pull that goes to a slave carries no commit offset: only a master stores offsets from pulls.

Examples:
    >>> wrapper = PullAPIWrapper(instance, "my_group")  # doctest: +SKIP
    >>> result = await wrapper.pull_kernel(mq, 0, 32, subscription=sub, timeout_ms=3000)  # doctest: +SKIP
"""

from __future__ import annotations

from broker.client import protocol
from broker.client.instance import MQClientInstance
from broker.client.message import MessageQueue, PullResult
from broker.client.route import PullFromWhichNode


class PullAPIWrapper:
    """One consumer's pulls: the per-queue suggested broker ids and the pull itself (pullKernelImpl, then
    processPullResult)."""

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.pull_from_which_node = PullFromWhichNode()

    async def pull_kernel(self, mq: MessageQueue, offset: int, max_nums: int, *,
                          subscription: protocol.SubscriptionData | None, commit_offset: int | None = None,
                          suspend_timeout_ms: int = 0, timeout_ms: int, max_msg_bytes: int | None = None,
                          decode: bool = True) -> PullResult:
        """PULL_MESSAGE of ``mq`` from the replica its last response suggested; the suggestion of this response is
        kept for the next pull, and the body decoded when ``decode`` (messages filtered by tag, stamped with the
        queue and its min/max offsets)."""
        result = await self.instance.pull_message(
            self.group, mq, offset, max_nums, subscription=subscription,
            broker_id=self.pull_from_which_node.recalculate(mq), commit_offset=commit_offset,
            suspend_timeout_ms=suspend_timeout_ms, timeout_ms=timeout_ms, max_msg_bytes=max_msg_bytes)
        self.pull_from_which_node.update(mq, result.suggest_which_broker_id)
        if decode:
            protocol.decode_pull_result(result, mq, subscription)
        return result
