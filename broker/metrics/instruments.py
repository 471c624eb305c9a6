"""Counters and histograms cheap enough for the request path, and the registry that turns them (and gauges read at
scrape time) into Prometheus' text format through prometheus-client.

A request adds to a counter or a histogram with one dict look-up keyed by its label values (a tuple), and a
histogram finds its bucket with ``bisect``: no lock (everything runs on the server's event loop), no label objects,
nothing per message. Labels become names, and buckets cumulative, only when Prometheus scrapes. Gauges are callbacks
run at scrape time over what the broker keeps anyway (Apache's observable gauges).

Examples:
    >>> registry = MetricsRegistry({"cluster": "DefaultCluster"}, "broker-meter")
    >>> sent = registry.counter(MESSAGES_IN)
    >>> sent.add(("TopicTest", "normal", "false"), 3)
    >>> b"rocketmq_messages_in_total{cluster=" in registry.render()
    True
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from itertools import accumulate

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from broker.metrics.names import LABEL_SCOPE, TARGET_INFO, Kind, MetricSpec

LabelValues = tuple[str, ...]
GaugeCallback = Callable[[], Iterable[tuple[LabelValues, float]]]
"""Yields (label values in the spec's label order, value) pairs when Prometheus scrapes."""


class _Instrument:
    """What a counter and a histogram share: their spec and, when their keys are not yet label values (request codes
    as ints), ``labels_of`` turning a key into them at scrape time."""

    __slots__ = ("spec", "labels_of")

    def __init__(self, spec: MetricSpec, labels_of: Callable[[tuple], LabelValues] | None = None) -> None:
        self.spec = spec
        self.labels_of = labels_of

    def _named(self, items: dict) -> list[tuple[LabelValues, object]]:
        labels_of = self.labels_of
        pairs = list(items.items())
        return pairs if labels_of is None else [(labels_of(key), value) for key, value in pairs]


class CounterVec(_Instrument):
    """A monotonic sum per label values."""

    __slots__ = ("values",)

    def __init__(self, spec: MetricSpec, labels_of: Callable[[tuple], LabelValues] | None = None) -> None:
        super().__init__(spec, labels_of)
        self.values: dict[tuple, int] = {}

    def add(self, key: tuple, amount: int) -> None:
        values = self.values
        values[key] = values.get(key, 0) + amount

    def samples(self) -> list[tuple[LabelValues, object]]:
        return self._named(self.values)


class HistogramVec(_Instrument):
    """Per label values: a count per bucket (``value <= bound``; the last is +Inf) and the sum, as OpenTelemetry's
    explicit-bucket histograms keep them."""

    __slots__ = ("bounds", "series")

    def __init__(self, spec: MetricSpec, labels_of: Callable[[tuple], LabelValues] | None = None) -> None:
        super().__init__(spec, labels_of)
        self.bounds = spec.buckets
        self.series: dict[tuple, list[int]] = {}  # bucket counts, then the sum

    def observe(self, key: tuple, value: int) -> None:
        counts = self.series.get(key)
        if counts is None:
            counts = self.series[key] = [0] * (len(self.bounds) + 2)
        counts[bisect_left(self.bounds, value)] += 1
        counts[-1] += value

    def samples(self) -> list[tuple[LabelValues, object]]:
        return self._named(self.series)


class MetricsRegistry:
    """The metrics of one node: instruments and gauge callbacks, rendered with the node's labels on every series.
    ``const_labels`` are the node's labels (cluster, node_type, node_id, metricsLabel's); ``scope`` the OpenTelemetry
    meter name Apache's exporter adds as ``otel_scope_name``."""

    def __init__(self, const_labels: Mapping[str, str], scope: str) -> None:
        self.const_labels = {**const_labels, LABEL_SCOPE: scope}
        self._instruments: list[CounterVec | HistogramVec] = []
        self._gauges: list[tuple[MetricSpec, GaugeCallback]] = []
        self.renders = 0  # pages rendered: a gauge callback can compute what several share once per page
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    def counter(self, spec: MetricSpec, labels_of: Callable[[tuple], LabelValues] | None = None) -> CounterVec:
        counter = CounterVec(spec, labels_of)
        self._instruments.append(counter)
        return counter

    def histogram(self, spec: MetricSpec, labels_of: Callable[[tuple], LabelValues] | None = None) -> HistogramVec:
        histogram = HistogramVec(spec, labels_of)
        self._instruments.append(histogram)
        return histogram

    def gauge(self, spec: MetricSpec, callback: GaugeCallback) -> None:
        self._gauges.append((spec, callback))

    def render(self) -> bytes:
        """The page Prometheus scrapes (text format 0.0.4)."""
        self.renders += 1
        return generate_latest(self._registry)

    # -- prometheus_client's Collector ----------------------------------------------------------------------------

    def collect(self) -> Iterable[Metric]:
        families: list[Metric] = []
        for instrument in self._instruments:
            if isinstance(instrument, HistogramVec):
                families.append(self._histogram_family(instrument))
            else:
                families.append(self._family(instrument.spec, instrument.samples()))
        families += [self._family(spec, callback()) for spec, callback in self._gauges]
        families = sorted((family for family in families if family.samples), key=lambda family: family.name)
        families.append(GaugeMetricFamily(TARGET_INFO.name, TARGET_INFO.help, value=1))
        return families

    def _labelled(self, spec: MetricSpec, samples: Iterable[tuple[LabelValues, object]]
                  ) -> tuple[list[str], list[tuple[list[str], object]]]:
        """The series' label names, sorted as OpenTelemetry's exporter prints them (the node's and the spec's
        together), and each sample's label values in that order with its value."""
        names = [*self.const_labels, *spec.labels]
        order = sorted(range(len(names)), key=names.__getitem__)
        const = tuple(self.const_labels.values())
        rows = [([row[i] for i in order], value) for values, value in samples for row in (const + values,)]
        return [names[i] for i in order], rows

    def _family(self, spec: MetricSpec, samples: Iterable[tuple[LabelValues, object]]) -> Metric:
        names, rows = self._labelled(spec, samples)
        family = (CounterMetricFamily if spec.kind is Kind.COUNTER else GaugeMetricFamily)(spec.name, spec.help_text,
                                                                                          labels=names)
        for values, value in rows:
            family.add_metric(values, value)
        return family

    def _histogram_family(self, histogram: HistogramVec) -> Metric:
        spec = histogram.spec
        names, rows = self._labelled(spec, histogram.samples())
        family = HistogramMetricFamily(spec.name, spec.help_text, labels=names)
        bounds = [f"{float(bound)}" for bound in histogram.bounds] + ["+Inf"]
        for values, counts in rows:
            family.add_metric(values, buckets=list(zip(bounds, accumulate(counts[:-1]), strict=True)),
                              sum_value=counts[-1])
        return family
