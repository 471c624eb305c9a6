"""Fixtures shared by the whole suite. ``spark``: the one local Spark session of a test run (Delta Lake and the rmq
source registered), created on first use so that tests without Spark never pay for it. ``resolver_dir``: where the
sink's resolvers of one test keep their files; they are stopped when the test ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from jobs.spark import build_session

    session = build_session("rmq-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture
def resolver_dir(tmp_path: Path) -> Iterator[Path]:
    """The sink's resolverDir for one test; the resolvers it started (pid files) are stopped afterwards."""
    import os
    import signal

    directory = tmp_path / "resolvers"
    directory.mkdir()
    yield directory
    for pid_file in directory.glob("*.pid"):
        text = pid_file.read_text().split(" ")[0]
        if text.isdigit():
            try:
                os.kill(int(text), signal.SIGTERM)
            except ProcessLookupError:
                pass
