"""Fixtures shared by the whole suite. ``spark``: the one local Spark session of a test run (Delta Lake and the rmq
source registered), created on first use so that tests without Spark never pay for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from jobs.spark import build_session

    session = build_session("rmq-tests", master="local[2]")
    yield session
    session.stop()
