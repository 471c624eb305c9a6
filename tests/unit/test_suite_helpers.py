"""The suite's own helpers (tests/helpers.py): waits fail naming what they waited for."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import eventually, run, wait_until


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
