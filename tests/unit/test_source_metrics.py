"""Kafka's offsets-behind-latest figures of the streaming source, and reading them back from a query's progress:
PySpark's SourceProgress (latestOffset as JSON text), an object with that attribute, or the progress's JSON parsed
(latestOffset a dict). The figures in a real query: tests/connector/test_source_stream.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

from broker.client.message import MessageQueue
from connector.offsets import to_json
from connector.source_metrics import METRICS_KEY, latest_offsets, offsets_behind_latest, source_metrics

A0, A1, B0 = MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)


def test_figures_as_kafka_computes_them() -> None:
    latest = {A0: 10, A1: 7, B0: 3}
    assert offsets_behind_latest({A0: 4, A1: 7, B0: 2}, latest) == {
        "minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "6", "avgOffsetsBehindLatest": str(7 / 3)}
    # a queue the batch does not name (it appeared after planning) has read nothing of what latest says
    assert offsets_behind_latest({A0: 10}, latest)["maxOffsetsBehindLatest"] == "0"
    assert offsets_behind_latest({}, {}) == {}


def test_read_back_from_either_form_of_a_progress() -> None:
    figures = offsets_behind_latest({A0: 1, B0: 3}, {A0: 5, B0: 3})
    reported = {**to_json({A0: 5, B0: 3}), METRICS_KEY: figures}
    as_spark = {"latestOffset": json.dumps(reported)}  # query.lastProgress["sources"][0], a dict subclass
    as_parsed = {"latestOffset": reported}  # json.loads(query.lastProgress.json)["sources"][0]
    as_object = SimpleNamespace(latestOffset=json.dumps(reported))
    for source in (as_spark, as_parsed, as_object):
        assert source_metrics(source) == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "4",
                                          "avgOffsetsBehindLatest": "2.0"}
        assert latest_offsets(source) == {"T": {"a": {"0": 5}, "b": {"0": 3}}}
    for nothing in ({"latestOffset": None}, SimpleNamespace(latestOffset=None), {}):
        assert source_metrics(nothing) == {} and latest_offsets(nothing) == {}
