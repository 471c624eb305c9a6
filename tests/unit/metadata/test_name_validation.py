"""validation.py: TopicValidator's rules and remarks, and that no accepted name is a way out of the store."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common import validation as v

ILLEGAL = "allowing only ^[%|a-zA-Z0-9_-]+$"


@pytest.mark.parametrize(
    "name", ["TopicTest", "%RETRY%group", "%DLQ%group", "a|b", "under_score-dash", "%", "0", "t" * 127]
)
def test_legal_topics(name):
    assert v.validate_topic(name) == v.ValidateResult(True, "")


@pytest.mark.parametrize(
    "name", ["../x", "..", ".", "a/b", "/abs", "a\\b", "a\x00b", "tab\there", "new\nline", "a.b", "a b", "é", "a@b"]
)
def test_illegal_characters(name):
    result = v.validate_topic(name)
    assert not result.valid
    assert result.remark == f"The specified topic: {name}, contains illegal characters, {ILLEGAL}"
    assert v.validate_group(name).remark == f"The specified group: {name}, contains illegal characters, {ILLEGAL}"


@pytest.mark.parametrize("name", [None, "", "   ", "\t"])
def test_blank(name):
    assert v.validate_topic(name) == v.ValidateResult(False, "The specified topic is blank.")
    assert v.validate_group(name) == v.ValidateResult(False, "The specified group is blank.")


def test_topic_length_limits():
    assert not v.validate_topic("t" * 128)
    assert v.validate_topic("t" * 128).remark == (
        f"The specified topic: {'t' * 128}, is longer than topic max length: 127"
    )
    retry = "%RETRY%" + "g" * 248  # 255
    assert v.validate_topic(retry)
    assert v.validate_topic("%DLQ%" + "g" * 250)  # 255
    too_long = retry + "g"
    assert v.validate_topic(too_long).remark == (
        f"The specified topic is DLQ or Retry topic: {too_long}, and it's longer than topic max length: 255"
    )
    assert not v.validate_topic("x" * 300)


def test_charset_is_checked_before_length():
    name = "." * 300
    assert "illegal characters" in v.validate_topic(name).remark


def test_group_length_limit_is_120():
    assert v.validate_group("g" * 120)
    g = "g" * 121
    assert v.validate_group(g).remark == f"The specified group: {g}, is longer than group max length: 120"
    assert v.validate_group("%RETRY%group")


def test_system_and_forbidden_topics():
    assert v.is_system_topic("TBW102") and v.is_system_topic("rmq_sys_anything")
    assert not v.is_system_topic("TopicTest")
    assert v.is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX")
    assert v.is_not_allowed_send_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not v.is_not_allowed_send_topic("TBW102")
    assert v.is_sys_consumer_group("CID_RMQ_SYS_TRANS") and not v.is_sys_consumer_group("GID_x")
    assert v.is_predefined_group("TOOLS_CONSUMER")


def test_retry_and_dlq_names():
    assert v.retry_topic("g") == "%RETRY%g" and v.is_retry_topic("%RETRY%g")
    assert v.dlq_topic("g") == "%DLQ%g" and v.is_dlq_topic("%DLQ%g")
    assert v.reply_topic("DefaultCluster") == "DefaultCluster_REPLY_TOPIC"
    assert v.revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"


@given(st.text(max_size=40))
def test_accepted_names_stay_inside_the_store(name):
    for result in (v.validate_topic(name), v.validate_group(name)):
        if result.valid:
            root = os.path.join(os.sep, "store", "consumequeue")
            path = os.path.normpath(os.path.join(root, name, "0"))
            assert path.startswith(root + os.sep)
            assert not set(name) & {".", "/", "\\", "\x00"}


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=20))
def test_illegal_iff_outside_the_pattern(name):
    assert v.is_topic_or_group_illegal(name) == (name != "" and re.fullmatch(r"[%|a-zA-Z0-9_-]+", name) is None)
