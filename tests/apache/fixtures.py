"""pytest fixtures of the Apache side: ``from tests.apache import apache_broker, apache_client_driver,
apache_namesrv``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apache.client import ApacheClient, apache_client
from tests.apache.servers import ApacheProcess, start_apache_broker, start_apache_namesrv
from tests.javatools import JavaToolError


@pytest.fixture(scope="session")
def apache_client_driver(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    """The driver, built once per session; a missing JDK or Maven fails (never skips) with the reason."""
    try:
        return apache_client(tmp_path_factory.mktemp("apache-client"))
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Apache client driver: {reason}", pytrace=False)


@pytest.fixture
def apache_namesrv(tmp_path: Path) -> Iterator[ApacheProcess]:
    with start_apache_namesrv(tmp_path) as proc:
        yield proc


@pytest.fixture
def apache_broker(tmp_path: Path, apache_namesrv: ApacheProcess) -> Iterator[ApacheProcess]:
    """A broker on ``apache_namesrv`` with its store in ``tmp_path / "store"``; killed at teardown if still up."""
    with start_apache_broker(tmp_path, apache_namesrv, tmp_path / "store") as proc:
        yield proc
