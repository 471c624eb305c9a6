"""Custom headers: field-to-wire names, Java's defaults, and RpcRequestHeader's ``bname`` defined once."""

from __future__ import annotations

import dataclasses

import pytest

from broker.remoting import headers
from broker.remoting.headers import (
    HeaderError,
    PullMessageRequestHeader,
    RpcRequestHeader,
    SendMessageRequestHeader,
    TopicQueueHeader,
)


def test_bname_is_written_after_the_request_fields() -> None:
    header = SendMessageRequestHeader("pg", "T", "TBW102", 4, 1, 0, 1700000000000, 0, properties="", bname="broker-a")
    assert list(header.to_ext())[-1] == "bname"
    v2 = header.to_ext(SendMessageRequestHeader.V2_WIRE)
    assert list(v2.items())[-1] == ("n", "broker-a") and list(v2)[:3] == ["a", "b", "c"]
    assert TopicQueueHeader("T", 0).to_ext() == {"topic": "T", "queueId": "0"}  # no bname: nothing written


def test_bname_is_read_back_and_keyword_only() -> None:
    ext = TopicQueueHeader("T", 3, True, bname="broker-b").to_ext()
    assert TopicQueueHeader.from_ext(ext) == TopicQueueHeader("T", 3, True, bname="broker-b")
    with pytest.raises(TypeError):
        TopicQueueHeader("T", 3, True, "broker-b")  # type: ignore[misc]


def test_bname_is_spelled_once() -> None:
    """Every header that carries ``bname`` gets it from RpcRequestHeader."""
    for header in (getattr(headers, name) for name in headers.__all__):
        if isinstance(header, type) and dataclasses.is_dataclass(header) and issubclass(header, headers.Header):
            names = [f.name for f in dataclasses.fields(header)]
            assert ("bname" in names) == issubclass(header, RpcRequestHeader), header.__name__
            assert "bname" not in vars(header).get("__annotations__", {}) or header is RpcRequestHeader


def test_required_fields_are_javas_cfnotnull() -> None:
    with pytest.raises(HeaderError, match="the custom field <consumerGroup> is null"):
        PullMessageRequestHeader.from_ext({"topic": "T"})
