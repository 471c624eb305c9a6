"""A platform without ``os.memfd_create`` (macOS): the default dispatchMode=PROCESS cannot run there, so the broker
dispatches in a thread instead, says so in one WARNING line at start, and serves as usual. Linux plays that platform
here: the broker's interpreter loads a sitecustomize that deletes ``os.memfd_create`` before the broker starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message
from broker.client.message import PullStatus
from broker.tools.local_cluster import start_broker, start_namesrv
from tests.helpers import wait_until

pytestmark = pytest.mark.smoke

FALLBACK_LINE = ("dispatchMode=PROCESS is not supported here (os.memfd_create is not available on this platform): "
                 "dispatching in a thread (dispatchMode=THREAD)")


def test_without_memfd_create_the_broker_dispatches_in_a_thread(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "no-memfd"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\n\ndel os.memfd_create\n")
    with start_namesrv(tmp_path / "namesrv") as namesrv:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
        with start_broker(tmp_path / "broker", namesrv.addr) as broker:
            monkeypatch.undo()
            with BlockingClient(namesrv.addr) as client:
                sent = client.send(Message("NoMemfd", b"dispatched by a thread", keys=["k1"]))

                def pulled() -> list:
                    result = client.pull(sent.message_queue, sent.queue_offset, decode=True)
                    return result.messages if result.status is PullStatus.FOUND else []

                wait_until("the message is pulled back", pulled)
                [msg] = pulled()
                assert (msg.body, msg.keys, msg.queue_offset) == (b"dispatched by a thread", "k1",
                                                                  sent.queue_offset)
            console = broker.console()
    assert console.count(FALLBACK_LINE) == 1, console[-3000:]
    assert "WARNING" in next(line for line in console.splitlines() if FALLBACK_LINE in line)
    assert "dispatch process" not in console  # no child was started (or tried)
