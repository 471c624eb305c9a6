"""BrokerMetricsManager: the broker's Prometheus metrics under Apache RocketMQ 5's names (broker/metrics/names.py),
served when ``metricsExporterType=PROM``.

What costs the request path something is recorded per request, never per message: a send adds its message count
and bytes and one message-size observation (the put's average, as Apache's), a pull its count and bytes, the
remoting server each answer's latency. Everything else is read from what the broker keeps anyway when Prometheus
scrapes: topic and group numbers, connections, consumer lag (``consumer_lag.py``), the store's flush and dispatch
backlog, a master's slaves' replication lag.

Not exported (Apache has them): the processor watermark (rmq runs requests as tasks, not thread-pool queues), pop's
metrics (rmq has no pop), the half messages gauge (open transactions per topic), topic and group creation times,
and a delayed message's delivery (Apache counts it out of SCHEDULE_TOPIC_XXXX and into its topic; here it counts
once, when sent).

Examples:
    >>> metrics = BrokerMetricsManager(controller)  # doctest: +SKIP
    >>> await metrics.start()  # the endpoint on metricsPromExporterHost:metricsPromExporterPort  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from broker.common import validation as v
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_SHARDING_KEY,
    PROPERTY_START_DELIVER_TIME,
    PROPERTY_TRANSACTION_PREPARED,
    TIMER_PROPERTIES,
)
from broker.common.mq_version import version_desc
from broker.metrics import names as n
from broker.metrics.exporter import PrometheusEndpoint
from broker.metrics.instruments import LabelValues, MetricsRegistry
from broker.metrics.remoting import RpcLatency
from broker.server.consumer_lag import ConsumerLagCalculator, GroupLag
from broker.server.consumer_manager import CONSUME_ACTIVELY, CONSUME_PASSIVELY

if TYPE_CHECKING:
    from broker.server.broker_controller import BrokerController

_DELAY_PROPERTIES = frozenset((PROPERTY_START_DELIVER_TIME, PROPERTY_DELAY_TIME_LEVEL, *TIMER_PROPERTIES))
_STORAGE: LabelValues = tuple(n.STORAGE_LABELS.values())
_SYSTEM_GROUP_PREFIX = v.CID_RMQ_SYS_PREFIX.lower()
_CONSUME_MODES = {CONSUME_ACTIVELY: "pull", CONSUME_PASSIVELY: "push", "CONSUME_POP": "pop"}  # ConsumeType.typeCN


def message_type(props: Mapping[str, str]) -> str:
    """BrokerMetricsManager.getMessageType of a send's properties: transaction, fifo, delay or normal."""
    prepared = props.get(PROPERTY_TRANSACTION_PREPARED)
    if prepared is not None and prepared.lower() == "true":
        return "transaction"
    if PROPERTY_SHARDING_KEY in props:
        return "fifo"
    if not _DELAY_PROPERTIES.isdisjoint(props):
        return "delay"
    return "normal"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _system(topic: str, group: str) -> str:
    """BrokerMetricsManager.isSystem: a system topic, or a group named CID_RMQ_SYS_... in any case."""
    return _flag(v.is_system_topic(topic) or group.lower().startswith(_SYSTEM_GROUP_PREFIX))


def _in_labels(key: tuple[str, str]) -> LabelValues:
    topic, kind = key
    return topic, kind, _flag(v.is_system_topic(topic))


def _out_labels(key: tuple[str, str]) -> LabelValues:
    topic, group = key
    return topic, group, _flag(v.is_system_topic(topic) or v.is_sys_consumer_group(group))


def _dlq_labels(key: tuple[str, str]) -> LabelValues:
    group, topic = key
    return group, topic, _system(topic, group)


class RequestMetrics:
    """What sends, pulls and DLQ moves add, once per request: the broker's manager is one, and the benchmark times
    one alone. ``requests``, ``dlq`` and ``transactions`` are enableRequestMetrics, enableLagAndDlqMetrics and
    enableTransactionMetrics."""

    def __init__(self, registry: MetricsRegistry, *, requests: bool = True, dlq: bool = True,
                 transactions: bool = True) -> None:
        self.request_metrics = requests
        if requests:
            self._messages_in = registry.counter(n.MESSAGES_IN, _in_labels)
            self._throughput_in = registry.counter(n.THROUGHPUT_IN, _in_labels)
            self._message_size = registry.histogram(n.MESSAGE_SIZE, _in_labels)
            self._messages_out = registry.counter(n.MESSAGES_OUT, _out_labels)
            self._throughput_out = registry.counter(n.THROUGHPUT_OUT, _out_labels)
        self.dlq_metrics = dlq
        if dlq:
            self._send_to_dlq = registry.counter(n.SEND_TO_DLQ, _dlq_labels)
        self.transaction_metrics = transactions
        if transactions:
            self._commits = registry.counter(n.COMMIT_MESSAGES)
            self._rollbacks = registry.counter(n.ROLLBACK_MESSAGES)
            self._finish_latency = registry.histogram(n.FINISH_MESSAGE_LATENCY)
        self._counted: dict[str, bool] = {}  # topic -> not a retry or DLQ topic (Apache counts neither)

    def _counts(self, topic: str) -> bool:
        counted = self._counted.get(topic)
        if counted is None:
            if len(self._counted) > 100_000:  # topics come and go: forget them all now and then
                self._counted.clear()
            counted = self._counted[topic] = not (v.is_retry_topic(topic) or v.is_dlq_topic(topic))
        return counted

    def record_in(self, topic: str, props: Mapping[str, str], msg_num: int, wrote_bytes: int) -> None:
        """A send stored ``msg_num`` messages of ``wrote_bytes`` in ``topic`` (retry and DLQ topics are not counted,
        as in Apache); ``props`` are the request's properties (the batch's for a batch)."""
        if not self.request_metrics or not msg_num or not self._counts(topic):
            return
        key = (topic, message_type(props))
        self._messages_in.add(key, msg_num)
        self._throughput_in.add(key, wrote_bytes)
        self._message_size.observe(key, wrote_bytes // msg_num)

    def record_out(self, topic: str, group: str, msg_num: int, size: int) -> None:
        """A pull handed ``msg_num`` messages (``size`` bytes) of ``topic`` to ``group``."""
        if self.request_metrics and self._counts(topic):
            key = (topic, group)
            self._messages_out.add(key, msg_num)
            self._throughput_out.add(key, size)

    def record_end(self, topic: str, commit: bool, ended: int, born_timestamp: int = 0) -> None:
        """``ended`` transactions of ``topic`` were committed (or rolled back); with the half's ``born_timestamp``
        (ms), a commit's latency is observed too, in whole seconds as Apache's (END_TRANSACTION: one at a time;
        rmq's END_TRANSACTION_BATCH counts its ends, one call per request)."""
        if not self.transaction_metrics or not ended:
            return
        (self._commits if commit else self._rollbacks).add((topic,), ended)
        if commit and born_timestamp:
            self._finish_latency.observe((topic,), (time.time_ns() // 1_000_000 - born_timestamp) // 1000)

    def record_dlq(self, group: str, topic: str) -> None:
        """A consumer's message of ``topic`` went to ``group``'s DLQ."""
        if self.dlq_metrics:
            self._send_to_dlq.add((group, topic), 1)


class BrokerMetricsManager(RequestMetrics):
    """The broker's registry: RequestMetrics' counters, the rpc latency, the gauges the config's switches keep."""

    def __init__(self, controller: BrokerController) -> None:
        bc = controller.broker_config
        config = bc.metrics
        self.controller = controller
        labels = {n.LABEL_CLUSTER: bc.broker_cluster_name, n.LABEL_NODE_TYPE: n.NODE_TYPE_BROKER,
                  n.LABEL_NODE_ID: bc.broker_name, **config.labels()}
        self.registry = MetricsRegistry(labels, n.BROKER_METER)
        super().__init__(self.registry, requests=config.enable_request_metrics, dlq=config.enable_lag_and_dlq_metrics,
                         transactions=config.enable_transaction_metrics)
        self.endpoint = PrometheusEndpoint(config.host(bc.broker_ip1), config.metrics_prom_exporter_port,
                                           self.registry.render)
        registry = self.registry
        self._lag = ConsumerLagCalculator(bc, controller.topic_config_manager, controller.subscription_group_manager,
                                          controller.consumer_manager, controller.consumer_offset_manager,
                                          controller.store)
        self.rpc_latency = RpcLatency(registry) if config.enable_remoting_metrics else None
        if config.enable_stats_metrics:
            registry.gauge(n.BROKER_PERMISSION, lambda: [((), bc.broker_permission)])
            registry.gauge(n.TOPIC_NUMBER, lambda: [((), len(controller.topic_config_manager.topic_config_table))])
            registry.gauge(n.CONSUMER_GROUP_NUMBER,
                           lambda: [((), len(controller.subscription_group_manager.subscription_group_table))])
        if config.enable_connection_metrics:
            registry.gauge(n.PRODUCER_CONNECTIONS, self._producer_connections)
            registry.gauge(n.CONSUMER_CONNECTIONS, self._consumer_connections)
        if config.enable_lag_and_dlq_metrics:
            for spec in (n.CONSUMER_LAG_MESSAGES, n.CONSUMER_LAG_LATENCY, n.CONSUMER_INFLIGHT_MESSAGES,
                         n.CONSUMER_QUEUEING_LATENCY, n.CONSUMER_READY_MESSAGES):
                registry.gauge(spec, lambda spec=spec: self._lag_samples(spec))
        if config.enable_message_store_metrics:
            store = controller.store
            registry.gauge(n.STORAGE_SIZE, self._storage_size)
            registry.gauge(n.STORAGE_FLUSH_BEHIND, lambda: [(_STORAGE, store.flush_behind_bytes)])
            registry.gauge(n.STORAGE_DISPATCH_BEHIND, lambda: [(_STORAGE, store.dispatch_behind_bytes)])
            registry.gauge(n.STORAGE_MESSAGE_RESERVE_TIME, self._reserve_time)
            registry.gauge(n.REPLICATION_LAG, self._replication_lag)
        self._lag_snapshot: tuple[int, list[GroupLag]] = (-1, [])

    async def start(self) -> None:
        """Serve the endpoint (ConfigError when its port cannot be bound), and time the server's answers."""
        await self.endpoint.start()
        if self.rpc_latency is not None:
            self.controller.server.set_request_observer(self.rpc_latency.record)

    async def shutdown(self) -> None:
        await self.endpoint.stop()

    # -- read at scrape time --------------------------------------------------------------------------------------

    def _producer_connections(self) -> Iterable[tuple[LabelValues, int]]:
        """Producers' connections per client language and version."""
        return Counter((info.language.name.lower(), version_desc(info.version).lower(), n.PROTOCOL_TYPE_REMOTING)
                       for channels in list(self.controller.producer_manager.groups.values())
                       for info in list(channels.values())).items()

    def _consumer_connections(self) -> Iterable[tuple[LabelValues, int]]:
        """Consumers' connections per group, language, version and mode (push, pull)."""
        return Counter((group, channel.language.name.lower(), version_desc(channel.version).lower(),
                        _CONSUME_MODES.get(info.consume_type or "", (info.consume_type or "").lower()),
                        n.PROTOCOL_TYPE_REMOTING, _system("", group))
                       for group, info in list(self.controller.consumer_manager.groups.items())
                       for channel in list(info.channels.values())).items()

    def _lag_samples(self, spec: n.MetricSpec) -> Iterable[tuple[LabelValues, int]]:
        """The five lag gauges from one calculation per page (they are read one after the other)."""
        page, lags = self._lag_snapshot
        if page != self.registry.renders:
            lags = self._lag.calculate()
            self._lag_snapshot = (self.registry.renders, lags)
        wall = time.time_ns() // 1_000_000
        for lag in lags:
            labels = (lag.group, lag.topic, "false", _system(lag.topic, lag.group))
            age = wall - lag.earliest_unconsumed_timestamp if lag.earliest_unconsumed_timestamp else 0
            if spec is n.CONSUMER_INFLIGHT_MESSAGES:
                yield labels, 0
            elif spec in (n.CONSUMER_LAG_LATENCY, n.CONSUMER_QUEUEING_LATENCY):
                yield labels, age
            else:
                yield labels, lag.lag

    def _storage_size(self) -> Iterable[tuple[LabelValues, int]]:
        """Bytes used on the store's file system (Apache's: total space minus free space)."""
        try:
            stat = os.statvfs(self.controller.store_config.store_path_root_dir)
        except OSError:
            return []
        return [(_STORAGE, (stat.f_blocks - stat.f_bfree) * stat.f_frsize)]

    def _reserve_time(self) -> Iterable[tuple[LabelValues, int]]:
        """How old the CommitLog's first message is (nothing while it is empty)."""
        earliest = self.controller.store.earliest_commit_log_time()
        return [(_STORAGE, time.time_ns() // 1_000_000 - earliest)] if earliest > 0 else []

    def _replication_lag(self) -> Iterable[tuple[LabelValues, int]]:
        state = self.controller.ha_service.runtime_state()
        return [((c.addr,), c.diff) for c in state.connections] if state.master else []
