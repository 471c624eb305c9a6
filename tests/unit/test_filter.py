"""Subscription expressions (FilterAPI.build) and the tag filter a pull hands the store."""

from __future__ import annotations

import pytest

from broker.common.message import java_hash, tags_code
from broker.remoting.heartbeat import is_tag_type, parse_subscription
from broker.server.consumer_manager import SubscriptionData
from broker.server.filter.message_filter import TagMessageFilter


@pytest.mark.parametrize(
    ("sub_string", "tags"),
    [
        ("TagA", ["TagA"]),
        (" TagA || TagB ", ["TagA", "TagB"]),
        ("TagA||TagB||", ["TagA", "TagB"]),  # String.split drops the trailing empty part
        ("TagA || TagA", ["TagA"]),  # a HashSet in Java
        ("a|||b", ["a", "|b"]),  # leftmost "||" first, as Java's regex split
        (" || ", []),  # parts, but no tag: matches nothing
    ],
)
def test_tags_are_split_trimmed_and_hashed(sub_string, tags):
    sub = parse_subscription("T", sub_string)
    assert sub is not None
    assert (sub.topic, sub.sub_string, sub.expression_type) == ("T", sub_string, "TAG")
    assert sub.tags_set == tags
    assert sub.code_set == [java_hash(t) for t in tags]
    assert sub.sub_version > 1_600_000_000_000  # the creation time in ms, as Java's subVersion


@pytest.mark.parametrize("sub_string", ["*", "", None])
def test_star_or_nothing_subscribes_to_everything(sub_string):
    sub = parse_subscription("T", sub_string, "TAG")
    assert sub is not None and sub.sub_string == "*" and sub.code_set == []
    message_filter = TagMessageFilter(sub)
    assert all(message_filter.is_matched_by_consume_queue(code) for code in (0, 1, -5, java_hash("TagZ")))


def test_expressions_java_cannot_parse():
    assert parse_subscription("T", "||") is None  # split leaves nothing: "subString split error"
    assert parse_subscription("T", "||||") is None
    assert parse_subscription("T", "", "SQL92") is None  # "Expression can't be null!"
    sql = parse_subscription("T", "a > 1", "SQL92")
    assert sql is not None and (sql.expression_type, sql.code_set) == ("SQL92", [])


def test_tag_type():
    assert is_tag_type(None) and is_tag_type("") and is_tag_type("TAG")
    assert not is_tag_type("SQL92") and not is_tag_type("tag")


def test_tag_filter_matches_on_hash_codes_only():
    message_filter = TagMessageFilter(parse_subscription("T", "TagA || TagB"))
    assert message_filter.is_matched_by_consume_queue(tags_code("TagA"))
    assert message_filter.is_matched_by_consume_queue(tags_code("TagB"))
    assert not message_filter.is_matched_by_consume_queue(tags_code("TagC"))
    assert not message_filter.is_matched_by_consume_queue(tags_code(None))  # an untagged message: tagsCode 0
    assert message_filter.is_matched_by_consume_queue(None)  # a wake-up without a message at hand
    assert message_filter.is_matched_by_commit_log(b"any record")
    # Java compares hash codes, so colliding tags ("Aa" and "BB" hash alike) pass the broker's filter too;
    # the client filters again by the tag itself.
    assert java_hash("Aa") == java_hash("BB")
    assert TagMessageFilter(parse_subscription("T", "Aa")).is_matched_by_consume_queue(tags_code("BB"))


def test_long_tags_codes_are_compared_as_ints():
    """The ConsumeQueue's tagsCode is a long; Java's filter looks up its intValue()."""
    code = java_hash("TagA")
    message_filter = TagMessageFilter(parse_subscription("T", "TagA"))
    assert message_filter.is_matched_by_consume_queue(code + (7 << 32))
    assert not message_filter.is_matched_by_consume_queue(code + 1 + (7 << 32))


def test_heartbeat_subscriptions_and_other_expression_types():
    heartbeat = SubscriptionData("T", "TagA", tags_set=["TagA"], code_set=[java_hash("TagA")])
    assert TagMessageFilter(heartbeat).is_matched_by_consume_queue(java_hash("TagA"))
    assert not TagMessageFilter(heartbeat).is_matched_by_consume_queue(java_hash("TagB"))
    everything = [None, SubscriptionData("T", "a > 1", "SQL92"), SubscriptionData("T", "X", class_filter_mode=True),
                  SubscriptionData("T", "")]
    for subscription in everything:
        assert TagMessageFilter(subscription).is_matched_by_consume_queue(java_hash("TagB"))
