"""The NameServer's Prometheus metrics, on the broker's keys (``metricsExporterType=PROM`` and the others of
broker/metrics/config.py, in namesrv.conf).

Apache's NameServer exports no metrics, so these are rmq's choice: the rpc latency of every request it answers
(Apache's ``rocketmq_rpc_latency``, labelled as the broker labels it), and from its route table the brokers alive
per cluster and the topics it routes. Every series carries ``node_type="namesrv"`` and ``node_id`` (the address it
listens on).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.metrics import names as n
from broker.metrics.exporter import PrometheusEndpoint
from broker.metrics.instruments import LabelValues, MetricsRegistry
from broker.metrics.remoting import RpcLatency

if TYPE_CHECKING:
    from broker.namesrv.server import NamesrvController


class NamesrvMetricsManager:
    """Made with the controller; ``start`` once its remoting server listens (its address is the node id)."""

    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller
        metrics = controller.config.metrics
        labels = {n.LABEL_NODE_TYPE: n.NODE_TYPE_NAMESRV, n.LABEL_NODE_ID: "", **metrics.labels()}
        self.registry = registry = MetricsRegistry(labels, n.NAMESRV_METER)
        routes = controller.route_info_manager
        registry.gauge(n.NAMESRV_TOPIC_NUMBER, lambda: [((), len(routes.topic_queue_table))])
        registry.gauge(n.NAMESRV_BROKER_NUMBER, self._brokers)
        if metrics.enable_remoting_metrics:  # from the first connection on: brokers keep theirs open
            controller.remoting_server.set_request_observer(RpcLatency(registry).record)
        self.endpoint = PrometheusEndpoint(metrics.host(controller.config.bind_address),
                                           metrics.metrics_prom_exporter_port, registry.render)

    async def start(self) -> None:
        """Serve the endpoint; ConfigError when its port cannot be bound."""
        self.registry.const_labels[n.LABEL_NODE_ID] = self.controller.address
        await self.endpoint.start()

    async def shutdown(self) -> None:
        await self.endpoint.stop()

    def _brokers(self) -> Iterable[tuple[LabelValues, int]]:
        """Live brokers per cluster."""
        return Counter((info.cluster_name,) for info in list(self.controller.route_info_manager.broker_live_table)
                       ).items()
