"""What the servers' background loops share: stopping an asyncio task."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task[object] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended, its CancelledError swallowed: a service's ``stop``."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
