"""The values and expressions of RocketMQ's SQL92 selectors (filter/.../expression/*.java): Java's value types, its
comparison rules (ComparisonExpression.__compare), and one builder per expression class that makes the same
parse-time checks, with the same error texts, and returns a compiled evaluator. ``sql92`` parses a selector
into these builders; read its docstring for the rules a user sees.

An evaluator takes a message's properties and returns TRUE, FALSE or None (SQL's NULL), or raises JavaThrow where
Java's evaluate() throws. The common shapes (a property against a literal) get evaluators without type dispatch.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from broker.common.hash_order import hash_map_copy_order

Properties = Mapping[str, str]
Evaluator = Callable[[Properties], object]

# Java class names, as MQFilterException.getMessage() (its cause's toString()) shows them in a remark
RUNTIME = "java.lang.RuntimeException"
NUMBER_FORMAT = "java.lang.NumberFormatException"
PARSE = "org.apache.rocketmq.filter.parser.ParseException"
LEXICAL = "org.apache.rocketmq.filter.parser.TokenMgrError"
CLASS_CAST_BOOLEAN = ("java.lang.ClassCastException: class java.lang.Boolean cannot be cast to class java.lang.String "
                      "(java.lang.Boolean and java.lang.String are in module java.base of loader 'bootstrap')")
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MIN_VALUE = 5e-324  # Double.MIN_VALUE, printed "4.9E-324"


class JavaThrow(Exception):  # noqa: N818 - the Java exception an evaluation or a check would throw
    """What Java would throw; ``str()`` is its ``toString()``. Inside evaluation it means "select nothing"."""


def _throw(java_class: str, message: str) -> JavaThrow:
    return JavaThrow(f"{java_class}: {message}")


# -- Java values: String is str, Boolean is bool, null is None; the three number types keep their Java type --------


class JInt(int):
    __slots__ = ()


class JLong(int):
    __slots__ = ()


class JDouble(float):
    __slots__ = ()


_NUMBERS = (JInt, JLong, JDouble)


def java_double_str(value: float) -> str:
    """Double.toString: shortest digits, plain between 1e-3 and 1e7, else d.dddE<n>."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exponent)  # digits before the decimal point
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{text}"
        whole, frac = text[:point].ljust(point, "0"), text[point:]
        return f"{minus}{whole}.{frac or '0'}"
    return f"{minus}{text[0]}.{text[1:] or '0'}E{point - 1}"


def java_str(value: object) -> str:
    """String.valueOf of a selector value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, JDouble):
        return java_double_str(value)
    return str(value)


_INT_TEXT = re.compile(r"[+-]?\d+")  # Character.digit(c, 10): any Unicode decimal digit, as Python's \d
_DOUBLE_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_TRIMMED = "".join(map(chr, range(33)))  # String.trim()
_HEX_DOUBLE_TEXT = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")


def _number_format(text: str) -> JavaThrow:
    return _throw(RUNTIME, f'{NUMBER_FORMAT}: For input string: "{text}"')


def parse_int(text: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """Integer.valueOf(String) (Long.valueOf with the long range); JavaThrow as Java's NumberFormatException,
    wrapped in the RuntimeException ComparisonExpression throws."""
    if _INT_TEXT.fullmatch(text):
        value = int(text)
        if low <= value <= high:
            return value
    raise _number_format(text)


def parse_long(text: str) -> int:
    return parse_int(text, LONG_MIN, LONG_MAX)


def parse_double(text: str) -> float:
    """Double.valueOf(String): trimmed of chars <= ' ', Java's literal syntax (a d/f suffix, NaN, Infinity, hex)."""
    trimmed = text.strip(_JAVA_TRIMMED)
    if _DOUBLE_TEXT.fullmatch(trimmed):
        if trimmed.lstrip("+-") in ("NaN", "Infinity"):
            return float(trimmed.replace("Infinity", "inf"))
        return float(trimmed.rstrip("fFdD"))
    hex_match = _HEX_DOUBLE_TEXT.fullmatch(trimmed)
    if hex_match:
        return float.fromhex(hex_match.group(1) + "0x" + hex_match.group(2))
    if not trimmed:
        raise _throw(RUNTIME, f"{NUMBER_FORMAT}: empty String")
    raise _number_format(trimmed)


def _sign(a: float | int | str | bytes, b: float | int | str | bytes) -> int:
    return (a > b) - (a < b)


def double_compare(a: float, b: float) -> int:
    """Double.compare: NaN is above everything and equals itself, -0.0 is below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    return _sign(_double_key(a), _double_key(b))


def _double_key(value: float) -> tuple[int, float, float]:
    return (1, 0.0, 0.0) if math.isnan(value) else (0, value, math.copysign(1.0, value))


def string_compare(a: str, b: str) -> int:
    """String.compareTo: UTF-16 code unit order."""
    if a.isascii() and b.isascii():
        return _sign(a, b)
    return _sign(a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass"))


def _same_type_compare(lv: object, rv: object) -> int:
    if isinstance(lv, str):
        return string_compare(lv, rv)  # type: ignore[arg-type]
    if isinstance(lv, JDouble):
        return double_compare(lv, rv)  # type: ignore[arg-type]
    return _sign(lv, rv)  # type: ignore[arg-type]


def java_compare(lv: object, rv: object) -> int:
    """ComparisonExpression.__compare(lv, rv, convertStringExpressions=true) of two non-null values: the types are
    brought together as Java does (a string is parsed as the other side's number or boolean), or -1 when they
    cannot be."""
    lc, rc = type(lv), type(rv)
    if lc is rc:
        return _same_type_compare(lv, rv)
    if lc is bool:
        if rc is str:
            raise JavaThrow(CLASS_CAST_BOOLEAN)  # Java casts the Boolean itself to String
        return -1
    if lc is JInt or lc is JLong:
        if rc is JInt or rc is JLong:
            return _sign(lv, rv)  # type: ignore[operator]
        if rc is JDouble:
            return double_compare(float(lv), rv)  # type: ignore[arg-type]
        if rc is str:
            return _sign(lv, (parse_int if lc is JInt else parse_long)(rv))  # type: ignore[arg-type,operator]
        return -1
    if lc is JDouble:
        if rc is JInt or rc is JLong:
            return double_compare(lv, float(rv))  # type: ignore[arg-type]
        if rc is str:
            return double_compare(lv, parse_double(rv))  # type: ignore[arg-type]
        return -1
    if lc is str:
        if rc is bool:
            return _sign(lv.lower() == "true", rv)  # type: ignore[attr-defined,operator]
        if rc is JInt or rc is JLong:
            return _sign((parse_int if rc is JInt else parse_long)(lv), rv)  # type: ignore[arg-type,operator]
        if rc is JDouble:
            return double_compare(parse_double(lv), rv)  # type: ignore[arg-type]
    return -1


# -- expression nodes: what the parser's create* methods check, and the compiled evaluator ---------------------------

PROPERTY, CONSTANT, BOOLEAN_CONSTANT, BOOLEAN, OTHER = "property", "constant", "boolean-constant", "boolean", "other"
_DYNAMIC = object()  # a node whose value is not known before evaluation


@dataclass(frozen=True, slots=True)
class Node:
    """One expression: ``kind`` is its Java class family (parse-time checks depend on it), ``text`` its Java
    toString() (error texts show it), ``fn`` its evaluator, ``static`` its value when known without evaluating."""

    kind: str
    text: str
    fn: Evaluator
    value: object = None  # a literal's value (CONSTANT, BOOLEAN_CONSTANT)
    static: object = _DYNAMIC

    @property
    def is_constant(self) -> bool:
        return self.kind in (CONSTANT, BOOLEAN_CONSTANT)

    @property
    def is_boolean(self) -> bool:
        return self.kind in (BOOLEAN, BOOLEAN_CONSTANT)


def constant(value: object, kind: str = CONSTANT) -> Node:
    if value is None or isinstance(value, bool):
        text = "NULL" if value is None else ("TRUE" if value else "FALSE")
    elif isinstance(value, str):
        text = "'" + value.replace("'", "''") + "'"
    else:
        text = java_str(value)
    return Node(kind, text, lambda props: value, value, value)


def prop(name: str) -> Node:
    return Node(PROPERTY, name, lambda props: props.get(name))


def decimal_literal(image: str) -> Node:
    """ConstantExpression.createFromDecimal: an Integer when it fits, else a Long."""
    text = image[:-1] if image[-1] in "lL" else image
    value = int(text)
    if value > LONG_MAX:
        raise _throw(NUMBER_FORMAT, f'For input string: "{text}"')
    return constant(JInt(value) if value <= INT_MAX else JLong(value))


def float_literal(image: str) -> Node:
    value = float(image)
    if value > 1.7976931348623157e308:
        raise _throw(RUNTIME, f"{image} is greater than 1.7976931348623157E308")
    if value < DOUBLE_MIN_VALUE:
        raise _throw(RUNTIME, f"{image} is less than 4.9E-324")
    return constant(JDouble(value))


def as_boolean(node: Node) -> Node:
    """SelectorParser.asBooleanExpression: a property becomes a boolean cast, anything else must be boolean."""
    if node.is_boolean:
        return node
    if node.kind is PROPERTY:
        get = node.fn

        def cast(props: Properties) -> object:
            value = get(props)
            return None if value is None else (value if type(value) is bool else False)

        return Node(BOOLEAN, node.text, cast)
    raise _throw(PARSE, f"Expression will not result in a boolean value: {node.text}")


def negate(node: Node) -> Node:
    """UnaryExpression.createNegate: numbers only (any other value negates to NULL). Never a constant for the
    parse-time checks, even of a literal."""
    if node.static is not _DYNAMIC or node.kind is PROPERTY:
        value = node.static if node.kind is not PROPERTY else None
        if type(value) is JInt:
            result: object = JInt(((-value + 2**31) % 2**32) - 2**31)
        elif type(value) is JLong:
            result = JLong(((-value + 2**63) % 2**64) - 2**63)
        else:
            result = JDouble(-value) if type(value) is JDouble else None
        return Node(OTHER, f"(- {node.text})", lambda props: result, static=result)
    inner = node.fn

    def evaluate(props: Properties) -> None:
        inner(props)  # a boolean operand may throw; its value is no number either way
        return None

    return Node(OTHER, f"(- {node.text})", evaluate)


def logical_not(node: Node) -> Node:
    inner = node.fn

    def evaluate(props: Properties) -> object:
        value = inner(props)
        return None if value is None else not value

    return Node(BOOLEAN, f"(NOT {node.text})", evaluate)


def logical_and(left: Node, right: Node) -> Node:
    lf, rf = left.fn, right.fn

    def evaluate(props: Properties) -> object:
        lv = lf(props)
        if lv is False:
            return False
        rv = rf(props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return Node(BOOLEAN, f"({left.text} && {right.text})", evaluate)


def logical_or(left: Node, right: Node) -> Node:
    lf, rf = left.fn, right.fn

    def evaluate(props: Properties) -> object:
        lv = lf(props)
        if lv is True:
            return True
        rv = rf(props)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return Node(BOOLEAN, f"({left.text} || {right.text})", evaluate)


# -- comparisons --------------------------------------------------------------------------------------------------

_ORDER_OPS: dict[str, Callable[[int, int], bool]] = {">": operator.gt, ">=": operator.ge, "<": operator.lt,
                                                     "<=": operator.le}
_PARSERS: dict[type, Callable[[str], float]] = {JInt: parse_int, JLong: parse_long, JDouble: parse_double}


def _check_less_than_operand(node: Node) -> None:
    if (node.is_constant and not isinstance(node.value, _NUMBERS)) or (not node.is_constant and node.is_boolean):
        raise _throw(RUNTIME, f"Value '{node.text}' cannot be compared.")


def compare(op: str, left: Node, right: Node) -> Node:
    """createGreaterThan and friends: numbers, properties and negations only; two strings compare as doubles."""
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    test = _ORDER_OPS[op]
    text = f"({left.text} {op} {right.text})"
    if left.kind is PROPERTY and type(right.static) in _PARSERS:
        return Node(BOOLEAN, text, _property_vs_number(test, left.text, right.static))
    lf, rf = left.fn, right.fn

    def evaluate(props: Properties) -> object:
        lv = lf(props)
        if lv is None:
            return None
        rv = rf(props)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            try:
                return test(double_compare(parse_double(lv), parse_double(rv)), 0)
            except JavaThrow as err:
                raise _throw(RUNTIME, f"It's illegal to compare string by '>=', '>', '<', '<='. lv={lv}, "
                                      f"rv={rv}") from err
        return test(java_compare(lv, rv), 0)

    return Node(BOOLEAN, text, evaluate)


def _property_vs_number(test: Callable[[int, int], bool], name: str, number: object) -> Evaluator:
    """The common case, ``price > 100``: the property parsed as the number's type, compared without dispatch."""
    parse = _PARSERS[type(number)]
    if type(number) is JDouble:
        def evaluate(props: Properties) -> object:
            value = props.get(name)
            return None if value is None else test(double_compare(parse_double(value), number), 0)  # type: ignore
    else:
        def evaluate(props: Properties) -> object:
            value = props.get(name)
            return None if value is None else test(parse(value), number)  # type: ignore[arg-type]
    return evaluate


def equal(left: Node, right: Node) -> Node:
    """createEqual: neither side the NULL literal, and a TRUE/FALSE literal only against another boolean literal."""
    for node in (left, right):
        if node.is_constant and node.value is None:
            raise _throw(RUNTIME, f"'{node.text}' cannot be compared.")
    if left.is_constant and right.is_constant and left.kind is BOOLEAN_CONSTANT and right.kind is not BOOLEAN_CONSTANT:
        raise _throw(RUNTIME, f"'{left.text}' cannot be compared with '{right.text}'")
    return _do_equal(left, right)


def _do_equal(left: Node, right: Node) -> Node:
    """doCreateEqual: NULL = NULL is TRUE, NULL = x is NULL, x = NULL is FALSE, else the Java comparison is 0."""
    text = f"({left.text} == {right.text})"
    if right.static is None and right.is_constant:  # IS NULL
        lf = left.fn
        return Node(BOOLEAN, text, lambda props: lf(props) is None)
    if left.kind is PROPERTY and right.is_constant:
        return Node(BOOLEAN, text, _property_equals(left.text, right.value))
    lf, rf = left.fn, right.fn

    def evaluate(props: Properties) -> object:
        lv, rv = lf(props), rf(props)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return java_compare(lv, rv) == 0

    return Node(BOOLEAN, text, evaluate)


def _property_equals(name: str, literal: object) -> Evaluator:
    if type(literal) is str:
        return lambda props: None if (value := props.get(name)) is None else value == literal
    if type(literal) is JInt or type(literal) is JLong:
        parse = _PARSERS[type(literal)]
        return lambda props: None if (value := props.get(name)) is None else parse(value) == literal
    return lambda props: None if (value := props.get(name)) is None else java_compare(value, literal) == 0


def is_null(left: Node, *, negated: bool = False) -> Node:
    node = _do_equal(left, constant(None, BOOLEAN_CONSTANT))
    return logical_not(node) if negated else node


def between(value: Node, low: Node, high: Node, *, negated: bool = False) -> Node:
    """createBetween checks literal bounds (not NULL, low <= high); NOT BETWEEN checks nothing."""
    if negated:
        return logical_or(compare("<", value, low), compare(">", value, high))
    if low.is_constant and high.is_constant:
        lv, rv = low.value, high.value
        if lv is None or rv is None:
            raise _throw(RUNTIME, "Illegal values of between, values can not be null!")
        if java_compare(rv, lv) < 0:
            raise _throw(RUNTIME, f"Illegal values of between, left value({java_str(lv)}) must less than or equal "
                                  f"to right value({java_str(rv)})")
    return logical_and(compare(">=", value, low), compare("<=", value, high))


def in_list(left: Node, items: list[str], *, negated: bool = False) -> Node:
    """createInFilter: a property against string literals; a non-string value is NULL."""
    if left.kind is not PROPERTY:
        raise _throw(RUNTIME, f"Expected a property for In expression, got: {left.text}")
    shown = items if len(items) < 5 else hash_map_copy_order(list(dict.fromkeys(items)))  # Java's HashSet order
    text = f"{left.text} {'NOT IN' if negated else 'IN'} ( {', '.join(shown)} )"
    members, name = frozenset(items), left.text

    def evaluate(props: Properties) -> object:
        value = props.get(name)
        if type(value) is not str:
            return None
        return (value in members) != negated

    return Node(BOOLEAN, text, evaluate)


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda value, search: search in value,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def string_test(op: str, left: Node, search: str, *, negated: bool = False) -> Node:
    """CONTAINS, STARTSWITH, ENDSWITH: FALSE for an empty search, a missing value or a value that is no string."""
    symbol = f"NOT {op}" if negated else op
    text = f"({symbol} {left.text})"
    if not search:
        return Node(BOOLEAN, text, lambda props: False)
    test, lf = _STRING_TESTS[op], left.fn

    def evaluate(props: Properties) -> object:
        value = lf(props)
        if type(value) is not str:
            return False
        return test(value, search) != negated

    return Node(BOOLEAN, text, evaluate)
