"""SQL92 selectors (broker/server/filter/sql92.py): the grammar, Java's evaluation rules and its error texts.

The tables mirror RocketMQ's own filter tests (filter/src/test/.../ExpressionTest.java and ParserTest.java), with
property values as the broker sees them: strings. ``tests/interop/test_java_filters_ordered.py`` runs the same tables
through Apache's SelectorParser, so every expectation here is also Java's.
"""

from __future__ import annotations

import struct
import timeit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.common.errors import FilterExpressionError
from broker.common.message import encode_properties, pack_host
from broker.common.record import decode_record_properties, encode_record
from broker.server.consumer_manager import SubscriptionData
from broker.server.filter.message_filter import ConsumerFilterManager, SqlMessageFilter, compile_expression
from broker.server.filter.sql92 import compile_selector, parse
from broker.server.filter.sql92_expressions import JavaThrow, java_double_str, parse_double, parse_int

THROW = "throw"  # evaluate() throws in Java: the broker does not select the message

AND = "a=3 and b<>4 And c>5 AND d<=4"
OR = "a=3 or b<>4 Or c>5 OR d<=4"
IN = "a in ('3', '4', '5')"
NOT_IN = "a not in ('3', '4', '5')"
BETWEEN = "a between 2 and 10"
NOT_BETWEEN = "a not between 2 and 10"
NULL_OR = "a is null OR a='hello'"

# (expression, properties, Java's evaluate() result)
EVALUATIONS: list[tuple[str, dict[str, str], object]] = [
    # ExpressionTest: and / or
    (AND, {"a": "3", "b": "5", "c": "6", "d": "1"}, True),
    (AND, {"a": "4", "b": "5", "c": "6", "d": "1"}, False),
    (OR, {"a": "3"}, True),
    (OR, {"a": "4", "b": "5"}, True),
    (OR, {"a": "4", "b": "4", "c": "6"}, True),
    (OR, {"a": "4", "b": "4", "c": "3", "d": "2"}, True),
    (OR, {"a": "4", "b": "4", "c": "3", "d": "10"}, False),
    # in / between / null
    (IN, {"a": "3"}, True), (IN, {"a": "5"}, True), (IN, {"a": "8"}, False), (IN, {}, None),
    (NOT_IN, {"a": "8"}, True), (NOT_IN, {"a": "4"}, False), (NOT_IN, {}, None),
    (BETWEEN, {"a": "2"}, True), (BETWEEN, {"a": "10"}, True), (BETWEEN, {"a": "3"}, True),
    (BETWEEN, {"a": "1"}, False), (BETWEEN, {"a": "11"}, False), (BETWEEN, {}, None),
    (NOT_BETWEEN, {"a": "1"}, True), (NOT_BETWEEN, {"a": "11"}, True), (NOT_BETWEEN, {"a": "3"}, False),
    ("a is null", {"abc": "2"}, True), ("a is null", {"a": "2"}, False),
    ("a is not null", {"a": "2"}, True), ("a is not null", {"abc": "2"}, False),
    ("a is not null and a='hello'", {"a": "hello"}, True), ("a is not null and a='hello'", {}, False),
    (NULL_OR, {}, True), (NULL_OR, {"a": "hello"}, True), (NULL_OR, {"a": "abc"}, False),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False),
    ("a=TRUE", {"a": "TrUe"}, True),  # Boolean.valueOf ignores case
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True),
    # numbers: the literal's type decides how the property parses
    ("a > 3.1E10", {"a": "3.1415E10"}, True),
    ("a > 3.14", {"a": "3.1415"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),  # two strings compare as doubles
    ("a > b", {"a": "20", "b": "10"}, True),
    ("a > b", {"a": "x", "b": "10"}, THROW),
    ("a=b", {"a": "3.14", "b": "3.14"}, True),
    ("a<>b", {"a": "3.14", "b": "3.141"}, True),
    ("a = b", {}, True),  # NULL = NULL is TRUE in doCreateEqual
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "5.0"}, THROW),  # Integer.valueOf("5.0")
    ("a = 5.0", {"a": "5"}, True),
    ("a > 5", {"a": "abc"}, THROW),
    ("a > 5 OR b = 'x'", {"a": "abc", "b": "x"}, THROW),  # the throw aborts the whole selector
    ("b = 'x' OR a > 5", {"a": "abc", "b": "x"}, True),  # short-circuit: the throwing side never runs
    ("a > 2147483648", {"a": "3000000000"}, True),  # a Long literal parses a long
    ("a > 5", {"a": "3000000000"}, THROW),  # an Integer literal does not
    ("a > 5", {"a": "+7"}, True),
    ("a > 5", {"a": " 7"}, THROW),  # Integer.valueOf does not trim...
    ("a > 5.0", {"a": " 7 "}, True),  # ...Double.valueOf does
    ("a > 5.0", {"a": "7d"}, True),
    ("a > 5.0", {"a": "NaN"}, True),  # Double.compare puts NaN above everything
    ("a < 5.0", {"a": "-Infinity"}, True),
    ("a >= -5", {"a": "-5"}, True),
    ("a = 'x'", {"a": "x"}, True), ("a = 'x'", {}, None), ("'x' = a", {}, False),
    ("NOT (a = 'x')", {}, None), ("NOT ('x' = a)", {}, True),
    ("a <> 'x'", {"a": "y"}, True),
    # a bare property is a boolean cast: strings are never TRUE
    ("a", {"a": "true"}, False), ("a", {}, None), ("NOT a", {"a": "x"}, True),
    ("NOT a = 1", {"a": "x"}, False),  # (NOT a) = 1: Boolean against Integer
    ("-a is null", {"a": "5"}, True),  # only literals negate
    ("TRUE", {}, True), ("NULL", {}, None), ("TRUE AND NULL", {}, None), ("FALSE AND NULL", {}, False),
    ("TRUE OR NULL", {}, True), ("1 = 1", {}, True), ("1 = 1.0", {}, True), ("1 = TRUE", {}, False),
    # contains / startswith / endswith
    ("value contains 'x'", {"value": "axb"}, True),
    ("value startswith 'ax'", {"value": "axb"}, True),
    ("value endswith 'xb'", {"value": "axb"}, True),
    ("value not contains 'x'", {"value": "axb"}, False),
    ("value not startswith 'x'", {"value": "abb"}, True),
    ("value contains ''", {"value": "axb"}, False), ("value not contains ''", {"value": "axb"}, False),
    ("value contains 'x'", {}, False), ("value not contains 'x'", {}, False),
    ("'axb' contains 'x'", {}, True), ("' ' endswith ' '", {}, True), ("'s' contains '\\'", {}, False),
    ("a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'", {"a": "3", "b": "3", "c": "axbdc"},
     True),
    # the parser stops at the first token that cannot continue the selector
    ("a = 1 xyz", {"a": "1"}, True),
    ("a = 1 -- not a comment without a line end", {"a": "1"}, True),
    ("a = 1 /* comment */ AND b = 2", {"a": "1", "b": "2"}, True),
    ("a = 1 -- comment\n AND b = 2", {"a": "1", "b": "3"}, False),
    ("a <= now", {"a": "1", "now": "2"}, True),  # NOW is no keyword
    ("A = 1 aNd b = 2", {"A": "1", "b": "2"}, True),  # keywords ignore case, names do not
    ("a in ('x', 'y', 'z', 'w', 'v', 'u')", {"a": "u"}, True),
]


@pytest.mark.parametrize(("expression", "properties", "expected"), EVALUATIONS)
def test_evaluation_as_java(expression: str, properties: dict[str, str], expected: object) -> None:
    selector = compile_selector(expression)
    if expected == THROW:
        with pytest.raises(JavaThrow):
            selector.evaluate(properties)
        assert selector.matches(properties) is False
    else:
        assert selector.evaluate(properties) is expected
        assert selector.matches(properties) is (expected is True)


# (expression, Java's toString() of the parsed expression)
TEXTS = [
    (AND, "((((a == 3) && (NOT (b == 4))) && (c > 5)) && (d <= 4))"),
    (IN, "a IN ( 3, 4, 5 )"),
    (NOT_BETWEEN, "((a < 2) || (a > 10))"),
    ("a is not null", "(NOT (a == NULL))"),
    ("a contains 'x' or a not endswith 'y'", "((CONTAINS a) || (NOT ENDSWITH a))"),
    ("a > -5 and -a is null", "((a > (- 5)) && ((- a) == NULL))"),
    ("a = 1.5E-7 or a = 12345678.0 or a = 3000000000 or a = 'it''s'",
     "((((a == 1.5E-7) || (a == 1.2345678E7)) || (a == 3000000000)) || (a == 'it''s'))"),
]


@pytest.mark.parametrize(("expression", "text"), TEXTS)
def test_parsed_expression_prints_as_java(expression: str, text: str) -> None:
    assert compile_selector(expression).text == text


UNARY = ('\nWas expecting one of:\n    "NOT" ...\n    "TRUE" ...\n    "FALSE" ...\n    "NULL" ...\n'
         '    <DECIMAL_LITERAL> ...\n    <FLOATING_POINT_LITERAL> ...\n    <STRING_LITERAL> ...\n    <ID> ...\n'
         '    "(" ...\n    "-" ...\n    "+" ...\n    ')
PARSE = "org.apache.rocketmq.filter.parser.ParseException"
RUNTIME = "java.lang.RuntimeException"

# (expression, the remark Java's broker gives: MQFilterException.getMessage()); a None remark: only the Java class
# is checked (JavaCC's token lists are not reproduced in full)
PARSE_ERRORS: list[tuple[str, str]] = [
    ("a and between 2 and 10", f'{PARSE}: Encountered " "BETWEEN" "between "" at line 1, column 7.{UNARY}'),
    ("a >", f'{PARSE}: Encountered "<EOF>" at line 1, column 3.{UNARY}'),
    ("5", f"{PARSE}: Expression will not result in a boolean value: 5"),
    ("'x'", f"{PARSE}: Expression will not result in a boolean value: 'x'"),
    ("-a", f"{PARSE}: Expression will not result in a boolean value: (- a)"),
    ("a > 'x'", f"{RUNTIME}: Value ''x'' cannot be compared."),
    ("a > TRUE", f"{RUNTIME}: Value 'TRUE' cannot be compared."),
    ("NOT a > 1", f"{RUNTIME}: Value '(NOT a)' cannot be compared."),
    ("(a in ('x','y','z','w','v')) > 1", f"{RUNTIME}: Value 'a IN ( v, w, x, y, z )' cannot be compared."),
    ("a = NULL", f"{RUNTIME}: 'NULL' cannot be compared."),
    ("TRUE = 1", f"{RUNTIME}: 'TRUE' cannot be compared with '1'"),
    ("'a' in ('a')", f"{RUNTIME}: Expected a property for In expression, got: 'a'"),
    ("a between 10 and 0", f"{RUNTIME}: Illegal values of between, left value(10) must less than or equal to right "
                           "value(0)"),
    ("a between 1 and NULL", f"{RUNTIME}: Illegal values of between, values can not be null!"),
    ("a between 1 and 'x'", f'{RUNTIME}: java.lang.NumberFormatException: For input string: "x"'),
    ("a between 'x' and TRUE", "java.lang.ClassCastException: class java.lang.Boolean cannot be cast to class "
                               "java.lang.String (java.lang.Boolean and java.lang.String are in module java.base of "
                               "loader 'bootstrap')"),
    ("a > 100000000000000000000000", 'java.lang.NumberFormatException: For input string: "100000000000000000000000"'),
    ("a > 1e400", f"{RUNTIME}: 1e400 is greater than 1.7976931348623157E308"),
    ("a > 0.0", f"{RUNTIME}: 0.0 is less than 4.9E-324"),  # Double.MIN_VALUE is the smallest positive double
]
SYNTAX_ERRORS = ["a = 1 #", "'abc", "value contains x", "value contains 123", "'axb' contains ", "a is 5",
                 "a in ()", "a not 5", "(a = 1", "", "a = !1"]


@pytest.mark.parametrize(("expression", "remark"), PARSE_ERRORS)
def test_parse_errors_carry_javas_remark(expression: str, remark: str) -> None:
    with pytest.raises(FilterExpressionError) as caught:
        compile_selector(expression)
    assert str(caught.value) == remark


@pytest.mark.parametrize("expression", SYNTAX_ERRORS)
def test_syntax_errors(expression: str) -> None:
    with pytest.raises(FilterExpressionError, match=r"^org\.apache\.rocketmq\.filter\.parser\.(ParseException|"
                                                    r"TokenMgrError): "):
        compile_selector(expression)


def test_java_number_texts() -> None:
    assert [java_double_str(v) for v in (1.0, 0.001, 1e-4, 1e7, 9999999.0, 3.14, -2.5e-10, 1e21, float("nan"))] == [
        "1.0", "0.001", "1.0E-4", "1.0E7", "9999999.0", "3.14", "-2.5E-10", "1.0E21", "NaN"]
    assert parse_int("-12") == -12 and parse_int("\u0661\u0662") == 12  # Java takes any Unicode digit
    for bad in ("", "+", "1_0", " 1", "2147483648", "1.0"):
        with pytest.raises(JavaThrow):
            parse_int(bad)
    assert parse_double("  1.5f ") == 1.5 and parse_double("0x1.8p1") == 3.0 and parse_double(".5") == 0.5
    for bad in ("", "1e", "nan", "inf", "1.0ff", "1_0", "0x1.8"):
        with pytest.raises(JavaThrow):
            parse_double(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab()=<>' 01.-NOTANDORISNULLBETWEENIN,", max_size=30))
def test_any_text_compiles_or_fails_cleanly(text: str) -> None:
    """Nothing but FilterExpressionError escapes the compiler, and a compiled selector only ever answers."""
    try:
        selector = compile_selector(text)
    except FilterExpressionError:
        return
    for properties in ({}, {"a": "1", "b": "x"}, {"a": "a", "b": "0.5"}):
        assert selector.matches(properties) in (True, False)


def test_compilation_is_cached_and_evaluation_is_fast() -> None:
    """The broker compiles a subscription once; a record costs a few microseconds (the Java broker's budget)."""
    expression = "a > 5 AND b = 'x' OR c IN ('1', '2') AND d BETWEEN 1.5 AND 10"
    assert compile_selector(expression) is compile_selector(expression)
    selector = compile_selector(expression)
    properties = {"a": "7", "b": "y", "c": "2", "d": "3", "TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": "0A0B"}
    per_call = timeit.timeit(lambda: selector.matches(properties), number=20_000) / 20_000
    assert selector.matches(properties)
    assert per_call < 50e-6, per_call
    assert timeit.timeit(lambda: parse(expression), number=200) / 200 < 5e-3


# -- the store-side filter ------------------------------------------------------------------------------------------


def _record(properties: dict[str, str], body: bytes = b"body", *, topic: str = "TopicTest") -> bytes:
    return encode_record(topic=topic.encode(), queue_id=0, body=body,
                         properties=encode_properties(properties).encode(), born_host=pack_host("127.0.0.1", 1),
                         store_host=pack_host("127.0.0.1", 10911))


def test_sql_filter_reads_properties_without_the_body() -> None:
    message_filter = SqlMessageFilter(compile_selector("TAGS = 'TagA' AND price > 100"))
    assert message_filter.is_matched_by_consume_queue(12345) and message_filter.is_matched_by_consume_queue(None)
    assert message_filter.is_matched_by_commit_log(_record({"TAGS": "TagA", "price": "150"}, b"x" * 10_000))
    assert not message_filter.is_matched_by_commit_log(_record({"TAGS": "TagA", "price": "50"}))
    assert not message_filter.is_matched_by_commit_log(_record({"TAGS": "TagB", "price": "150"}))
    assert not message_filter.is_matched_by_commit_log(_record({"TAGS": "TagA", "price": "lots"}))
    long_topic = _record({"price": "101", "TAGS": "TagA"}, topic="T" * 200)  # a V2 record (2-byte topic length)
    assert decode_record_properties(long_topic) == {"price": "101", "TAGS": "TagA"}
    assert message_filter.is_matched_by_commit_log(long_topic)
    truncated = _record({"TAGS": "TagA", "price": "150"})
    broken = struct.pack(">i", len(truncated) - 10) + truncated[4:]
    assert not message_filter.is_matched_by_commit_log(broken)  # a corrupt record selects nothing


def test_compile_expression_knows_sql92_only() -> None:
    assert compile_expression("SQL92", "a > 1").matches({"a": "2"})
    with pytest.raises(FilterExpressionError):
        compile_expression("GROOVY", "a > 1")


def test_consumer_filter_manager_registers_like_java() -> None:
    manager = ConsumerFilterManager()
    sub = SubscriptionData("T", "a > 1", "SQL92", sub_version=100)
    manager.register("G", [sub, SubscriptionData("T2", "TagA", "TAG", sub_version=100)])
    data = manager.get("T", "G")
    assert data is not None and data.client_version == 100 and data.selector.matches({"a": "2"})
    assert manager.get("T2", "G") is None  # tag subscriptions need no filter data
    manager.register_one("G", SubscriptionData("T", "a > 5", "SQL92", sub_version=99))  # older: ignored
    assert manager.get("T", "G").expression == "a > 1"  # type: ignore[union-attr]
    manager.register_one("G", SubscriptionData("T", "a > 1", "SQL92", sub_version=150))  # same text: version only
    assert manager.get("T", "G").client_version == 150  # type: ignore[union-attr]
    manager.register_one("G", SubscriptionData("T", "a > 5", "SQL92", sub_version=200))
    assert manager.get("T", "G").expression == "a > 5"  # type: ignore[union-attr]
    assert not manager.register_one("G", SubscriptionData("T", "a >", "SQL92", sub_version=300))
    assert manager.get("T", "G") is None  # a newer expression that does not compile drops the old one
    assert not manager.register_one("G2", SubscriptionData("T", "a >", "SQL92", sub_version=1))
    assert manager.get("T", "G2") is None
