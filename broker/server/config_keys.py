"""What the broker does with a broker.conf key it accepts but does not act on: refuse it, or warn about it at start.

Rule 1: this table is the only place that decides it; ``config.py`` asks ``check_keys`` once per configuration.

* **Refused** (ConfigError naming the key): a value that turns on something rmq does not have. A broker that started
  without the DLedger or controller mode its file asks for would not be the broker the file describes. The same
  key set to the value rmq behaves as anyway (``enableLmq=false``) is accepted: rmq then does what it says.
* **Warned** (one WARNING line at start naming every such key and its family): keys whose absence a client cannot
  tell apart from their effect, beyond speed or resources (thread pools, Netty options, metrics), features rmq does
  not serve at all (pop, the timer wheel), the few keys BrokerConfig declares for Apache-conf compatibility without
  acting on them (when set to another value than their default), and any key no rule names (a typo, or an Apache
  key of another version): Apache's own broker ignores unknown keys silently; rmq says so.

Examples:
    >>> check_keys({"serverWorkerThreads": "8", "enableLmq": "false"})
    [('serverWorkerThreads', 'thread pool')]
    >>> check_keys({"enableLmq": "true"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    broker.common.errors.ConfigError: enableLmq=true is refused: rmq has no light message queues; remove the key or ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.common.errors import ConfigError


def _turned_on(value: str) -> bool:
    return value.strip().lower() == "true"


def _set(value: str) -> bool:
    return bool(value.strip())


@dataclass(frozen=True, slots=True)
class RefusedKey:
    """A key refused when ``refused(value)``; ``allowed`` is what the message suggests instead."""

    key: str
    reason: str
    refused: Callable[[str], bool] = _turned_on
    allowed: str = "set it to false"


@dataclass(frozen=True, slots=True)
class WarnedFamily:
    """Keys matching ``pattern`` (a full match) are ignored with a warning naming the family."""

    family: str
    pattern: str


REFUSED: tuple[RefusedKey, ...] = (
    RefusedKey("migrateAuthFromV1Enabled", "rmq does not migrate ACL 1.0 accounts to ACL 2.0 users"),
    RefusedKey("enableControllerMode", "rmq has no controller mode (automatic master election)"),
    RefusedKey("duplicationEnable", "rmq has no duplication mode"),
    RefusedKey("enableSlaveActingMaster", "an rmq slave never acts as master"),
    RefusedKey("offsetCheckInSlave", "an rmq slave never corrects pull offsets"),
    RefusedKey("enableLmq", "rmq has no light message queues"),
    RefusedKey("enableMultiDispatch", "rmq has no multi-dispatch (light message queues)"),
    RefusedKey("fetchNamesrvAddrByAddressServer", "rmq has no NameServer address service",
               allowed="set namesrvAddr instead"),
    RefusedKey("messageStorePlugIn", "rmq has no message store plug-ins", _set, "leave it empty"),
    RefusedKey("storeType", "rmq has the default (file) store only",
               lambda value: value.strip() not in ("", "default"), "set it to default"),
    RefusedKey("litePullMessageEnable", "rmq always serves LITE_PULL_MESSAGE",
               lambda value: value.strip().lower() == "false", "set it to true"),
)

# Keys BrokerConfig or MessageStoreConfig declare (so -p prints them and Apache's conf files load) but nothing reads.
DECLARED_NOT_ACTED_ON = WarnedFamily("declared, not acted on",
                                     "registerBrokerTimeoutMills|filterSupportRetry|compressedRegister|forceRegister"
                                     "|deleteCommitLogFilesInterval|checkCRCOnRecover")

# Keys no config declares, by family (the first match names it).
WARNED: tuple[WarnedFamily, ...] = (
    WarnedFamily("thread pool", r".*(Threads|ThreadNums|ThreadPoolNums|ThreadPoolQueueCapacity|QueueCapacity"
                                r"|ThreadPoolQueueSize|Executor\w*)"),
    WarnedFamily("Netty option", r"(server|client)[A-Z]\w*|useEpollNativeSelector|connectTimeoutMillis"
                                 r"|writeBufferHighWaterMark|writeBufferLowWaterMark|fastListenPort|bindAddress"
                                 r"|enableTransparentRetry|disableCallbackExecutor|disableNettyWorkerGroup"
                                 r"|maxChannelIdleTimeSeconds|enableReconnectForGoAway|enableNettyEventPoll\w*"),
    WarnedFamily("store tuning", r"warmMapedFile\w*|flushLeastPagesWhenWarmMapedFile|transientStorePool\w*"
                                 r"|osPageCacheBusyTimeOutMills|useReentrantLockWhenPutMessage|commit\w*Interval\w*"
                                 r"|commitCommitLogLeastPages|maxTransfer\w*OnMessageInDisk|dataReadAheadEnable"
                                 r"|fastFailIfNoBufferInStorePool|brokerFastFailureEnable|waitTimeMills\w*"
                                 r"|maxErrorRateOfBloomFilter|expectConsumerNumUseFilter|mappedFile\w*Swap\w*"
                                 r"|redeleteHangedFileInterval|destroyMapedFileIntervalForcibly"),
    WarnedFamily("metrics and statistics", r"metrics\w*|\w*Metrics\w*|\w*[Ss]tats?\w*|enableDetailStat"),
    WarnedFamily("pop consumption", r"pop\w*|enablePop\w*|revive\w*|enableRetryTopicV2"
                                    r"|retrieveMessageFromPopRetryTopicV1|initPopOffsetByCheckMsgInMem"),
    WarnedFamily("timer wheel", r"timer\w*|enableTimer\w*"),
    WarnedFamily("cold data flow control", r"\w*[Cc]oldData\w*|accessMessageInMemoryHotRatio"),
    WarnedFamily("tiered store and RocksDB", r"tiered\w*|\w*[Rr]ocks[Dd][Bb]\w*"),
)

UNKNOWN = "not a key rmq knows"
_WARNED = tuple((w.family, re.compile(w.pattern)) for w in WARNED)
_DECLARED_NOT_ACTED_ON = re.compile(DECLARED_NOT_ACTED_ON.pattern)
_REFUSED = {r.key: r for r in REFUSED}


def family_of(key: str) -> str:
    """The warned family ``key`` belongs to (UNKNOWN when no rule names it)."""
    for family, pattern in _WARNED:
        if pattern.fullmatch(key):
            return family
    return UNKNOWN


def check_keys(props: Mapping[str, str], declared: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Raise ConfigError for the first refused key of ``props``; return (key, family) for every key to warn about.

    ``declared`` maps the keys BrokerConfig and MessageStoreConfig have fields for to their defaults: of those, the
    ones DECLARED_NOT_ACTED_ON names are warned about when set to another value than the default (what rmq does)."""
    for key, value in props.items():
        rule = _REFUSED.get(key)
        if rule is not None and rule.refused(value):
            raise ConfigError(f"{key}={value.strip()} is refused: {rule.reason}; remove the key or {rule.allowed}")
    declared = declared or {}
    warned = []
    for key, value in props.items():
        if key in declared:
            if _DECLARED_NOT_ACTED_ON.fullmatch(key) and value.strip() != declared[key]:
                warned.append((key, DECLARED_NOT_ACTED_ON.family))
        elif key not in _REFUSED:
            warned.append((key, family_of(key)))
    return warned


def warning_line(warned: list[tuple[str, str]]) -> str:
    """The one line logged at start: each ignored key with its family."""
    return "broker config keys rmq does not act on (ignored): " + ", ".join(f"{k} ({f})" for k, f in warned)
