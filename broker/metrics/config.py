"""MetricsConfig: the metrics keys of broker.conf (Apache's BrokerConfig fields of the same names), which
namesrv.conf takes too (Apache's NameServer has none: rmq's NameServer reads the same keys).

Parsed once here, at the edge. ``metricsExporterType`` is ``DISABLE`` (the default) or ``PROM``, by name or by
Apache's number (0, 2); ``OTLP_GRPC`` and ``LOG`` are Apache's too, but rmq exports Prometheus only, so they are
refused, as is any other value. ``metricsLabel`` is ``key:value,key:value`` (extra labels on every series); Apache
logs a malformed pair and goes on, rmq refuses it naming the pair.

Examples:
    >>> config = parse_metrics_config({"metricsExporterType": "PROM", "metricsLabel": "region:eu,env:prod"})
    >>> config.enabled, config.metrics_prom_exporter_port, config.labels()
    (True, 5557, {'region': 'eu', 'env': 'prod'})
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from broker.common.errors import ConfigError
from broker.common.properties import format_value, parse_fields, to_camel
from broker.metrics.names import LABEL_AGGREGATION, LABEL_CLUSTER, LABEL_NODE_ID, LABEL_NODE_TYPE, LABEL_SCOPE


class MetricsExporterType(Enum):
    """common/metrics/MetricsExporterType: the name and Apache's number."""

    DISABLE = 0
    OTLP_GRPC = 1
    PROM = 2
    LOG = 3


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_OWN_LABELS = (LABEL_CLUSTER, LABEL_NODE_TYPE, LABEL_NODE_ID, LABEL_AGGREGATION, LABEL_SCOPE)


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """BrokerConfig's metrics keys that rmq acts on, with Apache's defaults. The ``enable*Metrics`` switches turn
    families off as Apache's do (stats: permission and topic/group numbers; request: messages and throughput in and
    out, message size; connection: producer and consumer connections; lagAndDlq: the consumer lag gauges and the DLQ
    counter; transaction: commits, rollbacks and their latency; remoting: rpc latency; messageStore: the storage gauges
    and replication lag)."""

    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_port: int = 5557
    metrics_prom_exporter_host: str = ""  # blank: the broker's brokerIP1 (the NameServer's bindAddress)
    metrics_label: str = ""
    metrics_in_delta: bool = False  # aggregation="delta" on every series, as Apache adds it (sums stay cumulative)
    enable_remoting_metrics: bool = True
    enable_message_store_metrics: bool = True
    enable_connection_metrics: bool = True
    enable_stats_metrics: bool = True
    enable_request_metrics: bool = True
    enable_lag_and_dlq_metrics: bool = True
    enable_transaction_metrics: bool = True

    @property
    def enabled(self) -> bool:
        return self.metrics_exporter_type is MetricsExporterType.PROM

    def labels(self) -> dict[str, str]:
        """``metricsLabel``'s pairs, and ``aggregation`` with metricsInDelta."""
        pairs = dict(_label_pairs(self.metrics_label))
        if self.metrics_in_delta:
            pairs[LABEL_AGGREGATION] = "delta"
        return pairs

    def host(self, default: str) -> str:
        return self.metrics_prom_exporter_host.strip() or default

    def to_properties(self) -> dict[str, str]:
        """Every key and its value as Apache prints it (the exporter type by name)."""
        props = {to_camel(f.name): format_value(getattr(self, f.name)) for f in dataclasses.fields(self)}
        props["metricsExporterType"] = self.metrics_exporter_type.name
        return props


METRICS_KEYS = frozenset(to_camel(f.name) for f in dataclasses.fields(MetricsConfig))


def _label_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        if len(parts) != 2 or not _LABEL_NAME.fullmatch(parts[0]):
            raise ConfigError(f"bad value for metricsLabel: {text!r} ({item!r} is not label:value, with a label "
                              "of letters, digits and _)")
        if parts[0] in _OWN_LABELS:
            raise ConfigError(f"bad value for metricsLabel: {text!r} ({parts[0]} is set by rmq itself)")
        pairs.append((parts[0], parts[1]))
    return pairs


def _exporter_type(raw: str) -> MetricsExporterType:
    text = raw.strip()
    by_number = {str(t.value): t for t in MetricsExporterType}
    kind = by_number.get(text) or MetricsExporterType.__members__.get(text)
    if kind is None:
        raise ConfigError(f"bad value for metricsExporterType: {raw!r} (one of DISABLE, PROM; or Apache's OTLP_GRPC, "
                          "LOG, which rmq does not have)")
    if kind in (MetricsExporterType.OTLP_GRPC, MetricsExporterType.LOG):
        raise ConfigError(f"metricsExporterType={text} is refused: rmq exports Prometheus metrics only; set it to "
                          "PROM or DISABLE")
    return kind


def parse_metrics_config(props: Mapping[str, str]) -> MetricsConfig:
    """The metrics keys of ``props`` (others are ignored); ConfigError names a bad key or value."""
    values = parse_fields(MetricsConfig, {k: v for k, v in props.items()
                                          if k in METRICS_KEYS and k != "metricsExporterType"})
    if "metricsExporterType" in props:
        values["metrics_exporter_type"] = _exporter_type(props["metricsExporterType"])
    config = MetricsConfig(**values)
    if not 0 <= config.metrics_prom_exporter_port <= 65535:  # 0: a free port (tests), as the log says
        raise ConfigError(f"bad value for metricsPromExporterPort: {config.metrics_prom_exporter_port}")
    config.labels()  # ConfigError for a bad metricsLabel
    return config
