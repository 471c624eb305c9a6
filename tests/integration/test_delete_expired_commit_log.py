"""DELETE_EXPIRED_COMMITLOG and ``mqadmin deleteExpiredCommitLog`` against our NameServer and broker as processes.

The broker keeps 64 KiB CommitLog files for ``fileReservedTime=1`` hour, checks retention every 200 ms and may delete
only at a ``deleteWhen`` hour twelve hours away. The test ages some full files past the hour (their mtime): nothing
deletes them until the request, after which the broker's next rounds do, and only them. Reads then start at the new
minimum: GET_MIN_OFFSET moves to the first message of the first file kept, and a pull from 0 is told to move there.

The ``java`` test runs Apache's own ``mqadmin deleteExpiredCommitLog`` (and its help) on the same servers and expects
what ours prints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, MessageQueue, PullStatus
from broker.client.blocking import BlockingRemotingClient, create_topic
from tests.helpers import free_port, mqadmin
from tests.integration.cluster import DEFAULT_CLUSTER, Cluster, start_cluster

FILE_SIZE = 64 * 1024
TOPIC = "RetentionByRequest"
BODY = b"x" * 1000  # about 60 records per file
MESSAGES = 360  # about 6 files
ROUNDS_S = 0.2  # cleanResourceInterval
DELETE_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    far_hour = f"{(datetime.now().hour + 12) % 24:02d}"
    with start_cluster(tmp_path_factory.mktemp("delete-expired"), mappedFileSizeCommitLog=FILE_SIZE,
                       fileReservedTime=1, deleteWhen=far_hour, cleanResourceInterval=int(ROUNDS_S * 1000),
                       diskMaxUsedSpaceRatio=95) as started:
        yield started


def commit_log_files(cluster: Cluster) -> list[Path]:
    commit_log = cluster.brokers[0].home / "store" / "commitlog"
    return sorted(commit_log.iterdir())


def age(files: list[Path], hours: float) -> None:
    old = time.time() - hours * 3600
    for path in files:
        os.utime(path, (old, old))


def wait_gone(files: list[Path]) -> None:
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    while any(path.exists() for path in files):
        assert time.monotonic() < deadline, f"{[p.name for p in files if p.exists()]} not deleted"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def stored(cluster: Cluster) -> tuple[MessageQueue, dict[int, int]]:
    """TOPIC's one queue filled over several files; returns it and each message's CommitLog offset by queue offset."""
    mq = MessageQueue(TOPIC, "broker-a", 0)
    with BlockingRemotingClient(cluster.brokers[0].addr) as broker:
        create_topic(broker, TOPIC)
    with BlockingClient(cluster.namesrv_addr) as client:
        for first in range(0, MESSAGES, 20):
            client.send_batch([Message(TOPIC, BODY, keys=f"k{i}") for i in range(first, first + 20)], mq)
        deadline = time.monotonic() + 30
        while client.get_max_offset(mq) < MESSAGES:
            assert time.monotonic() < deadline, "the messages were not dispatched"
            time.sleep(0.05)
        physical: dict[int, int] = {}
        while len(physical) < MESSAGES:
            result = client.pull(mq, len(physical), 32, decode=True)
            assert result.status is PullStatus.FOUND
            physical.update((m.queue_offset, m.commit_log_offset) for m in result.messages)
    return mq, physical


def test_expired_files_are_deleted_on_request_only(cluster: Cluster, stored: tuple[MessageQueue, dict[int, int]]):
    mq, physical = stored
    files = commit_log_files(cluster)
    assert len(files) >= 5
    expired, kept = files[:3], files[3:]
    age(expired, 2)
    time.sleep(8 * ROUNDS_S)
    assert all(path.exists() for path in files), "retention deleted files outside deleteWhen without a request"

    assert mqadmin("deleteExpiredCommitLog", "-n", cluster.namesrv_addr, "-b", cluster.brokers[0].addr) == (
        0, "success", "")
    wait_gone(expired)
    time.sleep(4 * ROUNDS_S)
    assert all(path.exists() for path in kept), "a file younger than fileReservedTime was deleted"

    new_min = int(kept[0].name)
    first_kept = min(q for q, offset in physical.items() if offset >= new_min)
    assert first_kept > 0
    with BlockingClient(cluster.namesrv_addr) as client:
        assert client.get_min_offset(mq) == first_kept
        assert client.get_max_offset(mq) == MESSAGES
        moved = client.pull(mq, 0, 1)
        assert (moved.status, moved.next_begin_offset) == (PullStatus.OFFSET_ILLEGAL, first_kept)
        found = client.pull(mq, first_kept, 1, decode=True)
        assert found.status is PullStatus.FOUND and found.messages[0].commit_log_offset == physical[first_kept]


def test_by_cluster_all_clusters_and_failures(cluster: Cluster, stored: tuple[MessageQueue, dict[int, int]]):
    ns = cluster.namesrv_addr
    files = commit_log_files(cluster)
    age(files[:1], 2)
    assert mqadmin("deleteExpiredCommitLog", "-n", ns, "-c", DEFAULT_CLUSTER) == (0, "success", "")
    wait_gone(files[:1])
    assert mqadmin("deleteExpiredCommitLog", "-n", ns) == (0, "success", "")  # every cluster
    assert mqadmin("deleteExpiredCommitLog", "-n", ns, "-c", "NoSuchCluster") == (0, "false", "")
    dead = f"127.0.0.1:{free_port()}"
    code, out, err = mqadmin("deleteExpiredCommitLog", "-n", ns, "-b", dead)
    assert (code, out) == (1, "") and err.startswith(f"deleteExpiredCommitLog command failed: cannot connect to {dead}")
    assert len(err.splitlines()) == 1


@pytest.mark.java
@pytest.mark.slow
def test_apache_mqadmin_prints_the_same(cluster: Cluster, tmp_path: Path) -> None:
    from tests.apache import apache_mqadmin

    tool = apache_mqadmin(tmp_path)
    ns = cluster.namesrv_addr
    runs = (["deleteExpiredCommitLog", "-n", ns, "-b", cluster.brokers[0].addr],
            ["deleteExpiredCommitLog", "-n", ns, "-c", DEFAULT_CLUSTER],
            ["deleteExpiredCommitLog", "-n", ns, "-c", "NoSuchCluster"],
            ["help", "deleteExpiredCommitLog"])
    # Each of Apache's commands is a JVM (seconds of start-up), and what one prints does not depend on what ran before
    # it (the command answers success or false, not what it deleted): two at a time.
    with ThreadPoolExecutor(2) as pool:
        javas = [pool.submit(lambda a=args: tool.run(*a, check=False, timeout=120).stdout.decode()) for args in runs]
        for args, java in zip(runs, javas, strict=True):
            code, out, _ = mqadmin(*args)
            assert (code, out) == (0, java.result()), \
                f"mqadmin {' '.join(args)}:\n--- Apache\n{java.result()}\n--- ours\n{out}"
