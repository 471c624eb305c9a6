"""The streaming source's per-query metrics, named and computed as Spark's Kafka source computes its own:
``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and ``avgOffsetsBehindLatest``.

For each queue, the latest offset seen when the micro-batch was planned minus the batch's end offset; then the
minimum, maximum and mean over the queues, as strings (min and max integers, the mean a float), as in Kafka's
``KafkaMicroBatchStream.metrics``. Under Trigger.AvailableNow "latest" is the target fixed when the run began, as for
Kafka.

Where they travel. Kafka's figures land in ``SourceProgress.metrics``, which Spark fills only for a source that
implements ``ReportsSourceMetrics``. In PySpark 4.2 no Python data source does: the JVM classes that stand for a
Python stream reader (``PythonMicroBatchStream`` and the admission-control and Trigger.AvailableNow variants
``PythonScan`` picks) implement ``MicroBatchStream``, ``SupportsAdmissionControl``, ``SupportsTriggerAvailableNow``
and ``AcceptsLatestSeenOffset`` but not it, and ``DataSourceStreamReader`` has no ``metrics()`` to forward; so that
map stays empty. What a Python reader does report is ``reportLatestOffset()``, which Spark calls right after
``latestOffset(start, limit)`` when it plans a batch, and uses for nothing but ``SourceProgress.latestOffset``: it
never plans with it nor writes it to the checkpoint. So the figures go there, beside the offsets, under METRICS_KEY,
a key no topic can have ('$' is not allowed in RocketMQ topic names): ``latestOffset[topic][broker][queue]`` reads
as before, and ``source_metrics`` reads the figures back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from broker.client.message import MessageQueue

METRICS_KEY = "$metrics"
NAMES = ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest")


def offsets_behind_latest(end: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int]) -> dict[str, str]:
    """Kafka's three figures for a batch ending at ``end`` while the queues' latest offsets were ``latest`` (a queue
    the batch does not name has read nothing of it); {} without queues."""
    behind = [offset - end.get(mq, offset) for mq, offset in latest.items()]
    if not behind:
        return {}
    return dict(zip(NAMES, (str(min(behind)), str(max(behind)), str(sum(behind) / len(behind))), strict=True))


def _latest_offset(source_progress: Any) -> dict[str, Any]:
    """``latestOffset`` of a SourceProgress (a listener event's object: JSON text) or of its dict form
    (``query.lastProgress["sources"][i]``: parsed already); {} when Spark had none."""
    if isinstance(source_progress, Mapping):
        value = source_progress.get("latestOffset")
    else:
        value = getattr(source_progress, "latestOffset", None)
    if isinstance(value, str):
        value = json.loads(value) if value.strip() not in ("", "null") else None
    return dict(value) if isinstance(value, Mapping) else {}


def source_metrics(source_progress: Any) -> dict[str, str]:
    """The three figures of one source of a query progress, as Kafka's ``SourceProgress.metrics`` would hold them;
    {} when the progress has none (a trigger that planned no batch, another source)."""
    return dict(_latest_offset(source_progress).get(METRICS_KEY) or {})


def latest_offsets(source_progress: Any) -> dict[str, Any]:
    """The latest offsets of one source of a query progress, ``{topic: {brokerName: {queueId: offset}}}``."""
    latest = _latest_offset(source_progress)
    latest.pop(METRICS_KEY, None)
    return latest
