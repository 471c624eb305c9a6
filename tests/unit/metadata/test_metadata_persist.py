"""common/fastjson.py and common/persist.py: the fastjson2 dialect, DataVersion, the crash-safe write and its
fallbacks."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common import persist
from broker.common.errors import MetadataCorrupt
from broker.common.fastjson import DataVersion, decode_json, encode_json, encode_json_pretty
from broker.common.persist import load_json, write_atomic
from broker.server.metadata import paths
from tests.unit.metadata.java_captures import JAVA_CONSUMER_OFFSET_JSON


def restore_int_keys(value):
    """decode_json returns bare integer keys as strings; turn them back for a byte-for-byte re-encode."""
    if isinstance(value, dict):
        return {(int(k) if k.lstrip("-").isdigit() else k): restore_int_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_int_keys(v) for v in value]
    return value


# -- the dialect ------------------------------------------------------------------------------------------------------


def test_pretty_format_is_fastjson2s():
    value = {"a": {}, "b": [], "c": {1: 2, -3: 4}, "d": ["x", True], "e": None, "f": 'é\n"\\'}
    assert encode_json_pretty(value) == (
        '{\n\t"a":{},\n\t"b":[],\n\t"c":{\n\t\t1:2,\n\t\t-3:4\n\t},\n\t"d":[\n\t\t"x",\n\t\ttrue\n\t],\n'
        '\t"f":"é\\n\\"\\\\"\n}'
    )


def test_compact_format_has_no_whitespace():
    assert encode_json({"t@g": {0: 250, 1: 7}, "v": False, "n": None}) == '{"t@g":{0:250,1:7},"v":false}'


def test_java_file_reencodes_byte_for_byte():
    assert encode_json_pretty(restore_int_keys(decode_json(JAVA_CONSUMER_OFFSET_JSON))) == JAVA_CONSUMER_OFFSET_JSON


def test_decode_quotes_only_bare_keys_outside_strings():
    text = '{"s":"{0:1}, ,2:3","q":"a\\"{,4:5","m":{ 6 :7,-8:9},"l":[10,11]}'
    assert decode_json(text) == {"s": "{0:1}, ,2:3", "q": 'a"{,4:5', "m": {"6": 7, "-8": 9}, "l": [10, 11]}


def test_encode_rejects_what_fastjson_would_not_write_here():
    with pytest.raises(TypeError):
        encode_json({"x": 1.5})
    with pytest.raises(TypeError):
        encode_json({(1, 2): 1})


json_keys = st.one_of(st.text(max_size=8), st.integers(-(2**63), 2**63 - 1))
json_leaves = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=16))
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(json_keys, children, max_size=4)),
    max_leaves=20,
)


def _stringify_keys(value):
    if isinstance(value, dict):
        return {str(k): _stringify_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


@given(json_values)
def test_decode_inverts_both_encodings(value):
    # A str key "1" and an int key 1 collide once decoded; JSON and the dict comprehension both keep the later.
    expected = _stringify_keys(value)
    assert decode_json(encode_json(value)) == expected
    assert decode_json(encode_json_pretty(value)) == expected


# -- DataVersion ------------------------------------------------------------------------------------------------------


def test_data_version_json_and_next():
    v = DataVersion(state_version=0, timestamp=5, counter=7)
    assert list(v.to_json()) == ["counter", "stateVersion", "timestamp"]
    n = v.next_version(3)
    assert (n.counter, n.state_version) == (8, 3) and n.timestamp >= 5
    assert DataVersion.from_json(n.to_json()) == n
    assert DataVersion.from_json(None).counter == 0


# -- atomic writes and fallbacks --------------------------------------------------------------------------------------


def _decode_doc(data):
    return data["doc"]


def test_write_keeps_previous_version_as_bak(tmp_path):
    path = str(tmp_path / "config" / "topics.json")
    write_atomic(path, '{"doc":1}')
    assert not os.path.exists(path + ".bak") and not os.path.exists(path + ".tmp")
    write_atomic(path, '{"doc":2}')
    assert (tmp_path / "config" / "topics.json").read_text() == '{"doc":2}'
    assert (tmp_path / "config" / "topics.json.bak").read_text() == '{"doc":1}'
    assert load_json(path, _decode_doc) == 2


def test_nothing_to_load_is_none(tmp_path):
    assert load_json(str(tmp_path / "missing.json"), _decode_doc) is None


class Crash(BaseException):
    """Stands in for the process dying: nothing after it runs."""


def _crash_on_replace(monkeypatch, call_number: int):
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append((src, dst))
        if len(calls) == call_number:
            raise Crash
        real_replace(src, dst)

    monkeypatch.setattr(persist.os, "replace", replace)


def test_crash_before_rotating_keeps_the_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "f.json")
    write_atomic(path, '{"doc":1}')
    _crash_on_replace(monkeypatch, 1)  # f.json -> f.json.bak never happens
    with pytest.raises(Crash):
        write_atomic(path, '{"doc":2}')
    monkeypatch.undo()
    assert load_json(path, _decode_doc) == 1
    write_atomic(path, '{"doc":3}')  # the stale .tmp does not get in the way
    assert load_json(path, _decode_doc) == 3 and not os.path.exists(path + ".tmp")


def test_crash_between_the_renames_loads_the_complete_tmp(tmp_path, monkeypatch):
    path = str(tmp_path / "f.json")
    write_atomic(path, '{"doc":1}')
    _crash_on_replace(monkeypatch, 2)  # f.json.tmp -> f.json never happens
    with pytest.raises(Crash):
        write_atomic(path, '{"doc":2}')
    monkeypatch.undo()
    assert not os.path.exists(path)
    assert load_json(path, _decode_doc) == 2  # newest complete version, fsynced before any rename


def test_torn_tmp_without_file_falls_back_to_bak(tmp_path):
    path = str(tmp_path / "f.json")
    (tmp_path / "f.json.bak").write_text('{"doc":1}')
    (tmp_path / "f.json.tmp").write_text('{"doc":')
    assert load_json(path, _decode_doc) == 1


def test_torn_file_is_set_aside_and_bak_survives_the_next_write(tmp_path):
    path = str(tmp_path / "f.json")
    write_atomic(path, '{"doc":1}')
    write_atomic(path, '{"doc":2}')
    (tmp_path / "f.json").write_text('{"doc":2, "tab')  # torn in place (how Java's own persist can fail)
    assert load_json(path, _decode_doc) == 1
    assert (tmp_path / "f.json.corrupt").read_text() == '{"doc":2, "tab'
    write_atomic(path, '{"doc":3}')
    assert load_json(path, _decode_doc) == 3
    assert (tmp_path / "f.json.bak").read_text() == '{"doc":1}'  # not the torn file


def test_empty_file_counts_as_missing(tmp_path):
    path = str(tmp_path / "f.json")
    (tmp_path / "f.json").write_text("")
    (tmp_path / "f.json.bak").write_text('{"doc":1}')
    assert load_json(path, _decode_doc) == 1


def test_unreadable_file_without_backup_refuses_to_start_empty(tmp_path):
    path = str(tmp_path / "f.json")
    (tmp_path / "f.json").write_text("{not json")
    with pytest.raises(MetadataCorrupt, match="f.json"):
        load_json(path, _decode_doc)


def test_decoder_errors_count_as_corruption(tmp_path):
    path = str(tmp_path / "f.json")
    (tmp_path / "f.json").write_text('{"other":1}')
    (tmp_path / "f.json.bak").write_text('["not an object"]')
    with pytest.raises(MetadataCorrupt, match="backup"):
        load_json(path, _decode_doc)


def test_config_paths_are_brokerpathconfighelpers(tmp_path):
    root = str(tmp_path)
    assert paths.topic_config_path(root) == os.path.join(root, "config", "topics.json")
    assert paths.subscription_group_path(root) == os.path.join(root, "config", "subscriptionGroup.json")
    assert paths.consumer_offset_path(root) == os.path.join(root, "config", "consumerOffset.json")
    assert paths.delay_offset_path(root) == os.path.join(root, "config", "delayOffset.json")
