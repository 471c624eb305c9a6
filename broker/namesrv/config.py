"""NamesrvConfig, and reading ``mqnamesrv -c namesrv.conf`` into it.

The file is a Java properties file with RocketMQ's key names; each key sets the NamesrvConfig field of that name, or
``listenPort``/``bindAddress`` (NettyServerConfig's). Other keys (Netty tuning, thread pools) are kept in ``extra``
and otherwise ignored. As in NamesrvStartup, the port is 9876 unless the file says otherwise; port 0 picks a free
one, which the boot line reports.

Examples:
    >>> config = load_namesrv_config(None, {"listenPort": "0", "orderMessageEnable": "true"})
    >>> config.listen_port, config.order_message_enable, config.scan_not_active_broker_interval
    (0, True, 5000)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.common.errors import ConfigError
from broker.common.logs import LogLevel, LogSettings, default_console_level, default_log_dir
from broker.common.properties import absolute_paths, format_value, parse_fields, read_config_file, to_camel
from broker.metrics.config import METRICS_KEYS, MetricsConfig, parse_metrics_config

DEFAULT_LISTEN_PORT = 9876
# The keys that name a file or directory: a relative one is taken from the config file's directory.
PATH_KEYS = ("kvConfigPath", "configStorePath", "logDir")


def _home_path(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """Java's NamesrvConfig (the keys rmq uses, in Java's order) plus NettyServerConfig's listenPort/bindAddress.

    Not modelled: thread-pool sizes and queue capacities (requests run as asyncio tasks), clusterTest and
    productEnvName (ClusterTestRequestProcessor), enableControllerInNamesrv (the embedded DLedger controller)."""

    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = field(default_factory=lambda: _home_path("namesrv", "kvConfig.json"))
    config_store_path: str = field(default_factory=lambda: _home_path("namesrv", "namesrv.properties"))
    order_message_enable: bool = False  # routes carry orderTopicConf from the ORDER_TOPIC_CONFIG namespace
    return_order_topic_config_to_broker: bool = True  # REGISTER_BROKER answers with that namespace's KVTable
    scan_not_active_broker_interval: int = 5000  # ms between liveness scans
    support_acting_master: bool = False
    enable_all_topic_list: bool = True
    enable_topic_list: bool = True
    notify_min_broker_id_changed: bool = False  # accepted; rmq does not send NOTIFY_MIN_BROKER_ID_CHANGE
    need_wait_for_service: bool = False  # refuse route queries for waitSecondsForService after start
    wait_seconds_for_service: int = 45
    delete_topic_with_broker_registration: bool = False  # a registration drops the broker's topics it lacks
    config_black_list: str = "configBlackList;configStorePath;kvConfigPath"  # not changeable remotely
    listen_port: int = DEFAULT_LISTEN_PORT
    bind_address: str = "0.0.0.0"
    # rmq only: where the log files go and how they roll (broker/common/logs.py); Apache's NameServer takes the
    # directory from -Duser.home and the sizes from its logback file.
    log_dir: str = field(default_factory=default_log_dir)
    log_max_file_size: int = 0  # bytes; 0: Apache's 100 MiB
    log_max_index: int = 0  # rolled files kept in otherdays/; 0: Apache's 5
    log_console_level: LogLevel = field(default_factory=default_console_level)  # stderr gets this level and above
    # the broker's metrics keys (broker/metrics/config.py): Apache's NameServer has none, rmq's takes the broker's
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    extra: Mapping[str, str] = field(default_factory=dict)

    def to_properties(self) -> dict[str, str]:
        """Every key with its effective value (``extra`` included), sorted by key as GET_NAMESRV_CONFIG lists them."""
        props = {to_camel(f.name): format_value(getattr(self, f.name)) for f in _fields()}
        return dict(sorted({**self.extra, **props, **self.metrics.to_properties()}.items()))

    def log_settings(self) -> LogSettings:
        return LogSettings(self.log_dir, self.log_max_file_size, self.log_max_index, self.log_console_level)

    def black_listed_keys(self) -> frozenset[str]:
        """DefaultRequestProcessor's configBlackList: keys UPDATE_NAMESRV_CONFIG refuses."""
        configured = {key for key in self.config_black_list.split(";") if key}
        return frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"} | configured)

    def updated(self, props: Mapping[str, str]) -> NamesrvConfig:
        """A copy with ``props`` applied; keys that are not fields go to ``extra``. ConfigError names a bad value."""
        known = {to_camel(f.name) for f in _fields()}
        extra = {**self.extra, **{k: v for k, v in props.items() if k not in known and k not in METRICS_KEYS}}
        values = parse_fields(NamesrvConfig, {k: v for k, v in props.items() if k in known})
        metrics = parse_metrics_config({**self.metrics.to_properties(), **props})
        config = dataclasses.replace(self, **values, metrics=metrics, extra=extra)
        if not 0 <= config.listen_port <= 65535:
            raise ConfigError(f"bad value for listenPort: {config.listen_port}")
        if config.scan_not_active_broker_interval <= 0:
            raise ConfigError(f"bad value for scanNotActiveBrokerInterval: {config.scan_not_active_broker_interval}")
        config.log_settings()  # ConfigError for a bad log* value
        return config


def _fields() -> list[dataclasses.Field]:
    """The fields that are keys of their own (not ``metrics``, whose keys are its fields', nor ``extra``)."""
    return [f for f in dataclasses.fields(NamesrvConfig) if f.name not in ("extra", "metrics")]


def load_namesrv_config(
    path: str | os.PathLike[str] | None = None, overrides: Mapping[str, str] | None = None
) -> NamesrvConfig:
    """``mqnamesrv -c path``: the file's keys, then ``overrides``; with a file, configStorePath is that file.

    Relative paths (``PATH_KEYS``) are taken from the file's directory (``read_config_file`` says why), those of
    ``overrides`` from the working directory."""
    props = read_config_file(path, PATH_KEYS) if path is not None else {}
    if path is not None:
        props["configStorePath"] = os.path.abspath(path)
    props.update(absolute_paths(overrides or {}, PATH_KEYS, os.getcwd()))
    return NamesrvConfig().updated(props)


def format_config(config: NamesrvConfig) -> str:
    """``mqnamesrv -p``: every effective setting as ``key=value`` lines."""
    return "".join(f"{key}={value}\n" for key, value in config.to_properties().items())
