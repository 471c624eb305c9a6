"""An operator's view of ``mqnamesrv`` and ``mqbroker``: where their files go, and what their logs hold.

One scenario, real processes started as an operator would (``python -m broker.namesrv -c conf/namesrv.conf``,
``python -m broker -c conf/broker.conf``) from another working directory than the config files', with relative paths
in the files and log files small enough to roll after a few dozen lines:

* every relative path (storePathRootDir, kvConfigPath, logDir) is taken from the config file's directory, printed
  absolute at start, and nothing is written to the working directory;
* the log files are Apache's (namesrv.log; broker.log, store.log, remoting.log..., under brokerName_brokerId with
  isolateLogEnable), the dispatch process writes into the broker's store.log, a warning raised while the config is
  read reaches broker.log as well as stderr, and stderr holds no INFO line (the default console level is WARN);
* files roll into otherdays/{name}.{i}.log.gz: no line is lost while the window holds them (broker) and no more than
  logMaxIndex rolled files are kept (NameServer);
* SIGTERM stops both with exit code 0, their last lines written out.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, SendStatus
from broker.client.blocking import BlockingRemotingClient
from broker.client.protocol import create_topic_request
from broker.common.logs import CONSOLE_LEVEL_ENV, LOG_DIR_ENV
from broker.common.topic import TopicConfig
from broker.remoting.codes import ResponseCode
from broker.tools.local_cluster import HOST, REPO, ServerProcess, free_broker_port, free_port
from tests.helpers import wait_until

pytestmark = pytest.mark.slow

TOPICS = [f"OpsTopic{i:03d}" for i in range(60)]
ROLL_AT = 4096  # bytes: a file rolls after about 15 lines
BROKER_NAME = "broker-ops"


def _write(path: Path, props: dict[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path


def _spawn(role: str, module: str, conf: Path, port: int, home: Path, cwd: Path) -> ServerProcess:
    """A server as an operator starts one: its config file by a relative path, from ``cwd``; no log variables set."""
    env = {key: value for key, value in os.environ.items() if key not in (LOG_DIR_ENV, CONSOLE_LEVEL_ENV)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    out = home / "out" / f"{role}.stdout"
    with out.open("wb") as stdout, (home / "out" / f"{role}.stderr").open("wb") as stderr:
        popen = subprocess.Popen([sys.executable, "-m", module, "-c", os.path.relpath(conf, cwd)], cwd=cwd, env=env,
                                 stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)
    proc = ServerProcess(role, popen, port, home, {}, out)
    wait_until(f"{role} boots", lambda: "boot success" in proc.console() or not proc.alive(), timeout=60)
    assert proc.alive(), (home / "out" / f"{role}.stderr").read_text()
    return proc


def _lines(log_dir: Path, name: str) -> list[str]:
    """Every line of file ``name``: its rolled copies, oldest first, then the live file."""
    stem = name.removesuffix(".log")
    rolled = sorted((log_dir / "otherdays").glob(f"{stem}.*.log.gz"), key=lambda p: -int(p.name.split(".")[-3]))
    text = "".join(gzip.decompress(p.read_bytes()).decode() for p in rolled)
    live = log_dir / name
    return (text + (live.read_text() if live.exists() else "")).splitlines()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    conf, cwd = tmp_path / "conf", tmp_path / "elsewhere"
    for directory in (conf, cwd, tmp_path / "out"):
        directory.mkdir()
    namesrv_port, broker_port = free_port(), free_broker_port()
    _write(conf / "namesrv.conf", {"listenPort": namesrv_port, "bindAddress": HOST,
                                   "kvConfigPath": "../data/namesrv/kvConfig.json", "logDir": "../logs/namesrv",
                                   "logMaxFileSize": ROLL_AT, "logMaxIndex": 2})
    _write(conf / "broker.conf", {"brokerName": BROKER_NAME, "namesrvAddr": f"{HOST}:{namesrv_port}",
                                  "listenPort": broker_port, "brokerIP1": HOST, "brokerIP2": HOST,
                                  "storePathRootDir": "../data/store", "mappedFileSizeCommitLog": 1024 * 1024,
                                  "logDir": "../logs", "isolateLogEnable": "true", "logMaxFileSize": ROLL_AT,
                                  "logMaxIndex": 50, "serverWorkerThreads": 8})
    namesrv = _spawn("namesrv", "broker.namesrv", conf / "namesrv.conf", namesrv_port, tmp_path, cwd)
    try:
        broker = _spawn("broker", "broker", conf / "broker.conf", broker_port, tmp_path, cwd)
        try:
            yield namesrv, broker
        finally:
            broker.close()
    finally:
        namesrv.close()


def test_paths_from_the_config_files_directory_and_apaches_log_files_rolled(tmp_path: Path, servers) -> None:
    namesrv, broker = servers
    store, logs = tmp_path / "data" / "store", tmp_path / "logs"
    broker_logs, namesrv_logs = logs / f"{BROKER_NAME}_0", logs / "namesrv"
    assert f"The Name Server's KV config: {tmp_path}/data/namesrv/kvConfig.json; logs: {namesrv_logs}\n" in (
        namesrv.console())
    assert f"The broker's store: {store} (CommitLog {store}/commitlog); logs: {broker_logs}\n" in broker.console()

    with BlockingRemotingClient(broker.addr) as admin:
        for topic in TOPICS:
            assert admin.invoke(create_topic_request(TopicConfig(topic, 2, 2)), 5000).code == ResponseCode.SUCCESS
    with BlockingClient(namesrv.addr) as client:
        assert client.send(Message(TOPICS[0], b"stored where the file says")).send_status is SendStatus.SEND_OK
    assert broker.stop() == 0 and namesrv.stop() == 0

    assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing in the working directory
    assert any((store / "commitlog").iterdir()) and TOPICS[-1] in (store / "config" / "topics.json").read_text()

    # The broker's files, Apache's names; every topic's creation once, across the rolled copies and the live file.
    assert {"broker.log", "store.log", "remoting.log", "transaction.log", "broker_default.log"} <= {
        p.name for p in broker_logs.iterdir()}
    created = [line for line in _lines(broker_logs, "broker.log") if "create topic config" in line]
    assert [sum(f"topic_name='{topic}'," in line for line in created) for topic in TOPICS] == [1] * len(TOPICS)
    assert len(list((broker_logs / "otherdays").glob("broker.*.log.gz"))) >= 3
    store_lines = _lines(broker_logs, "store.log")
    assert any(" DispatchProcess broker.store.dispatch_child - " in line for line in store_lines)
    assert any("broker.store.recovery" in line for line in store_lines)
    assert any("remoting server on" in line and "stopped" in line for line in _lines(broker_logs, "remoting.log"))
    broker_log = "\n".join(_lines(broker_logs, "broker.log"))
    assert "serverWorkerThreads (thread pool)" in broker_log  # logged while the config was read, before the files
    assert f"storePathRootDir {store}," in broker_log

    # stderr: WARN and above only.
    broker_err = (tmp_path / "out" / "broker.stderr").read_text()
    assert "WARNING" in broker_err and "serverWorkerThreads (thread pool)" in broker_err
    assert " INFO " not in broker_err and " INFO " not in (tmp_path / "out" / "namesrv.stderr").read_text()

    # The NameServer keeps logMaxIndex rolled files, each gzipped, the newest first; its last line is in its file.
    rolled = sorted(p.name for p in (namesrv_logs / "otherdays").iterdir())
    assert rolled == ["namesrv.1.log.gz", "namesrv.2.log.gz"]
    assert (namesrv_logs / "namesrv.log").stat().st_size < ROLL_AT
    newest = gzip.decompress((namesrv_logs / "otherdays" / "namesrv.1.log.gz").read_bytes()).decode()
    older = gzip.decompress((namesrv_logs / "otherdays" / "namesrv.2.log.gz").read_bytes()).decode()
    assert "new topic registered" in newest and older.splitlines()[-1][:23] <= newest.splitlines()[0][:23]
    assert "namesrv shutting down" in (namesrv_logs / "namesrv.log").read_text()  # written out before the exit
