"""RemotingCommand's two header encodings against headers built by hand (anchors.md §5.1, what fastjson2 and
RocketMQSerializable were seen to write by tests/java/remoting/RemotingOracle.java), and what Java may send us."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common.errors import LocalProtocolError, MalformedCommand
from broker.remoting import command
from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from broker.remoting.command import (
    REMOTING_VERSION,
    CommandFlag,
    RemotingCommand,
    create_request,
    create_response,
    decode,
    encode,
    next_opaque,
)
from broker.remoting.frame import Frame, FrameDecoder
from tests.unit.remoting.remoting_helpers import raw_frame, rocketmq_header

JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ


def json_frame(header: bytes, body: bytes = b"") -> Frame:
    return Frame(JSON, header, body)


def only_frame(data: bytes) -> Frame:
    (frame,) = FrameDecoder().feed(data)
    return frame


# -- JSON: golden bytes ---------------------------------------------------------------------------------------


def test_json_header_has_javas_keys_in_javas_order() -> None:
    cmd = RemotingCommand(
        code=RequestCode.SEND_MESSAGE_V2,
        language=LanguageCode.JAVA,
        version=475,
        opaque=-7,
        flag=2,
        remark="über",
        ext_fields={"b": "TopicTest", "a": "group"},
        body=b"payload",
    )
    header = (
        '{"code":310,"extFields":{"b":"TopicTest","a":"group"},"flag":2,"language":"JAVA","opaque":-7,'
        '"remark":"über","serializeTypeCurrentRPC":"JSON","version":475}'
    ).encode()
    assert encode(cmd) == raw_frame(header, b"payload")


def test_json_header_leaves_out_null_remark_and_empty_ext_fields() -> None:
    cmd = RemotingCommand(code=0, language=LanguageCode.JAVA, opaque=1, flag=1)
    header = b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":0}'
    assert encode(cmd) == raw_frame(header)
    with_empty_remark = encode(RemotingCommand(code=0, language=LanguageCode.JAVA, opaque=1, flag=1, remark=""))
    assert b'"opaque":1,"remark":"","serializeTypeCurrentRPC"' in with_empty_remark


def fastjson2_escape(text: str) -> str:
    """Escapes as RemotingOracle showed fastjson2 writing them: short forms for \\b \\t \\n \\f \\r, lowercase
    \\u00xx for the other controls, DEL and everything non-ASCII raw."""
    short = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
    return "".join(short.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 else c) for c in text)


ALL_CHARS = "".join(map(chr, range(0x80))) + "é東😀\u2028\u2029\u00a0\ufeff"


def test_json_strings_are_escaped_as_fastjson2_escapes_them() -> None:
    cmd = RemotingCommand(code=1, language=LanguageCode.JAVA, remark=ALL_CHARS, ext_fields={ALL_CHARS: ALL_CHARS})
    escaped = fastjson2_escape(ALL_CHARS)
    header = (
        f'{{"code":1,"extFields":{{"{escaped}":"{escaped}"}},"flag":0,"language":"JAVA","opaque":0,'
        f'"remark":"{escaped}","serializeTypeCurrentRPC":"JSON","version":0}}'
    ).encode()
    assert encode(cmd) == raw_frame(header)
    assert decode(only_frame(encode(cmd))) == cmd


@pytest.mark.parametrize("orjson_or_stdlib", ["orjson", "stdlib"])
def test_both_json_backends_write_and_read_identically(monkeypatch, orjson_or_stdlib) -> None:
    cmd = RemotingCommand(code=1, opaque=5, remark=ALL_CHARS, ext_fields={"k": ALL_CHARS, ALL_CHARS: "v"})
    expected = encode(cmd)
    if orjson_or_stdlib == "stdlib":
        monkeypatch.setattr(command, "_dumps", command._json_dumps)
        monkeypatch.setattr(command, "_loads", json.loads)
    assert encode(cmd) == expected
    assert decode(only_frame(expected)) == cmd


# -- JSON: what Java may send ------------------------------------------------------------------------------


def test_json_fields_java_omits_take_javas_defaults() -> None:
    cmd = decode(json_frame(b"{}", b"x"))
    assert cmd == RemotingCommand(code=0, language=LanguageCode.JAVA, body=b"x", ext_fields={})


def test_json_numbers_may_come_as_strings_and_null() -> None:
    cmd = decode(json_frame(b'{"code":"10","opaque":"-7","flag":"1","version":"3","remark":null,"extFields":null}'))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version, cmd.remark, cmd.ext_fields) == (10, -7, 1, 3, None, {})
    assert cmd.is_response


def test_json_ext_field_values_that_are_not_strings_become_their_json_text() -> None:
    header = b'{"code":10,"extFields":{"a":1,"b":true,"c":null,"d":1.5,"e":[1],"f":{"x":1},"g":"s"}}'
    expected = {"a": "1", "b": "true", "d": "1.5", "e": "[1]", "f": '{"x":1}', "g": "s"}  # null: absent, as in Java
    assert decode(json_frame(header)).ext_fields == expected


def test_json_language_is_a_name_in_any_case_or_a_number_and_unknown_is_other() -> None:
    def language(value: str) -> LanguageCode:
        return decode(json_frame(b'{"language":%s}' % value.encode())).language

    assert language('"GO"') is LanguageCode.GO
    assert language('"python"') is LanguageCode.PYTHON
    assert language("12") is LanguageCode.RUST
    assert language('"COBOL"') is LanguageCode.OTHER
    assert language("99") is LanguageCode.OTHER


def test_json_ignores_unknown_keys_and_the_serialize_type_it_claims() -> None:
    cmd = decode(json_frame(b'{"code":10,"serializeTypeCurrentRPC":"ROCKETMQ","suspended":true,"x":[1]}'))
    assert (cmd.code, cmd.serialize_type) == (10, JSON)


@pytest.mark.parametrize(
    ("header", "fragment", "opaque"),
    [
        (b"", "not valid JSON", None),
        (b'{"code":10', "not valid JSON", None),
        (b'{"code":10} x', "not valid JSON", None),
        (b'{"a":"\xff"}', "not valid JSON", None),
        (b"[]", "is a list, not an object", None),
        (b'"x"', "is a str, not an object", None),
        (b'{"opaque":5,"code":2147483648}', "'code' is 2147483648, not a 32-bit int", 5),
        (b'{"opaque":-2147483649}', "'opaque' is -2147483649", None),
        (b'{"opaque":5,"code":1.5}', "'code' is 1.5", 5),
        (b'{"opaque":5,"code":"0x10"}', "'code' is '0x10'", 5),
        (b'{"opaque":5,"code":true}', "'code' is True", 5),
        (b'{"opaque":5,"version":[1]}', "'version' is [1]", 5),
        (b'{"opaque":5,"language":{}}', "'language' is {}", 5),
        (b'{"opaque":5,"extFields":"x"}', "'extFields' is 'x', not an object", 5),
    ],
)
def test_json_headers_java_cannot_have_sent_are_rejected_by_name(header: bytes, fragment: str, opaque) -> None:
    with pytest.raises(MalformedCommand, match="JSON header") as raised:
        decode(json_frame(header))
    assert fragment in raised.value.reason
    assert raised.value.opaque == opaque


@pytest.mark.parametrize("orjson_or_stdlib", ["orjson", "stdlib"])
@pytest.mark.parametrize("template", [b'{"opaque":5,"extFields":{"a":%s}}', b'{"opaque":5,"remark":%s}',
                                      b'{"opaque":5,"code":%s}', b'{"opaque":5,"extFields":%s}'])
def test_json_nested_beyond_the_stack_is_a_malformed_command(monkeypatch, orjson_or_stdlib, template) -> None:
    """Found by bench/fuzz_preauth.py: arrays nested a thousand deep raised RecursionError (json reading them, json
    writing an ext field's value back as text, or repr in the error message), which closed the connection as an
    internal error with a traceback in the log instead of answering what was wrong."""
    if orjson_or_stdlib == "stdlib":
        monkeypatch.setattr(command, "_loads", json.loads)
    header = template % (b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(MalformedCommand) as raised:
        decode(json_frame(header))
    assert len(raised.value.reason) < 200
    assert "nests deeper" in raised.value.reason or "[[[[...]]]]" in raised.value.reason


def test_malformed_json_response_is_known_as_a_response() -> None:
    with pytest.raises(MalformedCommand) as raised:
        decode(json_frame(b'{"opaque":9,"flag":1,"code":"x"}'))
    assert (raised.value.opaque, raised.value.is_response) == (9, True)


# -- ROCKETMQ: golden bytes ------------------------------------------------------------------------------------


def test_rocketmq_header_matches_rocketmq_serializable() -> None:
    cmd = RemotingCommand(
        code=RequestCode.PULL_MESSAGE,
        language=LanguageCode.PYTHON,
        version=REMOTING_VERSION,
        opaque=-3,
        flag=CommandFlag.ONEWAY,
        remark="hé",
        ext_fields={"topic": "T", "queueId": "3"},
        body=b"\x00\x01",
        serialize_type=ROCKETMQ,
    )
    header = rocketmq_header(11, 3, 515, -3, 2, "hé".encode(), [(b"topic", b"T"), (b"queueId", b"3")])
    assert encode(cmd) == raw_frame(header, b"\x00\x01", serialize_type=1)
    assert decode(only_frame(encode(cmd))) == cmd


def test_rocketmq_empty_remark_and_empty_values_read_back_as_javas_nulls() -> None:
    # Java writes "" and null alike (length 0) and reads length 0 as null: an empty value is an absent one.
    cmd = RemotingCommand(code=1, remark="", ext_fields={"b": "", "a": "x", "": "y"}, serialize_type=ROCKETMQ)
    header = rocketmq_header(1, 3, 0, 0, 0, b"", [(b"b", b""), (b"a", b"x"), (b"", b"y")])
    assert encode(cmd) == raw_frame(header, serialize_type=1)
    back = decode(only_frame(encode(cmd)))
    assert (back.remark, back.ext_fields) == (None, {"a": "x"})


def test_rocketmq_cannot_carry_codes_beyond_a_short() -> None:
    # Java would silently send (short) 200050 == 3442; we refuse instead.
    cmd = create_request(RequestCode.POP_MESSAGE, serialize_type=ROCKETMQ)
    with pytest.raises(LocalProtocolError, match="code 200050"):
        encode(cmd)
    assert decode(only_frame(encode(create_request(RequestCode.POP_MESSAGE)))).code == RequestCode.POP_MESSAGE


def test_rocketmq_decodes_invalid_utf8_as_replacement_chars_like_netty() -> None:
    header = rocketmq_header(1, 0, 0, 0, 0, b"\xff", [(b"k", b"v\xfe")])
    cmd = decode(Frame(ROCKETMQ, header, b""))
    assert (cmd.remark, cmd.ext_fields) == ("\ufffd", {"k": "v\ufffd"})


def test_rocketmq_unknown_language_byte_is_other() -> None:
    assert decode(Frame(ROCKETMQ, rocketmq_header(1, 99, 0, 0, 0), b"")).language is LanguageCode.OTHER


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        (rocketmq_header(1, 0, 0, 7, 0)[:20], "shorter than the 21-byte minimum"),
        (rocketmq_header(1, 0, 0, 7, 0, b"abcdefgh")[:-5], "remark length 8 at byte 13 runs past its end"),
        (rocketmq_header(1, 0, 0, 7, 0)[:13] + b"\xff\xff\xff\xff" + bytes(4), "remark length -1"),
        (rocketmq_header(1, 0, 0, 7, 0) + b"\x00", "extFields length 0 does not match the 1 bytes left"),
        (rocketmq_header(1, 0, 0, 7, 0, ext=[(b"k", b"v")])[:-1], "extFields length 8 does not match the 7"),
        (rocketmq_header(1, 0, 0, 7, 0)[:-4] + bytes([0, 0, 0, 1, 0]), "ends inside the length of the extFields key"),
        (rocketmq_header(1, 0, 0, 7, 0)[:-4] + bytes([0, 0, 0, 2, 0x80, 0]), "extFields key length -32768"),
        (rocketmq_header(1, 0, 0, 7, 0)[:-4] + bytes([0, 0, 0, 4, 0, 1, 107, 0]), "length of the extFields value"),
    ],
)
def test_rocketmq_headers_that_do_not_add_up_are_rejected_with_the_opaque(header: bytes, fragment: str) -> None:
    with pytest.raises(MalformedCommand, match="ROCKETMQ header") as raised:
        decode(Frame(ROCKETMQ, header, b""))
    assert fragment in raised.value.reason
    if len(header) >= 13:
        assert (raised.value.opaque, raised.value.is_response) == (7, False)


# -- both: round trips and local errors -------------------------------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)


@given(
    serialize_type=st.sampled_from(list(SerializeType)),
    code=int16,
    language=st.sampled_from(list(LanguageCode)),
    version=int16,
    opaque=int32,
    flag=int32,
    remark=st.none() | texts.filter(bool),
    ext_fields=st.dictionaries(texts.filter(bool), texts.filter(bool), max_size=8),
    body=st.binary(max_size=64),
)
def test_every_command_survives_a_round_trip(
    serialize_type, code, language, version, opaque, flag, remark, ext_fields, body
):  # noqa: E501
    cmd = RemotingCommand(code, language, version, opaque, flag, remark, ext_fields, body, serialize_type)
    assert decode(only_frame(encode(cmd))) == cmd


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"ext_fields": {"k": 1}}, "extFields entry 'k': 1 is not str: str"),
        ({"ext_fields": {1: "v"}}, "extFields entry 1: 'v'"),
        ({"opaque": 2**31}, "opaque"),
        ({"flag": -(2**31) - 1}, "flag"),
    ],
)
def test_unencodable_commands_raise_local_protocol_errors(serialize_type, fields, fragment) -> None:
    with pytest.raises(LocalProtocolError, match=fragment):
        encode(RemotingCommand(code=1, serialize_type=serialize_type, **fields))


def test_json_cannot_write_lone_surrogates_and_rocketmq_writes_question_marks_like_java() -> None:
    with pytest.raises(LocalProtocolError, match="JSON header"):
        encode(RemotingCommand(code=1, remark="\ud800"))
    cmd = decode(only_frame(encode(RemotingCommand(code=1, remark="a\ud800", serialize_type=ROCKETMQ))))
    assert cmd.remark == "a?"


def test_requests_get_fresh_opaques_and_responses_echo_them() -> None:
    request = create_request(RequestCode.SEND_MESSAGE, {"a": "1"}, b"body", serialize_type=ROCKETMQ)
    other = create_request(RequestCode.SEND_MESSAGE)
    assert other.opaque != request.opaque
    assert (request.is_response, request.is_oneway, request.version) == (False, False, REMOTING_VERSION)
    assert (request.code, request.ext_fields, request.body) == (10, {"a": "1"}, b"body")
    response = create_response(request, ResponseCode.TOPIC_NOT_EXIST, "no topic", body=b"b")
    assert response.is_response and not response.is_oneway
    assert (response.opaque, response.serialize_type, response.code, response.remark) == (
        request.opaque,
        ROCKETMQ,
        17,
        "no topic",
    )
    assert type(response.code) is int and type(response.flag) is int


def test_opaques_wrap_around_like_javas_atomic_integer(monkeypatch) -> None:
    import itertools

    monkeypatch.setattr(command, "_opaques", itertools.count(2**31 - 1))
    assert [next_opaque() for _ in range(3)] == [2**31 - 1, -(2**31), -(2**31) + 1]


def test_flag_bits_other_than_response_and_oneway_pass_through() -> None:
    cmd = RemotingCommand(code=1, flag=0b1111_0011)
    assert cmd.is_response and cmd.is_oneway
    assert decode(only_frame(encode(cmd))).flag == 0b1111_0011


# -- robustness: whatever the bytes, decoding either works or raises MalformedCommand ---------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
header_keys = st.sampled_from(["code", "flag", "language", "opaque", "remark", "extFields", "version", "other"])


@given(st.dictionaries(header_keys, json_values | st.dictionaries(st.text(), json_values)))
def test_any_json_object_decodes_or_raises_malformed_command(obj) -> None:
    try:
        cmd = decode(json_frame(json.dumps(obj).encode()))
    except MalformedCommand as err:
        assert err.reason.startswith("JSON header")
    else:
        assert decode(only_frame(encode(cmd))) == cmd  # and what decodes, re-encodes


@given(serialize_type=st.sampled_from(list(SerializeType)), header=st.binary(max_size=80))
def test_any_header_bytes_decode_or_raise_malformed_command(serialize_type, header) -> None:
    try:
        decode(Frame(serialize_type, header, b""))
    except MalformedCommand:
        pass
