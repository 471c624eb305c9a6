"""A single send's record made from its header's extFields in one call (broker/_speedups_send.c's send_record)
against its Python twin: the same record, queue id and UNIQ_KEY, or None from both, for Java-shaped headers and for
every way a field can leave the common shape (missing, not a plain decimal, out of range, a batch, a transaction,
DELAY, no UNIQ_KEY, names that are not ASCII, lone surrogates, limits). That a record taken here is the one the
general path stores, and its answer the same, is tests/integration/test_send_record.py's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups
from broker.common.message import SysFlag, encode_properties, pack_host
from broker.common.record import decode_record
from broker.remoting.headers import SendMessageRequestHeader
from broker.server.processors import send_record
from broker.server.processors.send_record import _send_record_py, send_record_names

pytestmark = pytest.mark.smoke

V2_NAMES = send_record_names(SendMessageRequestHeader.V2_WIRE)
V1_NAMES = send_record_names(None)
STORE_HOST = pack_host("10.0.0.9", 10911)
HOST_V6 = pack_host("2001:db8::7", 10911)
BORN_HOST = pack_host("10.0.0.7", 54321)
MAX_BODY, MAX_RECORD = 600, 600 + 400


def test_the_processor_uses_the_c_function():
    assert send_record.send_record is _speedups.send_record
    assert V2_NAMES == ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "l", "m")
    assert V1_NAMES[:3] == ("producerGroup", "topic", "defaultTopic")


def java_ext(names: tuple[str, ...], properties: str, **fields: str) -> dict[str, str]:
    """A header as the Java client sends it (SEND_MESSAGE_V2's fields, in its order)."""
    values = {"producer_group": "PG", "topic": "Orders", "default_topic": "TBW102", "default_topic_queue_nums": "4",
              "queue_id": "3", "sys_flag": "0", "born_timestamp": "1700000000123", "flag": "0",
              "properties": properties, "reconsume_times": "0", "batch": "false", **fields}
    return {name: values[field] for field, name in zip(send_record.SEND_RECORD_FIELDS, names, strict=True)
            if values.get(field) is not None}


def both(ext, body=b"hello", queue_limit=8, sys_flag_bits=0, born_host=BORN_HOST, store_host=STORE_HOST,
         region="DefaultRegion", trace_on="true", cluster="DefaultCluster", max_body=MAX_BODY, max_record=MAX_RECORD,
         names=V2_NAMES, capacity=128):
    args = (ext, names, body, queue_limit, sys_flag_bits, born_host, store_host, region, trace_on, cluster, max_body,
            max_record, capacity)
    c, twin = _speedups.send_record(*args), _send_record_py(*args)
    assert c == twin
    return c


def test_a_java_send_becomes_the_record_java_stores():
    props = encode_properties({"KEYS": "order-1", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": "AC11", "userProp": "v"})
    record, queue_id, uniq = both(java_ext(V2_NAMES, props, flag="3"))
    assert (queue_id, uniq) == (3, "AC11")
    decoded = decode_record(record)
    assert (decoded.topic, decoded.queue_id, decoded.body, decoded.flag, decoded.born_host) == (
        "Orders", 3, b"hello", 3, BORN_HOST)
    # Java's HashMap(128) order of these keys (test_send.py's, printed by jshell)
    assert list(decoded.properties) == ["MSG_REGION", "UNIQ_KEY", "CLUSTER", "TAGS", "userProp", "KEYS", "WAIT",
                                        "TRACE_ON"]
    assert both(java_ext(V1_NAMES, props), names=V1_NAMES) is not None


@pytest.mark.parametrize(("fields", "why"), [
    ({"batch": "TRUE"}, "a batch"),
    ({"sys_flag": "4"}, "a transaction half"),
    ({"queue_id": "8"}, "past the topic's queues"),
    ({"queue_id": "-1"}, "a queue the broker picks"),
    ({"born_timestamp": " 17"}, "int() reads it, C does not"),
    ({"flag": "2147483648"}, "out of range"),
    ({"default_topic": None}, "a required field missing"),
])
def test_what_leaves_the_common_shape_takes_the_general_path(fields, why):
    props = encode_properties({"UNIQ_KEY": "U1"})
    assert both(java_ext(V2_NAMES, props, **fields)) is None, why


@pytest.mark.parametrize("props", [{"DELAY": "3"}, {"TRAN_MSG": "true"}, {"POP_CK": "x"}, {"KEYS": "k"},
                                   {"nämé": "v"}])
def test_properties_that_leave_the_common_shape(props):
    """DELAY, TRAN_MSG and POP_CK change what is stored; without UNIQ_KEY the broker makes one; a name that is not
    ASCII hashes as UTF-16."""
    uniq = {} if "KEYS" in props else {"UNIQ_KEY": "U1"}
    assert both(java_ext(V2_NAMES, encode_properties({**uniq, **props}))) is None


numbers = st.one_of(st.integers(-(2**63), 2**63).map(str), st.sampled_from(
    ["", "-", "+5", " 5", "5 ", "1_0", "٣", "007", "-0", "0x10", "9" * 19, "2147483647", "-2147483648"]))
names = st.sampled_from(["KEYS", "TAGS", "WAIT", "DELAY", "TRAN_MSG", "POP_CK", "MSG_REGION", "CLUSTER", "TRACE_ON",
                         "UNIQ_KEY", "a", "b1", "nämé", "", "x\x01y"])
plain = st.text(alphabet=st.sampled_from("aZ0 é€"), max_size=6)
texts = st.one_of(plain, st.text(alphabet=st.sampled_from("aZ0 \x01\x02é\ud800"), max_size=6))
entries = st.lists(st.tuples(names, st.one_of(texts, st.just("v"))), max_size=6)


@settings(max_examples=300, deadline=None)
@given(fields=st.one_of(st.just({}), st.dictionaries(st.sampled_from(send_record.SEND_RECORD_FIELDS),
                                                      st.one_of(numbers, texts, st.none()), max_size=2)),
       props=entries, uniq_at=st.one_of(st.none(), st.integers(0, 6)), raw=st.one_of(st.none(), texts),
       body=st.binary(max_size=700), queue_limit=st.integers(0, 9), multi_tags=st.booleans(),
       born_host=st.sampled_from([BORN_HOST, HOST_V6, b"\x01\x02"]), store_host=st.sampled_from([STORE_HOST, HOST_V6]),
       region=st.one_of(st.just("DefaultRegion"), texts), v1=st.booleans(),
       capacity=st.sampled_from([128, 128, 16, 4, 2, 1, 48, 0]), many=st.one_of(st.just(0), st.integers(0, 70)))
def test_c_and_its_twin_agree(fields, props, uniq_at, raw, body, queue_limit, multi_tags, born_host, store_host,
                              region, v1, capacity, many):
    """Java-shaped headers with fields replaced by numbers, text or nothing; properties of any shape (duplicate
    names, empty values, separators in names, lone surrogates, too many, UNIQ_KEY anywhere or not at all); V1 and
    V2 names."""
    if uniq_at is not None:
        props.insert(min(uniq_at, len(props)), ("UNIQ_KEY", "U1"))
    properties = raw if raw is not None else "".join(f"{k}\x01{val}\x02" for k, val in props)
    properties += "".join(f"p{i}\x01v\x02" for i in range(many))
    names_used = V1_NAMES if v1 else V2_NAMES
    base = java_ext(names_used, properties)
    for field, value in fields.items():
        name = names_used[send_record.SEND_RECORD_FIELDS.index(field)]
        if value is None:
            base.pop(name, None)
        else:
            base[name] = value
    both(base, body=body, queue_limit=queue_limit, sys_flag_bits=int(SysFlag.MULTI_TAGS) if multi_tags else 0,
         born_host=born_host, store_host=store_host, region=region, names=names_used, capacity=capacity)


ascii_names = st.text(alphabet=st.sampled_from("AKZ_a9"), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(props=st.lists(st.tuples(st.one_of(ascii_names, st.sampled_from(["MSG_REGION", "CLUSTER", "TRACE_ON"])),
                                plain), max_size=8),
       uniq_at=st.integers(0, 8), body=st.binary(max_size=MAX_BODY), queue_id=st.integers(0, 7),
       sys_flag=st.integers(0, 2**31 - 1).map(lambda f: f & ~0xC), flag=st.integers(-(2**31), 2**31 - 1),
       born=st.integers(-(2**59), 2**59), reconsume=st.integers(-(2**31), 2**31 - 1), multi_tags=st.booleans(),
       born_host=st.sampled_from([BORN_HOST, HOST_V6]), store_host=st.sampled_from([STORE_HOST, HOST_V6]),
       region=plain, cluster=plain, v1=st.booleans(), capacity=st.sampled_from([128, 16, 4]),
       topic=st.sampled_from(["Orders", "T" * 200]))
def test_sends_of_the_common_shape_are_taken_alike(props, uniq_at, body, queue_id, sys_flag, flag, born, reconsume,
                                                   multi_tags, born_host, store_host, region, cluster, v1, capacity,
                                                   topic):
    """Every header of the common shape is taken, by both, into the same record: any ASCII names (the broker's own
    among them, whose values it replaces), values with separators and non-ASCII text, V1 and V2 topics and names,
    IPv4 and IPv6 hosts, the whole range of each field."""
    props.insert(min(uniq_at, len(props)), ("UNIQ_KEY", "U1"))
    properties = "".join(f"{k}\x01{val or 'v'}\x02" for k, val in props)
    names_used = V1_NAMES if v1 else V2_NAMES
    ext = java_ext(names_used, properties, topic=topic, queue_id=str(queue_id), sys_flag=str(sys_flag),
                   flag=str(flag), born_timestamp=str(born), reconsume_times=str(reconsume))
    made = both(ext, body=body, sys_flag_bits=int(SysFlag.MULTI_TAGS) if multi_tags else 0, born_host=born_host,
                store_host=store_host, region=region, cluster=cluster, names=names_used, capacity=capacity,
                max_record=4096)
    assert made is not None
    assert made[1:] == (queue_id, dict(props)["UNIQ_KEY"])
