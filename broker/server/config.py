"""BrokerConfig, and reading a RocketMQ broker .properties file (``mqbroker -c``) into it and MessageStoreConfig.

The file is parsed once (Java ``Properties.load`` syntax), then each key goes to every config that knows it, as
BrokerStartup's ``MixAll.properties2Object`` calls do; keys neither knows are kept in ``BrokerConfig.extra``. No key
is ignored silently: ``config_keys.py`` refuses those that would turn on what rmq does not have (``enableLmq=true``)
and the others (Netty, thread pool, OTLP metrics keys...) are named in one WARNING line. Unlike Java, a value that
does not parse is an error naming the key, not a silently kept default.

Keys are RocketMQ's camelCase names, fields are snake_case; the conversion helpers are broker/store/config.py's.
Examples:
    >>> broker, store = load_broker_config(None, {"brokerName": "broker-b", "storePathRootDir": "/tmp/s"})
    >>> broker.broker_name, broker.listen_port, store.store_path_root_dir
    ('broker-b', 10911, '/tmp/s')
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from broker.auth.config import AUTH_KEYS, AuthConfig, parse_auth_config
from broker.common.errors import ConfigError
from broker.common.logs import LogLevel, LogSettings, default_console_level, default_log_dir
from broker.common.message import local_address
from broker.common.properties import absolute_paths, parse_fields, read_config_file, to_camel
from broker.common.topic import PERM_READ, PERM_WRITE
from broker.common.validation import RMQ_SYS_TRACE_TOPIC
from broker.dledger.config import DLedgerConfig, slave_broker_id
from broker.metrics.config import METRICS_KEYS, MetricsConfig, parse_metrics_config
from broker.server.config_keys import check_keys, warning_line
from broker.store.config import BrokerRole, MessageStoreConfig

log = logging.getLogger(__name__)

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_REGION_ID = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID
# The keys that name a file or directory: a relative one is taken from the config file's directory.
PATH_KEYS = ("storePathRootDir", "storePathCommitLog", "logDir", "rocketmqHome")


def _default_broker_name() -> str:
    """BrokerIdentity.defaultBrokerName: the host name, or DEFAULT_BROKER when there is none."""
    return socket.gethostname() or "DEFAULT_BROKER"


def _default_rocketmq_home() -> str:
    # Java reads -Drocketmq.home.dir, then the ROCKETMQ_HOME environment variable.
    return os.environ.get("ROCKETMQ_HOME", "")


def _default_namesrv_addr() -> str:
    # Java reads -Drocketmq.namesrv.addr, then the NAMESRV_ADDR environment variable.
    return os.environ.get("NAMESRV_ADDR", "")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The broker's own settings (Java's BrokerIdentity + BrokerConfig), in Java's declaration order.

    Left out on purpose (read the Java class for them): thread-pool sizes and queue capacities, pop/revive tuning
    (except reviveQueueNum, which sizes a system topic), metrics other than Prometheus's (``metrics``: broker/metrics/
    config.py), controller/DLedger/container mode, cold-data
    control, lite topics, tiered storage, split registration and the name-server address lookup services (a file
    that sets them is refused or warned about: ``config_keys.py``).

    Two deliberate differences: ``listenPort`` defaults to 10911, the port BrokerStartup gives NettyServerConfig
    (Java's BrokerConfig.listenPort, 6888, is only used in broker-container mode), and ``brokerRole`` and
    ``messageDelayLevel`` live here although Java keeps them in MessageStoreConfig, which has no such fields here.
    """

    # BrokerIdentity
    broker_name: str = field(default_factory=_default_broker_name)
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    # BrokerConfig
    namesrv_addr: str = field(default_factory=_default_namesrv_addr)  # "host:port;host:port"
    listen_port: int = 10911
    broker_ip1: str = field(default_factory=local_address)  # the address registered with the NameServer
    broker_ip2: str = field(default_factory=local_address)  # the HA address
    broker_permission: int = PERM_READ | PERM_WRITE
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    msg_trace_topic_name: str = RMQ_SYS_TRACE_TOPIC
    trace_topic_enable: bool = False
    flush_consumer_offset_interval: int = 5000  # ms between consumerOffset.json writes
    reject_transaction_message: bool = False
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    notify_consumer_ids_changed_enable: bool = True
    region_id: str = DEFAULT_REGION_ID  # MSG_REGION of every stored message and send answer
    slave_read_enable: bool = False  # pulls may go to (and be answered by) a slave
    trace_on: bool = True  # TRACE_ON of every stored message and send answer
    register_broker_timeout_mills: int = 24000
    filter_support_retry: bool = False
    enable_property_filter: bool = False
    compressed_register: bool = False
    force_register: bool = True
    register_name_server_period: int = 30_000  # ms; BrokerController clamps it to [10 s, 60 s]
    revive_queue_num: int = 8
    transaction_time_out: int = 6000  # ms before a half message is first checked
    transaction_check_max: int = 15
    transaction_check_interval: int = 30_000  # ms
    consumer_offset_update_version_step: int = 500  # offset commits per consumerOffset dataVersion bump
    use_server_side_reset_offset: bool = True
    channel_expired_timeout: int = 120_000  # ms without heartbeat before a client channel is dropped
    enable_create_sys_group: bool = True
    # the -c file (BrokerStartup sets it): UPDATE_BROKER_CONFIG writes accepted changes there; "" when started without
    broker_config_path: str = field(default="", compare=False)
    # rmq only (Apache's broker has no such key): ms between a slave's full metadata syncs from its master; the
    # checks run every min(3 s, interval / 4), the first after min(10 s, interval), as Apache's fixed schedule does
    # with the default.
    slave_synchronize_interval: int = 60_000
    # rmq only: serve transactional batches (a SEND_BATCH_MESSAGE of half messages, END_TRANSACTION_BATCH); clients
    # look for it in GET_BROKER_CONFIG's answer (broker/remoting/transaction_batch.py). Off: refused as Apache does.
    rmq_transaction_batch_enable: bool = True
    # Apache's: logs under logDir/{brokerName}_{brokerId}, so that brokers of one host keep apart.
    isolate_log_enable: bool = False
    # rmq only: where the log files go and how they roll (broker/common/logs.py). Apache's broker takes the
    # directory from -Duser.home and the sizes from its logback file.
    log_dir: str = field(default_factory=default_log_dir)
    log_max_file_size: int = 0  # bytes; 0: Apache's size of each file (128 MiB for broker.log, store.log)
    log_max_index: int = 0  # rolled files kept in otherdays/; 0: Apache's count of each file
    log_console_level: LogLevel = field(default_factory=default_console_level)  # stderr gets this level and above
    # MessageStoreConfig keys in Java
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    # ACL 1.0 (broker/auth/plain.py): every request checked against <rocketmqHome>/conf/plain_acl.yml (and
    # conf/acl/*.yml), refusals answered SYSTEM_ERROR; the files are reloaded when they change
    acl_enable: bool = False
    rocketmq_home: str = field(default_factory=_default_rocketmq_home)
    # ACL 2.0 (authenticationEnabled, authorizationEnabled, initAuthenticationUser...): Apache's AuthConfig, read from
    # the same file (broker/auth/config.py)
    auth: AuthConfig = field(default_factory=AuthConfig, compare=False, repr=False)
    # metricsExporterType, metricsPromExporterPort... (broker/metrics/config.py): Apache's BrokerConfig keys
    metrics: MetricsConfig = field(default_factory=MetricsConfig, compare=False, repr=False)
    # Keys of the properties file that no config here knows, as read.
    extra: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def change_role(self, broker_id: int, role: BrokerRole) -> None:
        """DLedger mode's role switch (Apache's setBrokerId and setBrokerRole): the one change a running broker
        makes to its config, in place, so that every part holding the config sees the new role."""
        object.__setattr__(self, "broker_id", broker_id)
        object.__setattr__(self, "broker_role", role)

    @property
    def broker_addr(self) -> str:
        """The address the broker registers with the NameServer: brokerIP1:listenPort."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def effective_register_name_server_period(self) -> int:
        return max(10_000, min(self.register_name_server_period, 60_000))

    def log_settings(self, d_leger_self_id: str = "") -> LogSettings:
        """The log files' settings; with isolateLogEnable, under {brokerName}_{brokerId} as Apache's are, or
        {brokerName}_{dLegerSelfId} in DLedger mode (whose brokerId changes with the elections)."""
        log_dir = self.log_dir
        if self.isolate_log_enable:
            log_dir = os.path.join(log_dir, f"{self.broker_name}_{d_leger_self_id or self.broker_id}")
        return LogSettings(log_dir, self.log_max_file_size, self.log_max_index, self.log_console_level)

    def delay_level_table(self) -> tuple[int, ...]:
        """Milliseconds per delay level; level N (1-based, as in messages) is index N - 1."""
        return parse_delay_levels(self.message_delay_level)

    def to_properties(self) -> dict[str, str]:
        return {**{broker_key(f.name): _format_value(getattr(self, f.name)) for f in _broker_fields()},
                **self.metrics.to_properties()}


# setBrokerIP1 makes Java's key "brokerIP1"; the generic snake-to-camel rule would give "brokerIp1".
_KEY_OVERRIDES = {"broker_ip1": "brokerIP1", "broker_ip2": "brokerIP2"}


def broker_key(field_name: str) -> str:
    """The properties key (Java field name) of a BrokerConfig field."""
    return _KEY_OVERRIDES.get(field_name) or to_camel(field_name)


@functools.cache
def _broker_fields() -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(BrokerConfig) if f.name not in ("extra", "auth", "metrics"))


@functools.cache
def _broker_keys() -> frozenset[str]:
    return frozenset(broker_key(f.name) for f in _broker_fields())


@functools.cache
def _store_keys() -> frozenset[str]:
    return frozenset(MessageStoreConfig().to_properties())


@functools.cache
def _declared_defaults() -> dict[str, str]:
    """Every key a config has a field for, with its default as -p prints it (machine-dependent ones included)."""
    return {**MessageStoreConfig().to_properties(), **BrokerConfig().to_properties()}


def _format_value(value: object) -> str:
    """As Java prints a field: booleans lower case, enums by name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


_TIME_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """ScheduleMessageService.parseDelayLevel: "1s 5s 1m 2h" -> (1000, 5000, 60000, 7200000).

    Examples:
        >>> parse_delay_levels("1s 10m 1d")
        (1000, 600000, 86400000)
    """
    levels = []
    for item in text.split():
        unit = _TIME_UNITS_MS.get(item[-1:])
        if unit is None or not item[:-1].isdigit():
            raise ConfigError(f"bad value for messageDelayLevel: {text!r} (level {item!r} is not <number><s|m|h|d>)")
        levels.append(int(item[:-1]) * unit)
    if not levels:
        raise ConfigError("bad value for messageDelayLevel: it names no level")
    return tuple(levels)


# -- Java Properties syntax -------------------------------------------------------------------------------------------


# -- building the configs ---------------------------------------------------------------------------------------------


def configs_from_properties(props: Mapping[str, str]) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Give each key to every config that knows it (as Java does), keep the rest in ``BrokerConfig.extra``; refuse
    or warn about the keys rmq does not act on (``config_keys.py``)."""
    broker_keys, store_keys = _broker_keys(), _store_keys()
    warned = check_keys(props, {**_declared_defaults(), **dict.fromkeys(AUTH_KEYS, "")})
    if warned:
        log.warning("%s", warning_line(warned))
    extra = {k: v for k, v in props.items()
             if k not in broker_keys and k not in store_keys and k not in AUTH_KEYS and k not in METRICS_KEYS}
    broker_values = parse_fields(BrokerConfig, {k: v for k, v in props.items() if k in broker_keys})
    broker = dataclasses.replace(BrokerConfig(), **broker_values, extra=extra, metrics=parse_metrics_config(props))
    broker = dataclasses.replace(broker, auth=parse_auth_config(props, broker.broker_cluster_name))
    store = MessageStoreConfig.from_properties({k: v for k, v in props.items() if k in store_keys})
    broker = check_broker_config(broker)
    if store.enable_d_leger_commit_log:
        check_dledger_config(store)
        broker = dataclasses.replace(broker, broker_id=-1)  # BrokerStartup: no id until DLedger gives a role
    return broker, _store_for(broker, store)


def _store_for(broker: BrokerConfig, store: MessageStoreConfig) -> MessageStoreConfig:
    """What BrokerStartup derives for the store: haListenPort from listenPort, a slave's lower in-memory ratio."""
    changes: dict[str, int] = {}
    if store.ha_listen_port <= 0:
        changes["ha_listen_port"] = broker.listen_port + 1
    if broker.broker_role is BrokerRole.SLAVE:
        changes["access_message_in_memory_max_ratio"] = store.access_message_in_memory_max_ratio - 10
    return dataclasses.replace(store, **changes) if changes else store


def check_dledger_config(store: MessageStoreConfig) -> None:
    """What Apache's broker fails on at start in DLedger mode, as errors that name the key: dLegerGroup,
    dLegerPeers, dLegerSelfId among them and of the form n0 (a follower's brokerId comes from it)."""
    DLedgerConfig.from_store_config(store)
    slave_broker_id(store.d_leger_self_id)


def check_broker_config(config: BrokerConfig) -> BrokerConfig:
    """The checks Java makes at startup (BrokerStartup, PermName), as errors that name the key."""
    if not 0 <= config.broker_permission < 8:
        raise ConfigError(f"bad value for brokerPermission: {config.broker_permission} (a PermName value, 0-7)")
    if not 0 <= config.listen_port <= 65535:
        raise ConfigError(f"bad value for listenPort: {config.listen_port}")
    parse_delay_levels(config.message_delay_level)
    if config.acl_enable and not config.rocketmq_home:
        raise ConfigError("aclEnable=true needs rocketmqHome (or ROCKETMQ_HOME): the accounts are read from "
                          "<rocketmqHome>/conf/plain_acl.yml")
    config.log_settings()  # ConfigError for a bad log* value
    if config.broker_role is BrokerRole.SLAVE:
        if config.broker_id <= 0:
            raise ConfigError(f"bad value for brokerId: {config.broker_id} (a SLAVE's brokerId must be > 0)")
        return config
    # BrokerStartup: a master is always brokerId 0, whatever the file says.
    return config if config.broker_id == 0 else dataclasses.replace(config, broker_id=0)


def load_broker_config(
    path: str | os.PathLike[str] | None = None, overrides: Mapping[str, str] | None = None
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """``mqbroker -c path`` plus command-line ``overrides`` (``-n`` is ``{"namesrvAddr": ...}``), applied after the
    file. Java applies command-line properties to BrokerConfig only; here they reach MessageStoreConfig too.

    Relative paths (``PATH_KEYS``) are taken from the file's directory (``read_config_file`` says why), those of
    ``overrides`` from the working directory (they come from a command line)."""
    props = read_config_file(path, PATH_KEYS) if path is not None else {}
    if path is not None:
        props["brokerConfigPath"] = os.path.abspath(path)
    props.update(absolute_paths(overrides or {}, PATH_KEYS, os.getcwd()))
    return configs_from_properties(props)


def format_config(broker_config: BrokerConfig, store_config: MessageStoreConfig) -> str:
    """The effective configuration as ``key=value`` lines, like ``mqbroker -p`` prints it.

    Java prints each config's fields in declaration order (``getDeclaredFields``, not sorted) and we keep that
    order. Two differences: Java's -p prints BrokerConfig's own fields only, so the BrokerIdentity keys
    (brokerName, brokerClusterName, brokerId) are missing there and present here; and where Java goes on with the
    Netty and auth configs, we print MessageStoreConfig.
    """
    lines = [f"{k}={v}" for k, v in broker_config.to_properties().items()]
    lines += [f"{k}={v}" for k, v in store_config.to_properties().items()]
    return "\n".join(lines) + "\n"
