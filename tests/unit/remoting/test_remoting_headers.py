"""Custom headers: field-to-wire names, Java's defaults, and RpcRequestHeader's ``bname`` defined once."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.remoting import headers
from broker.remoting.headers import (
    HeaderError,
    PullMessageRequestHeader,
    RpcRequestHeader,
    SendMessageRequestHeader,
    TopicQueueHeader,
    admin,
    base,
    message,
    namesrv,
    route,
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


HEADER_CLASSES = sorted({cls for module in (admin, base, message, namesrv, route) for cls in vars(module).values()
                         if isinstance(cls, type) and dataclasses.is_dataclass(cls) and issubclass(cls, headers.Header)
                         and cls.__module__ == module.__name__}, key=lambda cls: cls.__qualname__)
WIRES = [(cls, None) for cls in HEADER_CLASSES] + [(SendMessageRequestHeader, SendMessageRequestHeader.V2_WIRE)]
# what a peer may put in a field: numbers, booleans in any case, junk, non-ASCII, signs and spaces int() accepts
RAW_VALUES = st.one_of(st.integers(-2**63, 2**63).map(str), st.sampled_from(["true", "TRUE", "false", "", " 7", "+3",
                                                                             "1_0", "x", "٣"]), st.text(max_size=8))


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except HeaderError as err:
        return "error", str(err)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_generated_header_code_matches_the_field_loop(data: st.DataObject) -> None:
    """``from_ext`` and ``to_ext`` run code generated per class; the generic loop is the spec it must match (same
    header or the same error), for every header class and for SEND_MESSAGE_V2's one-letter names."""
    cls, wire = data.draw(st.sampled_from(WIRES))
    fields = base._fields_of(cls, wire)
    present = data.draw(st.lists(st.sampled_from(fields), unique=True)) if fields else []
    ext = {f.wire: data.draw(RAW_VALUES) for f in present}
    got, expected = _outcome(cls.from_ext, ext, wire), _outcome(base._parse_loop, cls, fields, ext)
    assert got == expected
    if got[0] == "ok":
        assert got[1].to_ext(wire) == base._write_loop(fields, got[1])


def test_generated_writer_formats_like_format() -> None:
    """A field holding another type than its annotation is written as ``_format`` writes it."""
    header = SendMessageRequestHeader("pg", "T", "TBW102", True, 1, 0, 1700000000000, 0, properties=7)  # type: ignore[arg-type]
    fields = base._fields_of(SendMessageRequestHeader, None)
    assert header.to_ext() == base._write_loop(fields, header)
    assert header.to_ext()["defaultTopicQueueNums"] == "true" and header.to_ext()["properties"] == "7"
