"""The charts' figures: every ``interval_s`` the console asks each broker for its runtime table (clusterList's TPS
in and out, the CommitLog disk's used fraction) and each consumer group for its offsets (consumerProgress's lag), and
keeps the last ``history_s`` of samples in memory. Everything goes through the public protocol, so it samples
Apache's brokers as well as ours; a broker or group that does not answer is left out of that sample.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from broker.common.errors import RmqError
from broker.tools.admin import MQAdminExt
from broker.tools.commands import consumer_groups
from broker.tools.topic_commands import cluster_brokers

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 5.0
DEFAULT_HISTORY_S = 600.0
MAX_GROUPS = 32  # groups whose lag is sampled (the first, by name): each costs a route lookup and a request per broker


class Sampler:
    """Samples in rings of ``history_s / interval_s`` points: per broker (time, TPS in, TPS out, disk ratio), per
    group (time, lag)."""

    def __init__(self, admin: MQAdminExt, interval_s: float = DEFAULT_INTERVAL_S,
                 history_s: float = DEFAULT_HISTORY_S) -> None:
        self.check(interval_s, history_s)
        self.admin = admin
        self.interval_s, self.history_s = interval_s, history_s
        self._points = max(2, int(history_s / interval_s))
        self.brokers: dict[str, deque[tuple[int, float, float, float]]] = {}
        self.broker_labels: dict[str, str] = {}
        self.groups: dict[str, deque[tuple[int, int]]] = {}
        self.samples = 0

    @staticmethod
    def check(interval_s: float, history_s: float) -> None:
        if not interval_s > 0 or not history_s >= interval_s:
            raise ValueError(f"sample interval {interval_s} s and history {history_s} s: the interval must be "
                             "positive and no longer than the history")

    async def run(self) -> None:
        """Sample until cancelled; a failed round is logged and the next one tried."""
        while True:
            try:
                await self.sample_once()
            except (RmqError, OSError) as err:
                log.warning("console sample failed: %s", err)
            await asyncio.sleep(self.interval_s)

    async def sample_once(self) -> None:
        now = time.time_ns() // 1_000_000
        for broker in await cluster_brokers(self.admin):
            if broker.table:
                self.broker_labels[broker.addr] = f"{broker.broker_name}/{broker.broker_id}"
                ring = self.brokers.setdefault(broker.addr, deque(maxlen=self._points))
                ring.append((now, broker.in_tps, broker.out_tps, broker.disk_ratio))
        groups = sorted(await consumer_groups(self.admin))[:MAX_GROUPS]
        lags = await asyncio.gather(*(self._lag(g) for g in groups))
        for group, lag in zip(groups, lags, strict=True):
            if lag is not None:
                self.groups.setdefault(group, deque(maxlen=self._points)).append((now, lag))
        self.samples += 1

    async def _lag(self, group: str) -> int | None:
        try:
            return (await self.admin.examine_consume_stats(group)).compute_total_diff()
        except (RmqError, OSError) as err:
            log.debug("lag of %s: %s", group, err)
            return None

    def snapshot(self) -> dict[str, Any]:
        """The rings as JSON: each series a list of [time ms, value...] points, oldest first."""
        return {
            "intervalS": self.interval_s, "historyS": self.history_s, "samples": self.samples,
            "brokers": [{"addr": addr, "label": self.broker_labels.get(addr, addr), "points": [list(p) for p in ring]}
                        for addr, ring in sorted(self.brokers.items())],
            "groups": [{"group": group, "points": [list(p) for p in ring]}
                       for group, ring in sorted(self.groups.items())],
        }
