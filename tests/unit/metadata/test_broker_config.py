"""server/config.py and common/properties.py: Java Properties syntax, routing keys to BrokerConfig and
MessageStoreConfig, format_config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker.common.errors import ConfigError
from broker.common.properties import parse_properties
from broker.server.config import BrokerConfig, BrokerRole, format_config, load_broker_config, parse_delay_levels
from broker.store.config import FlushDiskType, MessageStoreConfig

REPO_CONF = Path(__file__).parents[3] / "conf" / "broker.conf"


# -- Properties syntax ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a=1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a: 1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a\t=\t1", {"a": "1"}),
        ("   a=1", {"a": "1"}),
        ("a=1   ", {"a": "1   "}),  # trailing whitespace belongs to the value
        ("a", {"a": ""}),
        ("a=", {"a": ""}),
        ("a==1", {"a": "=1"}),  # only the first separator separates
        ("a = = 1", {"a": "= 1"}),
        ("a : =1", {"a": "=1"}),
        ("a=1\na=2", {"a": "2"}),  # the last one wins
        ("# comment\n! also\n\n   # indented\na=1", {"a": "1"}),
        ("a=1 # not a comment", {"a": "1 # not a comment"}),
        ("a=one \\\n    two", {"a": "one two"}),  # continuation drops the next line's indentation
        ("a=x\\\\\nb=y", {"a": "x\\", "b": "y"}),  # an even number of backslashes does not continue
        ("a=x\\\n# not a comment", {"a": "x# not a comment"}),
        ("# comment \\\na=1", {"a": "1"}),  # a comment line never continues
        ("a=x\\\n\nb=y", {"a": "x", "b": "y"}),
        ("a=x\\", {"a": "x"}),  # the file ends after a continuation
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
        ("k\\=ey=v", {"k=ey": "v"}),
        ("k\\:ey\\ s=v", {"k:ey s": "v"}),
        ("a=\\t\\n\\r\\f\\q\\\\", {"a": "\t\n\r\fq\\"}),
        ("a=\\u0041\\u00e9", {"a": "Aé"}),
        ("a=\\ud83d\\ude00", {"a": "😀"}),
        ("a=\\ lead", {"a": " lead"}),
    ],
)
def test_properties_syntax(text, expected):
    assert parse_properties(text) == expected


def test_malformed_unicode_escape_names_the_line():
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("a=1\nb=\\u12G4")


# -- loading ----------------------------------------------------------------------------------------------------------


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_javas(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    config = BrokerConfig()
    assert config.broker_cluster_name == "DefaultCluster"
    assert (config.broker_id, config.listen_port, config.broker_permission) == (0, 10911, 6)
    assert (config.default_topic_queue_nums, config.auto_create_topic_enable) == (8, True)
    assert (config.flush_consumer_offset_interval, config.register_name_server_period) == (5000, 30000)
    assert (config.transaction_time_out, config.transaction_check_max, config.transaction_check_interval) == (
        6000,
        15,
        30000,
    )
    assert config.message_delay_level == "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    assert config.broker_role is BrokerRole.ASYNC_MASTER
    assert config.namesrv_addr == "" and config.broker_name and config.broker_ip1


def test_namesrv_addr_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    assert BrokerConfig().namesrv_addr == "10.0.0.1:9876"


def test_one_file_feeds_both_configs(tmp_path):
    path = write(
        tmp_path,
        "brokerName = broker-b\n"
        "brokerIP1 : 10.1.2.3\n"
        "listenPort=20911\n"
        "autoCreateTopicEnable=false\n"
        "brokerRole=SYNC_MASTER\n"
        "storePathRootDir=/data/rmq\n"
        "flushDiskType=SYNC_FLUSH\n"
        "checkCRCOnRecover=false\n"
        "serverWorkerThreads=8\n"
        "brokerIp1=typo\n",
    )
    broker, store = load_broker_config(path)
    assert (broker.broker_name, broker.broker_ip1, broker.listen_port) == ("broker-b", "10.1.2.3", 20911)
    assert broker.auto_create_topic_enable is False and broker.broker_role is BrokerRole.SYNC_MASTER
    assert (store.store_path_root_dir, store.flush_disk_type, store.check_crc_on_recover) == (
        "/data/rmq",
        FlushDiskType.SYNC_FLUSH,
        False,
    )
    assert broker.extra == {"serverWorkerThreads": "8", "brokerIp1": "typo"}  # Java's key is brokerIP1


def test_overrides_come_after_the_file(tmp_path):
    path = write(tmp_path, "namesrvAddr=127.0.0.1:9876\nbrokerName=a\n")
    broker, store = load_broker_config(path, {"namesrvAddr": "10.0.0.9:9876", "mappedFileSizeCommitLog": "4096"})
    assert (broker.namesrv_addr, broker.broker_name, store.mapped_file_size_commit_log) == ("10.0.0.9:9876", "a", 4096)


@pytest.mark.parametrize(
    "line, key",
    [
        ("listenPort=abc", "listenPort"),
        ("listenPort=70000", "listenPort"),
        ("autoCreateTopicEnable=yes", "autoCreateTopicEnable"),
        ("brokerRole=MASTER", "brokerRole"),
        ("brokerPermission=9", "brokerPermission"),
        ("messageDelayLevel=1s 5x", "messageDelayLevel"),
        ("flushDiskType=SOMETIMES", "flushDiskType"),
        ("mappedFileSizeCommitLog=1G", "mappedFileSizeCommitLog"),
    ],
)
def test_bad_values_name_the_key(tmp_path, line, key):
    with pytest.raises(ConfigError, match=key):
        load_broker_config(write(tmp_path, line + "\n"))


def test_values_are_trimmed_for_conversion(tmp_path):
    broker, _ = load_broker_config(write(tmp_path, "listenPort = 10911   \nbrokerName=b  \n"))
    assert (broker.listen_port, broker.broker_name) == (10911, "b")


def test_broker_role_decides_broker_id(tmp_path):
    broker, _ = load_broker_config(write(tmp_path, "brokerId=3\n"))
    assert broker.broker_id == 0  # a master is brokerId 0 (BrokerStartup)
    broker, _ = load_broker_config(write(tmp_path, "brokerRole=SLAVE\nbrokerId=2\n"))
    assert broker.broker_id == 2
    with pytest.raises(ConfigError, match="brokerId"):
        load_broker_config(write(tmp_path, "brokerRole=SLAVE\n"))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.conf"):
        load_broker_config(tmp_path / "nope.conf")


def test_latin1_file(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_bytes("brokerName=caf\xe9\n".encode("iso-8859-1"))
    assert load_broker_config(path)[0].broker_name == "café"


def test_repository_conf_is_a_working_single_node_config():
    broker, store = load_broker_config(REPO_CONF)
    assert broker.extra == {}
    assert broker.namesrv_addr == "127.0.0.1:9876" and broker.broker_role is BrokerRole.ASYNC_MASTER
    assert broker.broker_name == "broker-a" and store.store_path_root_dir


def test_repository_slave_conf_is_the_slave_of_that_broker():
    master, master_store = load_broker_config(REPO_CONF)
    slave, store = load_broker_config(REPO_CONF.with_name("broker-slave.conf"))
    assert slave.extra == {}
    assert (slave.broker_role, slave.broker_id, slave.broker_name) == (BrokerRole.SLAVE, 1, master.broker_name)
    ports = {master.listen_port, master.listen_port - 2, master_store.ha_listen_port}
    assert not ports & {slave.listen_port, slave.listen_port - 2, store.ha_listen_port}
    assert store.store_path_root_dir != master_store.store_path_root_dir


def test_delay_levels():
    assert parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")[-1] == 7_200_000
    assert BrokerConfig().delay_level_table()[:2] == (1000, 5000)
    with pytest.raises(ConfigError):
        parse_delay_levels("")


def test_register_period_is_clamped():
    assert BrokerConfig(register_name_server_period=1).effective_register_name_server_period == 10_000
    assert BrokerConfig(register_name_server_period=90_000).effective_register_name_server_period == 60_000


# -- format_config ----------------------------------------------------------------------------------------------------


def test_format_config_prints_declaration_order(broker_config):
    text = format_config(broker_config, MessageStoreConfig(store_path_root_dir="/s"))
    lines = text.splitlines()
    assert text.endswith("\n")
    assert lines[:3] == ["brokerName=broker-a", "brokerClusterName=DefaultCluster", "brokerId=0"]
    assert "brokerIP1=127.0.0.1" in lines and "autoCreateTopicEnable=true" in lines
    assert "brokerRole=ASYNC_MASTER" in lines and "storePathRootDir=/s" in lines
    assert lines.index("messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h") < lines.index(
        "storePathRootDir=/s"
    )


def test_format_config_reads_back_as_the_same_configs(tmp_path, broker_config):
    broker = dataclasses.replace(broker_config, trace_topic_enable=True, broker_role=BrokerRole.SYNC_MASTER)
    store = MessageStoreConfig(store_path_root_dir="/s", flush_disk_type=FlushDiskType.SYNC_FLUSH)
    again_broker, again_store = load_broker_config(write(tmp_path, format_config(broker, store)))
    assert again_broker == broker
    assert again_store == dataclasses.replace(store, ha_listen_port=broker.listen_port + 1)  # 0 means listenPort + 1


# -- keys rmq does not act on (server/config_keys.py) -----------------------------------------------------------------


@pytest.mark.parametrize(
    "line, key",
    [
        ("migrateAuthFromV1Enabled = TRUE", "migrateAuthFromV1Enabled"),
        ("enableControllerMode=true", "enableControllerMode"),
        ("duplicationEnable=true", "duplicationEnable"),
        ("enableSlaveActingMaster=true", "enableSlaveActingMaster"),
        ("offsetCheckInSlave=true", "offsetCheckInSlave"),
        ("enableLmq=true", "enableLmq"),
        ("messageStorePlugIn=com.example.Plugin", "messageStorePlugIn"),
        ("storeType=defaultRocksDB", "storeType"),
        ("litePullMessageEnable=false", "litePullMessageEnable"),
    ],
)
def test_keys_turning_on_what_rmq_lacks_are_refused(tmp_path, line, key):
    with pytest.raises(ConfigError, match=f"^{key}=.* is refused: .*rmq") as raised:
        load_broker_config(write(tmp_path, line + "\n"))
    assert "remove the key or" in str(raised.value)


def test_refused_keys_set_to_what_rmq_does_are_accepted_quietly(tmp_path, caplog):
    path = write(tmp_path, "enableLmq=false\nenableDLegerCommitLog=false\nstoreType=default\nmessageStorePlugIn=\n"
                           "litePullMessageEnable=true\nenableControllerMode = false\n")
    with caplog.at_level("WARNING", logger="broker.server.config"):
        broker, _ = load_broker_config(path)
    assert caplog.records == []
    assert "enableLmq" in broker.extra  # kept as read, never acted on


def test_ignored_keys_are_named_in_one_warning_with_their_family(tmp_path, caplog):
    path = write(tmp_path, "serverWorkerThreads=8\nsendMessageThreadPoolNums=4\nclientChannelMaxIdleTimeSeconds=60\n"
                           "metricsGrpcExporterTarget=collector:4317\nmetricsExporterType=PROM\npopPollingSize=10\ntimerWheelEnable=true\n"
                           "transientStorePoolEnable=true\nbrokerIp1=typo\ncompressedRegister=true\n"
                           "brokerName=b\nreviveQueueNum=4\n")
    with caplog.at_level("WARNING", logger="broker.server.config"):
        broker, _ = load_broker_config(path)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    for named in ("serverWorkerThreads (thread pool)", "sendMessageThreadPoolNums (thread pool)",
                  "clientChannelMaxIdleTimeSeconds (Netty option)",
                  "metricsGrpcExporterTarget (metrics and statistics)",
                  "popPollingSize (pop consumption)", "timerWheelEnable (timer wheel)",
                  "transientStorePoolEnable (store tuning)", "brokerIp1 (not a key rmq knows)",
                  "compressedRegister (declared, not acted on)"):
        assert named in line
    assert "brokerName" not in line and "reviveQueueNum" not in line  # acted on
    assert "metricsExporterType" not in line
    assert broker.compressed_register is True  # still read: -p prints what the file said


def test_check_keys_is_one_table():
    from broker.server.config_keys import REFUSED, UNKNOWN, check_keys, family_of

    assert len({rule.key for rule in REFUSED}) == len(REFUSED)
    assert family_of("serverSelectorThreads") == "thread pool"
    assert family_of("noSuchKey") == UNKNOWN
    assert check_keys({"brokerName": "a"}, {"brokerName": "b"}) == []
    assert check_keys({"forceRegister": "false"}, {"forceRegister": "true"}) == [
        ("forceRegister", "declared, not acted on")]
    assert check_keys({"forceRegister": "true"}, {"forceRegister": "true"}) == []  # what rmq does anyway


def test_promoted_keys_are_fields(tmp_path):
    broker, store = load_broker_config(write(tmp_path, "regionId=eu\ntraceOn=false\nflushDelayOffsetInterval=500\n"
                                                       "slaveSynchronizeInterval=1000\n"))
    assert (broker.region_id, broker.trace_on, broker.slave_synchronize_interval) == ("eu", False, 1000)
    assert store.flush_delay_offset_interval == 500 and broker.extra == {}
    lines = set(format_config(broker, store).splitlines())
    assert {"regionId=eu", "traceOn=false", "slaveSynchronizeInterval=1000", "flushDelayOffsetInterval=500"} <= lines


# -- paths and log settings -------------------------------------------------------------------------------------------


def test_relative_paths_are_the_config_files_and_overrides_the_working_directorys(tmp_path, monkeypatch):
    conf_dir, cwd = tmp_path / "etc", tmp_path / "cwd"
    conf_dir.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    path = conf_dir / "broker.conf"
    path.write_text("storePathRootDir=data/store\nstorePathCommitLog=../cl\nlogDir=~/rmq-logs\n")
    broker, store = load_broker_config(Path("..") / "etc" / "broker.conf")
    assert store.store_path_root_dir == str(conf_dir / "data" / "store")
    assert store.commit_log_dir == str(tmp_path / "cl")
    assert broker.log_dir == str(Path.home() / "rmq-logs")
    _, store = load_broker_config(path, {"storePathRootDir": "here"})  # a command line's path: the working dir's
    assert store.store_path_root_dir == str(cwd / "here")
    assert load_broker_config(None, {"storePathCommitLog": ""})[1].store_path_commit_log == ""  # the default


def test_log_settings_are_checked_when_the_config_is_read(tmp_path):
    broker, _ = load_broker_config(write(tmp_path, "brokerName=b\nbrokerId=0\nisolateLogEnable=true\nlogDir=/l\n"
                                                   "logConsoleLevel=WARNING\nlogMaxIndex=3\n"))
    settings = broker.log_settings()
    assert (settings.log_dir, settings.max_index, settings.console_level.value) == ("/l/b_0", 3, "WARN")
    for line, key in (("logMaxFileSize=-1", "logMaxFileSize"), ("logConsoleLevel=LOUD", "logConsoleLevel"),
                      ("logMaxIndex=x", "logMaxIndex")):
        with pytest.raises(ConfigError, match=key):
            load_broker_config(write(tmp_path, line + "\n"))
