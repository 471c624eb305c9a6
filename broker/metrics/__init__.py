"""Prometheus metrics under Apache RocketMQ 5's names, for the broker (broker/server/broker_metrics.py) and the
NameServer (broker/namesrv/metrics.py), on when their config says ``metricsExporterType=PROM``.

Modules: ``names`` (every metric's name, type, labels, HELP and buckets, as Apache's endpoint prints them),
``config`` (MetricsConfig: the metrics keys), ``instruments`` (counters and histograms cheap enough for the request
path, gauges read at scrape time, rendered with prometheus-client), ``remoting`` (the rpc latency histogram),
``exporter`` (the HTTP endpoint on the node's event loop).

May import: ``broker.common`` and ``broker.remoting``; the broker and the NameServer import this room.
"""

from broker.metrics.config import METRICS_KEYS, MetricsConfig, MetricsExporterType, parse_metrics_config

__all__ = ["METRICS_KEYS", "MetricsConfig", "MetricsExporterType", "parse_metrics_config"]
