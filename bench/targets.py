"""The clusters a benchmark compares, one at a time so they do not compete for the cores: ours (``python -m
broker``) and Apache RocketMQ 5.5.0's (tests/apache/). Imported by the bench scripts (run from any directory:
each puts the repository on sys.path first)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tests.apache import start_apache_broker, start_apache_namesrv
from tests.integration import cluster

TARGETS = ("ours", "apache")


@contextlib.contextmanager
def running_target(target: str, home: Path, conf: Mapping[str, object] | None = None, *,
                   apache_conf: Mapping[str, object] | None = None,
                   apache_jvm_args: Sequence[str] | None = None) -> Iterator[str]:
    """A NameServer and one broker of ``target`` ("ours" or "apache") with broker settings ``conf`` (plus
    ``apache_conf`` on Apache's); yields the NameServer address."""
    home.mkdir(parents=True, exist_ok=True)
    if target == "apache":
        extra = {"jvm_args": list(apache_jvm_args)} if apache_jvm_args else {}
        with start_apache_namesrv(home / "namesrv") as namesrv, start_apache_broker(
                home / "broker", namesrv, home / "store", **extra, **{**(conf or {}), **(apache_conf or {})}):
            yield namesrv.addr
        return
    with cluster.start_namesrv(home / "namesrv") as namesrv, cluster.start_broker(
            home / "broker", namesrv.addr, **(conf or {})):
        yield namesrv.addr
