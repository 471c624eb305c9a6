"""SQL92 message selectors (``MessageSelector.bySql``): RocketMQ's grammar, parsed once per subscription into a
Python callable over a message's properties.

Rule 1: the selector language is defined here and in ``sql92_expressions`` (its values and expression
classes), nowhere else: the tokens and grammar of RocketMQ's filter/.../parser/SelectorParser.jj, the parse-time
checks with Java's error texts, and the evaluation rules, including the quirks a broker must share with Java's to
filter the same messages:

* Three-valued logic: a missing property is NULL; a comparison with NULL is NULL; ``AND``/``OR`` are Kleene's;
  ``NOT NULL`` is NULL. Only TRUE selects a message.
* Property values are strings. Against a number they are parsed as the number's Java type (``a > 5`` parses ``a``
  with Integer.valueOf, ``a > 5.0`` with Double.valueOf; ``a > b`` parses both as doubles); a value that does not
  parse makes Java throw, and a throwing evaluation selects nothing: the whole selector is false for that message,
  whatever the rest says. Comparing a string with a boolean compares Boolean.valueOf(string).
* A bare property is a boolean cast: NULL when missing, FALSE otherwise (strings are not booleans), so
  ``NOT a`` is true exactly when ``a`` is set.
* ``NOT`` binds tighter than comparisons (``NOT a = 1`` is ``(NOT a) = 1``); ``-`` negates only numeric literals.
* ``CONTAINS``/``STARTSWITH``/``ENDSWITH`` (and their ``NOT`` forms) are FALSE for a missing or empty operand.
* The parser stops at the first token that cannot continue the expression: text after a complete selector is
  ignored, as Java's JmsSelector() does (it does not demand <EOF>).

Examples:
    >>> selector = compile_selector("a BETWEEN 1 AND 10 AND TAGS IN ('TagA', 'TagB')")
    >>> selector.matches({"a": "3", "TAGS": "TagA"}), selector.matches({"a": "30", "TAGS": "TagA"})
    (True, False)
    >>> selector.matches({"a": "three", "TAGS": "TagA"})  # Integer.valueOf("three") throws: not selected
    False
    >>> compile_selector("a > 'x'")
    Traceback (most recent call last):
    ...
    broker.common.errors.FilterExpressionError: java.lang.RuntimeException: Value ''x'' cannot be compared.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from broker.common.errors import FilterExpressionError
from broker.server.filter.sql92_expressions import (
    BOOLEAN_CONSTANT,
    LEXICAL,
    PARSE,
    Evaluator,
    JavaThrow,
    Node,
    Properties,
    as_boolean,
    between,
    compare,
    constant,
    decimal_literal,
    equal,
    float_literal,
    in_list,
    is_null,
    logical_and,
    logical_not,
    logical_or,
    negate,
    prop,
    string_test,
)

__all__ = ["CompiledSelector", "FilterExpressionError", "compile_selector"]

# -- tokens (SelectorParser.jj: keywords, literals and identifiers ignore case) ---------------------------------------

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH",
                      "ENDSWITH"})
EOF_KIND = "<EOF>"
DECIMAL, FLOAT, STRING, ID = "<DECIMAL_LITERAL>", "<FLOATING_POINT_LITERAL>", "<STRING_LITERAL>", "<ID>"
# Alternatives in an order that gives JavaCC's longest match at each position.
_TOKEN = re.compile(r"""
    (?P<skip>[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<decimal>0|[1-9][0-9]*[lL]?)
  | (?P<string>'(?:''|[^'])*')
  | (?P<id>[a-zA-Z_$][a-zA-Z0-9_$]*)
  | (?P<op><>|>=|<=|[=><(),+-])
""", re.VERBOSE)
_KINDS = {"float": FLOAT, "decimal": DECIMAL, "string": STRING}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # a keyword in upper case, an operator, or one of the <...> kinds
    image: str
    pos: int


class Lexer:
    """Tokens on demand: like JavaCC's token manager, text past the last token the parser looked at is never read,
    so a lexical error there goes unnoticed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def next_token(self) -> Token:
        text = self.text
        while True:
            if self.pos >= len(text):
                return Token(EOF_KIND, "", max(len(text) - 1, 0))  # JavaCC puts <EOF> on the last char read
            match = _TOKEN.match(text, self.pos)
            if match is None:
                raise self._lexical_error()
            start, self.pos = self.pos, match.end()
            group = match.lastgroup
            if group == "skip":
                continue
            image = match.group()
            if group == "id":
                upper = image.upper()
                return Token(upper if upper in KEYWORDS else ID, image, start)
            return Token(_KINDS.get(group or "", image), image, start)

    def _lexical_error(self) -> JavaThrow:
        line, column = position(self.text, self.pos)
        char = self.text[self.pos]
        return JavaThrow(f'{LEXICAL}: Lexical error at line {line}, column {column}.  Encountered: "{char}" '
                         f'({ord(char)}), after : ""')


def position(text: str, pos: int) -> tuple[int, int]:
    """JavaCC's 1-based line and column of ``text[pos]``."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


# -- the grammar (one method per production of SelectorParser.jj) -----------------------------------------------------

_ORDER = frozenset({">", ">=", "<", "<="})
_STRING_OPS = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})
_AFTER_NOT = _STRING_OPS | {"BETWEEN", "IN"}
_PRIMARY = frozenset({"TRUE", "FALSE", "NULL", DECIMAL, FLOAT, STRING, ID, "("})
_EXPECTING_OPERAND = "\nWas expecting one of:\n" + "".join(
    f"    {kind} ...\n" for kind in ('"NOT"', '"TRUE"', '"FALSE"', '"NULL"', DECIMAL, FLOAT, STRING, ID, '"("', '"-"',
                                  '"+"')) + "    "


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lexer = Lexer(text)
        self.ahead: list[Token] = []

    def peek(self, k: int = 0) -> Token:
        while len(self.ahead) <= k:
            self.ahead.append(self.lexer.next_token())
        return self.ahead[k]

    def take(self, kind: str | None = None) -> Token:
        token = self.peek()
        if kind is not None and token.kind != kind:
            single = kind in (STRING, "(")  # where Java expects that one token and nothing else
            raise self.error(token, f"\nWas expecting:\n    {_image(kind)} ...\n    " if single else "")
        self.ahead.pop(0)
        return token

    def error(self, token: Token, expected: str = "") -> JavaThrow:
        """ParseException's text; the "Was expecting" list only where an operand was expected (Java's list
        depends on the parser's state)."""
        line, column = position(self.text, token.pos)
        seen = EOF_KIND if token.kind == EOF_KIND else f" {_image(token.kind)} \"{token.image} \""
        return JavaThrow(f'{PARSE}: Encountered "{seen}" at line {line}, column {column}.{expected}')

    def selector(self) -> Node:
        """JmsSelector: one boolean expression; whatever follows it is not read."""
        return as_boolean(self.or_expression())

    def or_expression(self) -> Node:
        left = self.and_expression()
        while self.peek().kind == "OR":
            self.take()
            right = self.and_expression()  # parsed before either side is checked, as in Java
            left = logical_or(as_boolean(left), as_boolean(right))
        return left

    def and_expression(self) -> Node:
        left = self.equality_expression()
        while self.peek().kind == "AND":
            self.take()
            right = self.equality_expression()
            left = logical_and(as_boolean(left), as_boolean(right))
        return left

    def equality_expression(self) -> Node:
        left = self.comparison_expression()
        while True:
            kind = self.peek().kind
            if kind == "=":
                self.take()
                left = equal(left, self.comparison_expression())
            elif kind == "<>":
                self.take()
                left = logical_not(equal(left, self.comparison_expression()))
            elif kind == "IS":
                self.take()
                negated = self.peek().kind == "NOT"
                if negated:
                    self.take()
                self.take("NULL")
                left = is_null(left, negated=negated)
            else:
                return left

    def comparison_expression(self) -> Node:
        left = self.unary_expression()
        while True:
            kind = self.peek().kind
            negated = kind == "NOT"
            if negated:
                if self.peek(1).kind not in _AFTER_NOT:
                    raise self.error(self.peek())
                self.take()
                kind = self.peek().kind
            if kind in _ORDER and not negated:
                self.take()
                left = compare(kind, left, self.unary_expression())
            elif kind in _STRING_OPS:
                self.take()
                left = string_test(kind, left, self.string_literal(), negated=negated)
            elif kind == "BETWEEN":
                self.take()
                low = self.unary_expression()
                self.take("AND")
                left = between(left, low, self.unary_expression(), negated=negated)
            elif kind == "IN":
                self.take()
                left = in_list(left, self.string_list(), negated=negated)
            else:
                return left

    def string_list(self) -> list[str]:
        self.take("(")
        items = [self.string_literal()]
        while self.peek().kind == ",":
            self.take()
            items.append(self.string_literal())
        self.take(")")
        return items

    def unary_expression(self) -> Node:
        kind = self.peek().kind
        if kind == "+":
            self.take()
            return self.unary_expression()
        if kind == "-":
            self.take()
            return negate(self.unary_expression())
        if kind == "NOT":
            self.take()
            return logical_not(as_boolean(self.unary_expression()))
        if kind in _PRIMARY:
            return self.primary_expression()
        raise self.error(self.peek(), _EXPECTING_OPERAND)

    def primary_expression(self) -> Node:
        token = self.take()
        if token.kind == ID:
            return prop(token.image)
        if token.kind == "(":
            inner = self.or_expression()
            self.take(")")
            return inner
        return self.literal(token)

    def literal(self, token: Token) -> Node:
        if token.kind == STRING:
            return constant(_unquote(token.image))
        if token.kind == DECIMAL:
            return decimal_literal(token.image)
        if token.kind == FLOAT:
            return float_literal(token.image)
        return constant({"TRUE": True, "FALSE": False, "NULL": None}[token.kind], BOOLEAN_CONSTANT)

    def string_literal(self) -> str:
        return _unquote(self.take(STRING).image)


def _unquote(image: str) -> str:
    return image[1:-1].replace("''", "'")


def _image(kind: str) -> str:
    """The tokenImage JavaCC prints for a kind: <ID> as is, a keyword or an operator quoted."""
    return kind if kind.startswith("<") else f'"{kind}"'


# -- compiled selectors -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    """A parsed selector. ``matches`` is the broker's decision (ExpressionMessageFilter.isMatchedByCommitLog: only
    TRUE selects, and an evaluation Java would abort selects nothing); ``evaluate`` returns the three-valued result
    and raises JavaThrow where Java's evaluate() throws."""

    expression: str
    text: str  # Java's toString() of the parsed expression
    evaluate: Evaluator

    def matches(self, properties: Properties) -> bool:
        try:
            return self.evaluate(properties) is True
        except JavaThrow:
            return False


def parse(expression: str) -> Node:
    """The expression tree of ``expression``; JavaThrow as Java's parser or expression classes throw."""
    return Parser(expression).selector()


@functools.lru_cache(maxsize=1024)
def compile_selector(expression: str) -> CompiledSelector:
    """SelectorParser.parse, cached like Java's PARSE_CACHE (a subscription compiles once, then every pull of it
    hits the cache). FilterExpressionError with Java's reason text when ``expression`` is no valid selector."""
    try:
        node = parse(expression)
    except JavaThrow as err:
        raise FilterExpressionError(str(err)) from None
    except RecursionError:
        raise FilterExpressionError(f"{PARSE}: the expression nests too deeply") from None
    return CompiledSelector(expression, node.text, node.fn)


