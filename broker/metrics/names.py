"""The metrics' names, label names, HELP texts and histogram buckets, as Apache RocketMQ 5's Prometheus endpoint
prints them.

Rule 1: every metric rmq exports is declared here, once; the broker, the NameServer and the Grafana dashboard's
test read these specs.

Apache's broker records through OpenTelemetry and exports through its Prometheus exporter, which shapes what a
scrape shows (Apache 5.5.0's broker, ``metricsExporterType=PROM``, scraped while producing and consuming):

* a unit becomes a suffix: ``rocketmq_rpc_latency`` with unit ``milliseconds`` is ``rocketmq_rpc_latency_milliseconds``,
  ``rocketmq_storage_size`` with ``bytes`` is ``rocketmq_storage_size_bytes`` (a name already ending in it keeps it);
* counters keep their ``_total`` name, with no ``_created`` series;
* a counter's or gauge's HELP is its view's description ("default view for counter." / "... gauge."), a histogram's
  its own description (its view sets buckets, not a description);
* every series carries ``otel_scope_name`` (the meter's name) besides the node's labels (``cluster``, ``node_type``,
  ``node_id``, and ``metricsLabel``'s pairs), label names in alphabetical order; ``target_info 1`` closes the page.

Names of Apache's constants: BrokerMetricsConstant, RemotingMetricsConstant, DefaultStoreMetricsConstant. The few
that are rmq's own (Apache's NameServer exports nothing; replication lag) say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


COUNTER_HELP = "default view for counter."
GAUGE_HELP = "default view for gauge."

# Labels (BrokerMetricsConstant, RemotingMetricsConstant, DefaultStoreMetricsConstant)
LABEL_CLUSTER = "cluster"
LABEL_NODE_TYPE = "node_type"
LABEL_NODE_ID = "node_id"
LABEL_AGGREGATION = "aggregation"
LABEL_SCOPE = "otel_scope_name"  # the OpenTelemetry meter's name, on every series
LABEL_TOPIC = "topic"
LABEL_CONSUMER_GROUP = "consumer_group"
LABEL_MESSAGE_TYPE = "message_type"
LABEL_IS_SYSTEM = "is_system"
LABEL_IS_RETRY = "is_retry"
LABEL_LANGUAGE = "language"
LABEL_VERSION = "version"
LABEL_CONSUME_MODE = "consume_mode"
LABEL_PROTOCOL_TYPE = "protocol_type"
LABEL_REQUEST_CODE = "request_code"
LABEL_RESPONSE_CODE = "response_code"
LABEL_IS_LONG_POLLING = "is_long_polling"
LABEL_RESULT = "result"
LABEL_STORAGE_TYPE = "storage_type"
LABEL_STORAGE_MEDIUM = "storage_medium"
LABEL_SLAVE_ADDRESS = "slave_address"  # rmq's own (replication)

NODE_TYPE_BROKER = "broker"
NODE_TYPE_NAMESRV = "namesrv"  # rmq's own: Apache's NameServer has no meter
BROKER_METER = "broker-meter"  # BrokerMetricsConstant.OPEN_TELEMETRY_METER_NAME
NAMESRV_METER = "namesrv-meter"
AGGREGATION_DELTA = "delta"
PROTOCOL_TYPE_REMOTING = "remoting"
RESULT_SUCCESS = "success"
RESULT_ONEWAY = "oneway"
STORAGE_LABELS = {LABEL_STORAGE_TYPE: "local", LABEL_STORAGE_MEDIUM: "disk"}  # DefaultStoreMetricsManager's

# Buckets: BrokerMetricsManager.registerMetricsView and RemotingMetricsManager.getMetricsView
MESSAGE_SIZE_BUCKETS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
# Apache's finish latency is declared in "ms" (so the name ends in _milliseconds) but records seconds, with these
# bounds (5 s to a day); rmq records the same, so that dashboards made for Apache's read it alike.
FINISH_LATENCY_BUCKETS_S = (5, 60, 600, 3600, 12 * 3600, 24 * 3600)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric as a scrape shows it: its full name, type, HELP, its own labels (the node's come on top) and, for a
    histogram, its bucket bounds."""

    name: str
    kind: Kind
    labels: tuple[str, ...] = ()
    help: str = ""
    buckets: tuple[int, ...] = ()

    @property
    def help_text(self) -> str:
        return self.help or (COUNTER_HELP if self.kind is Kind.COUNTER else GAUGE_HELP)


def _counter(name: str, *labels: str) -> MetricSpec:
    return MetricSpec(name, Kind.COUNTER, labels)


def _gauge(name: str, *labels: str) -> MetricSpec:
    return MetricSpec(name, Kind.GAUGE, labels)


IN_LABELS = (LABEL_TOPIC, LABEL_MESSAGE_TYPE, LABEL_IS_SYSTEM)
OUT_LABELS = (LABEL_TOPIC, LABEL_CONSUMER_GROUP, LABEL_IS_SYSTEM)
LAG_LABELS = (LABEL_CONSUMER_GROUP, LABEL_TOPIC, LABEL_IS_RETRY, LABEL_IS_SYSTEM)
RPC_LABELS = (LABEL_PROTOCOL_TYPE, LABEL_REQUEST_CODE, LABEL_RESPONSE_CODE, LABEL_IS_LONG_POLLING, LABEL_RESULT)
STORAGE = tuple(STORAGE_LABELS)

# -- the broker (BrokerMetricsManager) ------------------------------------------------------------------------------
BROKER_PERMISSION = _gauge("rocketmq_broker_permission")
TOPIC_NUMBER = _gauge("rocketmq_topic_number")
CONSUMER_GROUP_NUMBER = _gauge("rocketmq_consumer_group_number")
MESSAGES_IN = _counter("rocketmq_messages_in_total", *IN_LABELS)
MESSAGES_OUT = _counter("rocketmq_messages_out_total", *OUT_LABELS)
THROUGHPUT_IN = _counter("rocketmq_throughput_in_total", *IN_LABELS)
THROUGHPUT_OUT = _counter("rocketmq_throughput_out_total", *OUT_LABELS)
MESSAGE_SIZE = MetricSpec("rocketmq_message_size", Kind.HISTOGRAM, IN_LABELS, "Incoming messages size",
                          MESSAGE_SIZE_BUCKETS)
PRODUCER_CONNECTIONS = _gauge("rocketmq_producer_connections", LABEL_LANGUAGE, LABEL_VERSION, LABEL_PROTOCOL_TYPE)
CONSUMER_CONNECTIONS = _gauge("rocketmq_consumer_connections", LABEL_CONSUMER_GROUP, LABEL_LANGUAGE, LABEL_VERSION,
                              LABEL_CONSUME_MODE, LABEL_PROTOCOL_TYPE, LABEL_IS_SYSTEM)
CONSUMER_LAG_MESSAGES = _gauge("rocketmq_consumer_lag_messages", *LAG_LABELS)
CONSUMER_LAG_LATENCY = _gauge("rocketmq_consumer_lag_latency_milliseconds", *LAG_LABELS)
CONSUMER_INFLIGHT_MESSAGES = _gauge("rocketmq_consumer_inflight_messages", *LAG_LABELS)
CONSUMER_QUEUEING_LATENCY = _gauge("rocketmq_consumer_queueing_latency_milliseconds", *LAG_LABELS)
CONSUMER_READY_MESSAGES = _gauge("rocketmq_consumer_ready_messages", *LAG_LABELS)
SEND_TO_DLQ = _counter("rocketmq_send_to_dlq_messages_total", LABEL_CONSUMER_GROUP, LABEL_TOPIC, LABEL_IS_SYSTEM)
COMMIT_MESSAGES = _counter("rocketmq_commit_messages_total", LABEL_TOPIC)
ROLLBACK_MESSAGES = _counter("rocketmq_rollback_messages_total", LABEL_TOPIC)
FINISH_MESSAGE_LATENCY = MetricSpec("rocketmq_finish_message_latency_milliseconds", Kind.HISTOGRAM, (LABEL_TOPIC,),
                                    "Transaction finish latency", FINISH_LATENCY_BUCKETS_S)
# -- remoting (RemotingMetricsManager): the broker's and the NameServer's ------------------------------------------
RPC_LATENCY = MetricSpec("rocketmq_rpc_latency_milliseconds", Kind.HISTOGRAM, RPC_LABELS, "Rpc latency",
                         RPC_LATENCY_BUCKETS_MS)
# -- the store (DefaultStoreMetricsManager) -------------------------------------------------------------------------
STORAGE_SIZE = _gauge("rocketmq_storage_size_bytes", *STORAGE)
STORAGE_FLUSH_BEHIND = _gauge("rocketmq_storage_flush_behind_bytes", *STORAGE)
STORAGE_DISPATCH_BEHIND = _gauge("rocketmq_storage_dispatch_behind_bytes", *STORAGE)
STORAGE_MESSAGE_RESERVE_TIME = _gauge("rocketmq_storage_message_reserve_time_milliseconds", *STORAGE)
# -- rmq's own ------------------------------------------------------------------------------------------------------
# A master's slaves: CommitLog bytes each has not acknowledged yet (what ``mqadmin haStatus`` shows as its diff).
REPLICATION_LAG = _gauge("rocketmq_replication_lag_bytes", LABEL_SLAVE_ADDRESS)
# A NameServer's view: brokers registered and alive per cluster, topics in its route table.
NAMESRV_BROKER_NUMBER = _gauge("rocketmq_namesrv_broker_number", LABEL_CLUSTER)
NAMESRV_TOPIC_NUMBER = _gauge("rocketmq_namesrv_topic_number")
TARGET_INFO = MetricSpec("target_info", Kind.GAUGE, (), "Target metadata")

BROKER_METRICS = (BROKER_PERMISSION, TOPIC_NUMBER, CONSUMER_GROUP_NUMBER, MESSAGES_IN, MESSAGES_OUT, THROUGHPUT_IN,
                  THROUGHPUT_OUT, MESSAGE_SIZE, PRODUCER_CONNECTIONS, CONSUMER_CONNECTIONS, CONSUMER_LAG_MESSAGES,
                  CONSUMER_LAG_LATENCY, CONSUMER_INFLIGHT_MESSAGES, CONSUMER_QUEUEING_LATENCY, CONSUMER_READY_MESSAGES,
                  SEND_TO_DLQ, COMMIT_MESSAGES, ROLLBACK_MESSAGES, FINISH_MESSAGE_LATENCY, RPC_LATENCY, STORAGE_SIZE,
                  STORAGE_FLUSH_BEHIND, STORAGE_DISPATCH_BEHIND, STORAGE_MESSAGE_RESERVE_TIME, REPLICATION_LAG)
NAMESRV_METRICS = (RPC_LATENCY, NAMESRV_BROKER_NUMBER, NAMESRV_TOPIC_NUMBER)


def series_names(spec: MetricSpec) -> tuple[str, ...]:
    """The sample names a scrape shows for ``spec`` (a histogram's ``_bucket``, ``_count`` and ``_sum``)."""
    if spec.kind is Kind.HISTOGRAM:
        return tuple(spec.name + suffix for suffix in ("_bucket", "_count", "_sum"))
    return (spec.name,)
