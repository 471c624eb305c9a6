"""UPDATE_BROKER_CONFIG (``mqadmin updateBrokerConfig``): which keys a running broker changes, how the change reaches
the broker's parts, and how it is written to the broker's config file (``broker.common.properties.write_config_file``).

Rule 1: ``RUNTIME_KEYS`` is the only list of keys the broker changes while it runs. Each is read by its users at
every use (a pull reads ``longPollingEnable`` on each request, retention reads ``fileReservedTime`` on each round), so
an update takes effect at once. Java's Configuration.update sets any field of the live config objects, whether the
broker reads it again or not, and answers SUCCESS also for a key it does not know; rmq refuses what it would not
act on, naming the keys, so an operator is never told a change happened that did not:

* a black-listed key (``brokerConfigPath``, ``rocketmqHome``, ``configBlackList``): NO_PERMISSION with Java's remark;
* a key the broker reads only at start (``listenPort``, ``brokerName``, ``storePathRootDir``...): NO_PERMISSION,
  naming it, with the file to edit;
* a key no config knows, or a value that does not parse: SYSTEM_ERROR naming it.

A refused update changes nothing, also for its other keys. An accepted one is written to the config file the broker
was started with (``-c``). Java rewrites that file with every effective setting (all fields of all its configs);
rmq rewrites only the changed keys in place (appended when the file lacked them), so the file keeps its comments and
stays the operator's. The broker reads the same configuration when it starts again, either way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from broker.common.errors import ConfigError
from broker.common.properties import (
    parse_fields,
    write_config_file,  # noqa: F401  (processors/admin.py imports it from here; the NameServer's update uses it too)
)
from broker.server.config import BrokerConfig, check_broker_config
from broker.store.config import MessageStoreConfig

log = logging.getLogger(__name__)

CONFIG_BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})  # AdminBrokerProcessor
BLACK_LIST_REMARK = "Can not update config in black list."

# Keys of BrokerConfig and MessageStoreConfig that the broker reads at each use.
RUNTIME_BROKER_KEYS = frozenset({
    "brokerPermission",  # sends, pulls and the registration's topic perms; the broker registers again at once
    "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "slaveReadEnable", "longPollingEnable",
    "shortPollingTimeMills", "rejectTransactionMessage", "notifyConsumerIdsChangedEnable", "transactionTimeOut",
    "transactionCheckMax", "useServerSideResetOffset", "rmqTransactionBatchEnable",
})
RUNTIME_STORE_KEYS = frozenset({
    "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "diskSpaceCleanForciblyRatio",
    "diskSpaceWarningLevelRatio", "cleanFileForciblyEnable", "maxMessageSize",
})
RUNTIME_KEYS = RUNTIME_BROKER_KEYS | RUNTIME_STORE_KEYS


class UpdateStatus(Enum):
    APPLIED = "APPLIED"
    BLACK_LISTED = "BLACK_LISTED"  # NO_PERMISSION, Java's remark
    NOT_AT_RUNTIME = "NOT_AT_RUNTIME"  # NO_PERMISSION
    REFUSED = "REFUSED"  # SYSTEM_ERROR: an unknown key or a bad value


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    status: UpdateStatus
    remark: str | None = None


def apply_update(broker: BrokerConfig, store: MessageStoreConfig, props: Mapping[str, str]) -> ConfigUpdate:
    """Check ``props`` and, when every key may change to its value, set them on the live ``broker`` and ``store``
    configs (which every part of the broker holds); otherwise change nothing and say why."""
    if CONFIG_BLACK_LIST & props.keys():
        return ConfigUpdate(UpdateStatus.BLACK_LISTED, BLACK_LIST_REMARK)
    known = set(broker.to_properties()) | set(store.to_properties())
    unknown = sorted(props.keys() - known)
    if unknown:
        return ConfigUpdate(UpdateStatus.REFUSED, f"unknown broker config key: {', '.join(unknown)}")
    fixed = sorted(props.keys() - RUNTIME_KEYS)
    if fixed:
        where = f"edit {broker.broker_config_path} and restart" if broker.broker_config_path else "restart with it"
        return ConfigUpdate(UpdateStatus.NOT_AT_RUNTIME,
                            f"Can not update config at runtime: {', '.join(fixed)} (the broker reads it at start; "
                            f"{where})")
    try:
        broker_values = parse_fields(BrokerConfig, {k: v for k, v in props.items() if k in RUNTIME_BROKER_KEYS})
        store_values = parse_fields(MessageStoreConfig, {k: v for k, v in props.items() if k in RUNTIME_STORE_KEYS})
        check_broker_config(dataclasses.replace(broker, **broker_values))
        _check_store(dataclasses.replace(store, **store_values))
    except (ConfigError, TypeError, ValueError) as err:
        return ConfigUpdate(UpdateStatus.REFUSED, str(err))
    _set_fields(broker, broker_values)
    _set_fields(store, store_values)
    return ConfigUpdate(UpdateStatus.APPLIED)


def _check_store(store: MessageStoreConfig) -> None:
    """The limits Java's getters clamp to, as errors naming the key."""
    for key, value in (("fileReservedTime", store.file_reserved_time), ("maxMessageSize", store.max_message_size)):
        if value <= 0:
            raise ConfigError(f"bad value for {key}: {value} (must be > 0)")
    for key, value in (("diskMaxUsedSpaceRatio", store.disk_max_used_space_ratio),
                       ("diskSpaceCleanForciblyRatio", store.disk_space_clean_forcibly_ratio),
                       ("diskSpaceWarningLevelRatio", store.disk_space_warning_level_ratio)):
        if not 0 < value <= 100:
            raise ConfigError(f"bad value for {key}: {value} (a percentage, 1-100)")
    hours = [h.strip() for h in store.delete_when.split(";") if h.strip()]
    if not hours or not all(h.isdigit() and int(h) < 24 for h in hours):
        raise ConfigError(f"bad value for deleteWhen: {store.delete_when!r} (hours of the day, e.g. 04;05)")


def _set_fields(config: BrokerConfig | MessageStoreConfig, values: Mapping[str, object]) -> None:
    """The one place a config changes after start: the configs are frozen against accidental writes, and every part
    of the broker holds the same object, so setting the field in place is what makes the change reach them (Java's
    Configuration.update sets the fields of its live config objects the same way)."""
    for name, value in values.items():
        object.__setattr__(config, name, value)
