"""broker/common/logs.py: which file each logger writes (Apache's names), and where rolled copies go."""

from __future__ import annotations

import pytest

from broker.common.errors import ConfigError
from broker.common.logs import BROKER_LAYOUT, NAMESRV_LAYOUT, LogSettings, rolled_path


@pytest.mark.parametrize("logger, name", [
    ("broker.server.broker_controller", "broker.log"),
    ("broker.common.config_manager", "broker.log"),
    ("broker.store.recovery", "store.log"),
    ("broker.replication.ha_service", "store.log"),
    ("broker.remoting.server", "remoting.log"),
    ("broker.server.transaction.check", "transaction.log"),
    ("broker.server.filter", "filter.log"),
    ("broker.storeroom", "broker.log"),  # a prefix matches whole name parts only
    ("asyncio", "broker_default.log"),
])
def test_broker_loggers_write_apaches_files(logger, name):
    assert BROKER_LAYOUT.file_for(logger).name == name


def test_namesrv_layout_and_rolled_names():
    assert NAMESRV_LAYOUT.file_for("broker.remoting.server").name == "namesrv.log"
    assert NAMESRV_LAYOUT.file_for("uvloop").name == "namesrv_default.log"
    assert [f.max_file_size for f in BROKER_LAYOUT.files() if f.name in ("broker.log", "store.log")] == [128 << 20] * 2
    assert rolled_path("/l", "broker.log", 3) == "/l/otherdays/broker.3.log.gz"
    with pytest.raises(ConfigError, match="logMaxFileSize"):
        LogSettings("/l", max_file_size=-1)
