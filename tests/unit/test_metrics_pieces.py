"""The metrics' pieces without a server: their settings (parsed once, bad ones named), the counters and histograms
as Prometheus reads them, a send's message type, and the Grafana dashboard in conf/grafana, every expression of
which must name a metric rmq exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.common.errors import ConfigError
from broker.metrics import MetricsConfig, MetricsExporterType
from broker.metrics import names as n
from broker.metrics.instruments import MetricsRegistry
from broker.namesrv.config import load_namesrv_config
from broker.server.broker_metrics import message_type
from broker.server.config import format_config, load_broker_config

DASHBOARD = Path(__file__).resolve().parents[2] / "conf" / "grafana" / "rmq.json"


@pytest.mark.parametrize(("key", "raw", "says"), [
    ("metricsExporterType", "PROMETHEUS", "bad value for metricsExporterType: 'PROMETHEUS'"),
    ("metricsExporterType", "OTLP_GRPC", "metricsExporterType=OTLP_GRPC is refused: rmq exports Prometheus"),
    ("metricsExporterType", "3", "metricsExporterType=3 is refused"),
    ("metricsPromExporterPort", "70000", "bad value for metricsPromExporterPort: 70000"),
    ("metricsPromExporterPort", "http", "bad value for metricsPromExporterPort: 'http'"),
    ("metricsLabel", "region=eu", "'region=eu' is not label:value"),
    ("metricsLabel", "cluster:x", "cluster is set by rmq itself"),
    ("enableRequestMetrics", "yes", "bad value for enableRequestMetrics: 'yes'"),
])
def test_a_bad_setting_names_itself(key: str, raw: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_broker_config(None, {key: raw})
    with pytest.raises(ConfigError, match=says):
        load_namesrv_config(None, {key: raw})


def test_the_keys_are_read_once_and_printed_as_apache_names_them(caplog: pytest.LogCaptureFixture) -> None:
    broker, _ = load_broker_config(None, {"metricsExporterType": "2", "metricsPromExporterPort": "9557",
                                          "metricsLabel": "region:eu,env:prod", "metricsInDelta": "true",
                                          "enableLagAndDlqMetrics": "false", "enableTransactionMetrics": "false"})
    metrics = broker.metrics
    assert (metrics.metrics_exporter_type, metrics.metrics_prom_exporter_port, metrics.enabled) == (
        MetricsExporterType.PROM, 9557, True)
    assert metrics.labels() == {"region": "eu", "env": "prod", "aggregation": "delta"}
    assert not metrics.enable_lag_and_dlq_metrics and not metrics.enable_transaction_metrics
    assert metrics.enable_request_metrics
    assert metrics.host("10.0.0.7") == "10.0.0.7"  # blank metricsPromExporterHost: brokerIP1
    printed = format_config(broker, _)
    assert "metricsExporterType=PROM\n" in printed and "metricsPromExporterPort=9557\n" in printed
    assert "metrics" not in caplog.text  # keys rmq acts on are not warned about
    assert load_broker_config(None, {})[0].metrics == MetricsConfig()  # Apache's default: DISABLE, port 5557
    assert MetricsConfig().metrics_prom_exporter_port == 5557 and not MetricsConfig().enabled
    namesrv = load_namesrv_config(None, {"metricsExporterType": "PROM"}).updated({"metricsPromExporterPort": "1"})
    assert (namesrv.metrics.enabled, namesrv.metrics.metrics_prom_exporter_port) == (True, 1)
    assert "metricsExporterType" not in namesrv.extra


def test_counters_and_histograms_read_as_prometheus_reads_them() -> None:
    registry = MetricsRegistry({"node_type": "broker", "cluster": "C"}, "broker-meter")
    sent = registry.counter(n.MESSAGES_IN)
    sizes = registry.histogram(n.MESSAGE_SIZE)
    registry.counter(n.MESSAGES_OUT)  # nothing recorded: not on the page, as Apache's
    registry.gauge(n.TOPIC_NUMBER, lambda: [((), 7)])
    key = ("T", "normal", "false")
    sent.add(key, 3)
    sent.add(key, 2)
    for size in (1024, 1025, 5 * 1024 * 1024):  # a bound is in its own bucket (le), past the last in +Inf
        sizes.observe(key, size)
    page = registry.render().decode()
    families = {family.name: family for family in text_string_to_metric_families(page)}
    assert list(families) == ["rocketmq_message_size", "rocketmq_messages_in", "rocketmq_topic_number", "target_info"]
    assert page.rstrip().endswith("target_info 1.0")
    (count,) = families["rocketmq_messages_in"].samples
    assert (count.name, count.value) == ("rocketmq_messages_in_total", 5)
    assert count.labels == {"cluster": "C", "is_system": "false", "message_type": "normal", "node_type": "broker",
                            "otel_scope_name": "broker-meter", "topic": "T"}
    assert '# HELP rocketmq_messages_in_total default view for counter.' in page
    assert "# HELP rocketmq_message_size Incoming messages size" in page
    buckets = {s.labels["le"]: s.value for s in families["rocketmq_message_size"].samples if s.name.endswith("_bucket")}
    assert buckets == {"1024.0": 1, "4096.0": 2, "524288.0": 2, "1048576.0": 2, "2097152.0": 2, "4194304.0": 2,
                       "+Inf": 3}
    totals = {s.name: s.value for s in families["rocketmq_message_size"].samples if not s.name.endswith("_bucket")}
    assert totals == {"rocketmq_message_size_count": 3, "rocketmq_message_size_sum": 1024 + 1025 + 5 * 1024 * 1024}


@pytest.mark.parametrize(("props", "kind"), [
    ({}, "normal"),
    ({"TRAN_MSG": "TRUE", "__SHARDINGKEY": "k"}, "transaction"),
    ({"__SHARDINGKEY": "k", "DELAY": "3"}, "fifo"),
    ({"DELAY": "3"}, "delay"),
    ({"TIMER_DELIVER_MS": "1"}, "delay"),
    ({"TRAN_MSG": "false"}, "normal"),
])
def test_a_sends_message_type_is_apaches(props: dict[str, str], kind: str) -> None:
    assert message_type(props) == kind


def test_every_dashboard_expression_names_a_metric_rmq_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = {name for spec in (*n.BROKER_METRICS, *n.NAMESRV_METRICS) for name in n.series_names(spec)}
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs += [variable["query"]["query"] for variable in dashboard["templating"]["list"]
              if isinstance(variable.get("query"), dict)]
    assert len(exprs) > 25
    named = {expr: set(re.findall(r"\brocketmq_[a-z_]+", expr)) for expr in exprs}
    assert all(named.values()), [expr for expr, found in named.items() if not found]
    assert {expr: found - exported for expr, found in named.items() if found - exported} == {}
    covered = set().union(*named.values())
    shown_nowhere = {spec.name for spec in n.BROKER_METRICS if not set(n.series_names(spec)) & covered}
    assert shown_nowhere <= {n.CONSUMER_INFLIGHT_MESSAGES.name, n.CONSUMER_QUEUEING_LATENCY.name,
                             n.BROKER_PERMISSION.name}  # 0 / the lag's twin for non-pop consumers; a constant
