"""The HA wire's decoders: reports and frames out of a byte stream cut anywhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.common.errors import HAProtocolError
from broker.replication.protocol import REPORT, TRANSFER_HEADER, ReportDecoder, TransferDecoder, heartbeat


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


@settings(max_examples=200, deadline=None)
@given(offsets=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=6), cuts=st.lists(st.integers(0, 100)))
def test_the_master_reads_the_newest_whole_report(offsets, cuts):
    decoder = ReportDecoder()
    seen = [decoder.received(chunk) for chunk in chunks(b"".join(REPORT.pack(o) for o in offsets), cuts)]
    assert [s for s in seen if s is not None][-1] == offsets[-1]


@settings(max_examples=200, deadline=None)
@given(bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=8), cuts=st.lists(st.integers(0, 5000)))
def test_the_slave_reads_every_frame_whatever_the_cuts(bodies, cuts):
    stream, offset, sent = b"", 1000, []
    for body in bodies:
        stream += TRANSFER_HEADER.pack(offset, len(body)) + body
        sent.append((offset, body))
        offset += len(body)
    decoder = TransferDecoder(size=4096)
    got = []
    for chunk in chunks(stream, cuts):
        room = decoder.receive_into()
        room[:len(chunk)] = chunk
        decoder.received(len(chunk))
        got += [(o, bytes(b)) for o, b in decoder.frames()]
    assert got == sent


def test_a_heartbeat_is_a_frame_without_data():
    decoder = TransferDecoder(size=64)
    data = heartbeat(4096)
    decoder.receive_into()[:len(data)] = data
    decoder.received(len(data))
    assert [(o, bytes(b)) for o, b in decoder.frames()] == [(4096, b"")]


@pytest.mark.parametrize("header", [TRANSFER_HEADER.pack(-1, 10), TRANSFER_HEADER.pack(0, -3),
                                    TRANSFER_HEADER.pack(0, 10**6)])
def test_a_frame_header_that_cannot_be_right_is_an_error(header):
    decoder = TransferDecoder(size=4096)
    decoder.receive_into()[:len(header)] = header
    decoder.received(len(header))
    with pytest.raises(HAProtocolError):
        list(decoder.frames())
