"""The suite's own helpers: the cluster pool shares one cluster per setting; waits fail naming what they waited for."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.helpers import LoopThread, eventually, run, wait_until
from tests.integration.cluster import ClusterPool


class FakeCluster:
    def __init__(self, kind: str, home: Path, brokers: int, conf: dict[str, object], closed: list[Path]) -> None:
        self.kind, self.home, self.brokers, self.conf, self._closed = kind, home, brokers, conf, closed

    def close(self) -> None:
        self._closed.append(self.home)


def test_the_pool_shares_one_cluster_per_setting_and_stops_them_all(tmp_path: Path) -> None:
    closed: list[Path] = []

    def start(kind: str, home: Path, brokers: int, **conf: object) -> FakeCluster:
        return FakeCluster(kind, home, brokers, conf, closed)

    with ClusterPool(tmp_path, start) as pool:  # type: ignore[arg-type]
        sql = pool.shared(enablePropertyFilter=True, brokerName="broker-a")
        assert pool.shared(brokerName="broker-a", enablePropertyFilter=True) is sql  # keyword order does not count
        assert pool.shared(enablePropertyFilter="true", brokerName="broker-a") is not sql  # the value's type does
        two = pool.shared(brokers=2)
        apache = pool.shared("apache")
        assert (two.brokers, apache.kind, sql.conf) == (2, "apache", {"enablePropertyFilter": True,
                                                                      "brokerName": "broker-a"})
        assert len({sql.home, two.home, apache.home}) == 3
        assert all(c.home.parent == tmp_path for c in (sql, two, apache))
        assert closed == []
        acl1 = pool.shared("apache", version="5.3.2", home_files={"conf/plain_acl.yml": "accounts: []\n"})
        assert pool.shared("apache", home_files={"conf/plain_acl.yml": "accounts: []\n"}, version="5.3.2") is acl1
        assert pool.shared("apache", version="5.3.2", home_files={"conf/plain_acl.yml": "{}"}) is not acl1
        assert acl1.conf == {"version": "5.3.2", "home_files": {"conf/plain_acl.yml": "accounts: []\n"}}
        assert apache.conf == {}  # no version or home files: the start gets neither
    assert closed[:3] == [pool.home / "apache-5", acl1.home, apache.home]  # the last started first
    assert closed[3:5] == [two.home, pool.home / "rmq-1"] and closed[5] == sql.home and len(closed) == 6


def test_waits_name_what_did_not_happen() -> None:
    seen = []
    wait_until("three calls", lambda: seen.append(1) or len(seen) == 3, 5, interval=0.001)
    with pytest.raises(AssertionError, match=r"not true within 0.05s: the impossible"):
        wait_until("the impossible", lambda: False, 0.05)

    def no_route_yet() -> bool:
        seen.append(1)
        if len(seen) < 6:
            raise LookupError("no route")
        return True

    wait_until("a route", no_route_yet, 5, interval=0.001, ignoring=(LookupError,))
    assert len(seen) == 6

    async def scenario() -> None:
        await eventually("never", lambda: False, 0.05)

    with pytest.raises(AssertionError, match=r"not true within 0.05s: never"):
        run(scenario())
    with pytest.raises(TimeoutError):
        run(asyncio.sleep(1), 0.05)


def test_a_loop_thread_runs_coroutines_beside_the_test() -> None:
    loop = LoopThread(timeout=0.5)
    try:
        assert loop.run(asyncio.sleep(0, "done")) == "done"
        with pytest.raises(TimeoutError):
            loop.run(asyncio.sleep(5))
    finally:
        loop.close()
