"""The frame codec against frames built by hand with struct (anchors.md §5.1), fed whole, split and corrupted."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common.errors import LocalProtocolError, MalformedFrame, RemoteProtocolError
from broker.remoting.codes import SerializeType
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, Frame, FrameDecoder, encode_frame
from tests.unit.remoting.remoting_helpers import raw_frame

HEADER = b'{"code":10,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":0}'


def test_encode_frame_matches_the_hand_built_layout() -> None:
    assert encode_frame(SerializeType.JSON, HEADER, b"body") == raw_frame(HEADER, b"body")
    assert encode_frame(SerializeType.ROCKETMQ, b"\x01\x02", b"") == (
        struct.pack(">i", 4 + 2)  # length: marker + header
        + bytes([1, 0, 0, 2])  # marker: ROCKETMQ in the top byte, header length 2 below
        + b"\x01\x02"
    )


def test_max_frame_length_default_is_javas_16_mib() -> None:
    assert DEFAULT_MAX_FRAME_LENGTH == 16777216


def test_decode_whole_frames_in_one_feed() -> None:
    data = raw_frame(HEADER, b"body") + raw_frame(b"\x00" * 21, b"", serialize_type=1) + raw_frame(b"", b"")
    assert FrameDecoder().feed(data) == [
        Frame(SerializeType.JSON, HEADER, b"body"),
        Frame(SerializeType.ROCKETMQ, b"\x00" * 21, b""),
        Frame(SerializeType.JSON, b"", b""),
    ]


def test_decode_byte_by_byte_keeps_the_partial_tail() -> None:
    decoder = FrameDecoder()
    data = raw_frame(HEADER, b"body") * 2
    out = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
        assert decoder.buffered == (i + 1) % (len(data) // 2)
    assert out == [Frame(SerializeType.JSON, HEADER, b"body")] * 2


@given(
    frames=st.lists(
        st.tuples(st.sampled_from(list(SerializeType)), st.binary(max_size=40), st.binary(max_size=40)), max_size=6
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8),
)
def test_any_split_of_the_stream_yields_the_same_frames(frames, cuts) -> None:
    data = b"".join(encode_frame(t, h, b) for t, h, b in frames)
    decoder = FrameDecoder()
    out = []
    start = 0
    for cut in sorted(c for c in cuts if c <= len(data)) + [len(data)]:
        out += decoder.feed(data[start:cut])
        start = cut
    assert out == [Frame(t, h, b) for t, h, b in frames]
    assert decoder.buffered == 0


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (struct.pack(">i", 3), "frame length 3 is less than"),
        (struct.pack(">i", -1), "frame length -1 is less than"),
        (struct.pack(">i", 0), "frame length 0 is less than"),
        (struct.pack(">i", DEFAULT_MAX_FRAME_LENGTH - 3), "exceeds the maximum frame length 16777216"),
        (struct.pack(">i", 2**31 - 1), "exceeds the maximum frame length"),
        (struct.pack(">ii", 10, 7), "header length 7 exceeds frame length 10 - 4"),
        (struct.pack(">ii", 10, (2 << 24) | 1), "unknown serialize type 2"),
        (struct.pack(">iI", 10, (0xFF << 24) | 1), "unknown serialize type 255"),
    ],
)
def test_malformed_prefixes_are_rejected_before_the_frame_arrives(data: bytes, fragment: str) -> None:
    # Only the prefix is fed: a 2 GiB announcement must fail at once, not after buffering 2 GiB.
    with pytest.raises(MalformedFrame, match=fragment) as raised:
        FrameDecoder().feed(data)
    assert isinstance(raised.value, RemoteProtocolError)
    assert fragment.split()[0] in raised.value.reason


def test_the_largest_allowed_frame_counts_the_length_field_like_netty() -> None:
    decoder = FrameDecoder(max_frame_length=64)
    header = b"h" * 10
    ok = raw_frame(header, b"b" * (64 - 8 - 10))  # 64 bytes with the length field: allowed
    assert len(ok) == 64
    assert decoder.feed(ok) == [Frame(SerializeType.JSON, header, b"b" * 46)]
    with pytest.raises(MalformedFrame, match="frame of 65 bytes exceeds the maximum frame length 64"):
        decoder.feed(raw_frame(header, b"b" * 47))


def test_frames_before_the_bad_one_are_handed_over_and_the_decoder_stays_broken() -> None:
    decoder = FrameDecoder()
    good = raw_frame(HEADER, b"1") + raw_frame(HEADER, b"2")
    with pytest.raises(MalformedFrame) as raised:
        decoder.feed(good + struct.pack(">ii", 4, 9 << 24))
    assert [f.body for f in raised.value.frames] == [b"1", b"2"]
    with pytest.raises(MalformedFrame) as again:
        decoder.feed(raw_frame(HEADER))
    assert again.value is raised.value


def test_max_frame_length_must_hold_a_prefix_and_fit_an_int() -> None:
    with pytest.raises(ValueError, match="max_frame_length 7"):
        FrameDecoder(max_frame_length=7)
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_length=2**31)


def test_header_longer_than_24_bits_cannot_be_encoded() -> None:
    with pytest.raises(LocalProtocolError, match="24-bit"):
        encode_frame(SerializeType.JSON, bytes(1 << 24))


def test_missing_counts_what_the_begun_frame_lacks_and_drain_hands_it_over() -> None:
    frame = encode_frame(SerializeType.JSON, b'{"code":0}', b"z" * 1000)
    decoder = FrameDecoder()
    assert decoder.missing() == 0
    assert decoder.feed(frame[:3]) == [] and decoder.missing() == 0  # the length field is not all here
    assert decoder.feed(frame[3:100]) == [] and decoder.missing() == len(frame) - 100
    head = decoder.drain()
    assert head == frame[:100] and decoder.buffered == 0 and decoder.missing() == 0
    (whole,) = decoder.feed(bytearray(head + frame[100:]))  # completed by the caller, cut from its own buffer
    assert whole.body == b"z" * 1000
    broken = FrameDecoder()
    with pytest.raises(MalformedFrame):
        broken.feed(struct.pack(">i", -5))
    assert broken.missing() == 0  # not a legal length: nothing to wait for


def test_feed_owned_cuts_bodies_as_views_of_the_buffer_handed_over() -> None:
    """A buffer handed over for good (the blocking client's buffer of one big frame): the body is a view of it, not
    a copy; the header is still bytes, and bytes that complete what was buffered before are copied as by ``feed``."""
    frame = encode_frame(SerializeType.JSON, b'{"code":0}', b"z" * 1000)
    buffer = bytearray(frame + frame[:50])
    decoder = FrameDecoder()
    (whole,) = decoder.feed_owned(buffer)
    assert type(whole.body) is memoryview and whole.body == b"z" * 1000 and whole.header == b'{"code":0}'
    buffer[len(frame) - 1] = ord("y")  # the same memory: nothing was copied
    assert whole.body[-1:] == b"y"
    assert decoder.buffered == 50  # the next frame's head is kept (copied) for the bytes to come
    (rest,) = decoder.feed_owned(bytearray(frame[50:]))
    assert type(rest.body) is bytes and rest.body == b"z" * 1000  # cut from the decoder's own buffer
