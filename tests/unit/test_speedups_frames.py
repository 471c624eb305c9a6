"""The frame cutter, the ROCKETMQ command maker and its frame writer in C (``_speedups.cut_frames``,
``rocketmq_command``, ``rocketmq_frame``) against their Python twins (``frame._cut_frames_py``,
``command._rocketmq_command_py``, ``command._rocketmq_frame_py``): the same frames, commands, ends, faults and bytes
on random streams and commands, whole, cut, damaged or malformed."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups  # built in place by pip install -e .
from broker.remoting import command, frame
from broker.remoting.codes import SerializeType
from broker.remoting.command import (
    RemotingCommand,
    _encode_rocketmq_header_py,
    _rocketmq_command_py,
    _rocketmq_frame_py,
)
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, Frame, FrameDecoder, _cut_frames_py, encode_frame
from tests.unit.test_speedups import encode_either, header_fields


def test_the_remoting_path_uses_the_c_loops():
    assert frame.cut_frames is _speedups.cut_frames
    assert command.rocketmq_command is _speedups.rocketmq_command
    assert command.rocketmq_frame is _speedups.rocketmq_frame


frames = st.lists(st.tuples(st.sampled_from(list(SerializeType)), st.binary(max_size=40), st.binary(max_size=60)),
                  max_size=5)


@settings(max_examples=500, deadline=None)
@given(parts=frames, tail=st.binary(max_size=12), cut=st.integers(0, 400), flips=st.lists(
    st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3), max_length=st.sampled_from(
    [8, 12, 30, 100, DEFAULT_MAX_FRAME_LENGTH]), buffer_type=st.sampled_from([bytes, bytearray, memoryview]))
def test_cut_frames_c_and_python_cut_the_same(parts, tail, cut, flips, max_length, buffer_type):
    data = bytearray(b"".join(encode_frame(*part) for part in parts) + tail)
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    for stream in (bytes(data), bytes(data[: cut % (len(data) + 1)])):
        c = _speedups.cut_frames(buffer_type(stream), max_length)
        assert c == _cut_frames_py(stream, max_length)
        assert all(type(item) is Frame and type(item.body) is bytes for item in c[0])


def test_cut_frames_names_each_fault_as_the_decoder_does():
    def frame_of(length: int, marker: int) -> bytes:
        return struct.pack(">ii", length, marker) + b"x" * 8

    good = encode_frame(SerializeType.JSON, b"{}", b"body")
    for bad in (frame_of(3, 0), frame_of(100, 0), frame_of(12, 9), frame_of(12, 0x05000000), b"\xff\xff\xff\xff"):
        frames, end, fault = _speedups.cut_frames(good + bad, 64)
        assert (frames, end) == ([Frame(SerializeType.JSON, b"{}", b"body")], len(good)) and fault
        assert (frames, end, fault) == _cut_frames_py(good + bad, 64)
        decoder = FrameDecoder(64)
        try:
            decoder.feed(good + bad)
        except Exception as err:  # noqa: BLE001 - the decoder's MalformedFrame, checked by its text
            assert err.reason == fault and err.frames == frames
        else:
            raise AssertionError("no MalformedFrame")


@settings(max_examples=500, deadline=None)
@given(fields=header_fields, cut=st.integers(0, 200),
       flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3), body=st.binary(max_size=20))
def test_rocketmq_command_c_and_python_make_the_same(fields, cut, flips, body):
    header = encode_either(_encode_rocketmq_header_py, fields)
    if header == "refused":
        return
    damaged = bytearray(header[: len(header) - cut % (len(header) + 1)])
    for at, value in flips:
        if damaged:
            damaged[at % len(damaged)] = value
    for data in (header, bytes(damaged)):
        c = _speedups.rocketmq_command(data, body)
        python = _rocketmq_command_py(data, body)
        assert c == python
        if c is not None:
            assert type(c) is RemotingCommand and c.language is python.language


def test_rocketmq_command_keeps_a_body_view_and_an_unknown_language():
    header = bytearray(_encode_rocketmq_header_py(310, 0, 475, 7, 0, "r", {"b": "TopicTest"}))
    header[2] = 200  # no LanguageCode has this number
    body = memoryview(b"xbodyx")[1:5]
    c = _speedups.rocketmq_command(bytes(header), body)
    assert c == _rocketmq_command_py(bytes(header), body)
    assert c.body is body and c.language.name == "OTHER" and c.remark == "r"


@settings(max_examples=500, deadline=None)
@given(fields=header_fields, body=st.binary(max_size=20), plain_language=st.booleans())
def test_rocketmq_frame_c_writes_what_python_writes_or_leaves_it_to_python(fields, body, plain_language):
    code, language, version, opaque, flag, remark, ext_fields = fields
    cmd = RemotingCommand(code, int(language) if plain_language else language, version, opaque, flag, remark,
                          ext_fields, body, SerializeType.ROCKETMQ)
    c = _speedups.rocketmq_frame(cmd)
    python = encode_either(lambda: _rocketmq_frame_py(cmd), ())
    if c is None:
        assert plain_language or python == "refused" or any("\ud800" <= ch <= "\udfff" for ch in str(fields))
    else:
        assert not plain_language and c == python and type(c[0]) is bytes and c[1] is body


def test_rocketmq_frame_leaves_other_commands_to_python():
    cmd = RemotingCommand(310, body=b"x", serialize_type=SerializeType.ROCKETMQ)
    assert _speedups.rocketmq_frame(cmd) == command._rocketmq_frame_py(cmd) == command.encode_parts(cmd)
    for other in (RemotingCommand(310, body=b"x"), RemotingCommand(310, body=(b"x", b"y"), serialize_type=1),
                  RemotingCommand(310, body=bytearray(b"x"), serialize_type=SerializeType.ROCKETMQ), "not one"):
        assert _speedups.rocketmq_frame(other) is None
