"""The message search's filter language: parsed into a small AST here, never evaluated as code.

::

    value.status == "failed" and headers.source != "batch"
    key startswith "user-" or (offset >= 1000 and value contains "timeout")
    not value.items[0].price < 9.5

Operands: ``key``, ``value`` (the bytes as UTF-8 text), ``offset``, ``partition``,
``timestamp``, ``headers.NAME`` or ``headers["a-name"]`` (a header's value as text), and JSON
paths into the value or key (``value.a.b``, ``value.items[0]``); literals ``"text"``
(``\\"`` and ``\\\\`` escapes), numbers, ``true``, ``false``, ``null``. Operators: ``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=`` (numbers compare as numbers, anything else as text),
``contains``, ``startswith``, ``endswith``; ``and``, ``or``, ``not`` and parentheses. A path
alone tests that it exists and is not null. A missing path is ``null``. No regular
expressions (no catastrophic backtracking) and no function calls: the language cannot do
anything but compare.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "FilterError",
    "Matcher",
    "RecordView",
    "compile_filter",
    "substring_matcher",
]

MAX_EXPRESSION_LENGTH = 2000
_MAX_DEPTH = 40
_ROOTS = ("key", "value", "offset", "partition", "timestamp", "headers")
_COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
_WORD_OPS = ("contains", "startswith", "endswith")
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      | (?P<op>==|!=|<=|>=|<|>)
      | (?P<punct>[().\[\]])
      | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
    )""",
    re.VERBOSE,
)


class FilterError(ValueError):
    """The expression is not valid; the message says where."""


@dataclass
class RecordView:
    """What a filter sees of one record (the JSON of key and value parsed on first use)."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    _json: dict[str, Any] = field(default_factory=dict)

    def text(self, which: str) -> str | None:
        data = self.key if which == "key" else self.value
        return None if data is None else data.decode("utf-8", errors="replace")

    def parsed(self, which: str) -> Any:
        if which not in self._json:
            data = self.key if which == "key" else self.value
            try:
                self._json[which] = None if data is None else json.loads(data)
            except (ValueError, UnicodeDecodeError):
                self._json[which] = _NOT_JSON
        return self._json[which]

    def header(self, name: str) -> str | None:
        for key, data in self.headers:
            if key == name:
                return None if data is None else data.decode("utf-8", errors="replace")
        return None


_NOT_JSON = object()
Matcher = Callable[[RecordView], bool]

# --- AST ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Path:
    root: str
    steps: tuple[str | int, ...]


@dataclass(frozen=True)
class _Compare:
    op: str
    left: _Literal | _Path
    right: _Literal | _Path


@dataclass(frozen=True)
class _Exists:
    path: _Path


@dataclass(frozen=True)
class _Not:
    inner: _Node


@dataclass(frozen=True)
class _BoolOp:
    op: str  # "and" | "or"
    items: tuple[_Node, ...]


_Node = _Compare | _Exists | _Not | _BoolOp

# --- parsing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return found
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise FilterError(f"unexpected {text[at]!r} at character {at + 1}")
        kind = match.lastgroup or ""
        found.append(_Token(kind, match.group(kind), match.start(kind)))
        at = match.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise FilterError("the expression ends too early")
        self.at += 1
        return token

    def is_word(self, word: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "name" and token.text.lower() == word

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text:
            raise FilterError(f"expected {text!r} at character {token.at + 1}, got {token.text!r}")

    def parse(self) -> _Node:
        if not self.tokens:
            raise FilterError("the expression is empty")
        node = self.or_()
        token = self.peek()
        if token is not None:
            raise FilterError(f"unexpected {token.text!r} at character {token.at + 1}")
        return node

    def or_(self) -> _Node:
        items = [self.and_()]
        while self.is_word("or"):
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else _BoolOp("or", tuple(items))

    def and_(self) -> _Node:
        items = [self.unary()]
        while self.is_word("and"):
            self.take()
            items.append(self.unary())
        return items[0] if len(items) == 1 else _BoolOp("and", tuple(items))

    def unary(self) -> _Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise FilterError(f"the expression nests deeper than {_MAX_DEPTH} levels")
        try:
            if self.is_word("not"):
                self.take()
                return _Not(self.unary())
            token = self.peek()
            if token is not None and token.text == "(":
                self.take()
                node = self.or_()
                self.expect(")")
                return node
            return self.comparison()
        finally:
            self.depth -= 1

    def comparison(self) -> _Node:
        left = self.operand()
        token = self.peek()
        op = None
        if token is not None and token.kind == "op":
            op = token.text
        elif token is not None and token.kind == "name" and token.text.lower() in _WORD_OPS:
            op = token.text.lower()
        if op is None:
            if not isinstance(left, _Path):
                raise FilterError(f"{left.value!r} alone is not a condition")
            return _Exists(left)
        self.take()
        return _Compare(op, left, self.operand())

    def operand(self) -> _Literal | _Path:
        token = self.take()
        if token.kind == "string":
            return _Literal(_unquote(token))
        if token.kind == "number":
            number = float(token.text)
            exact = number.is_integer() and "." not in token.text and "e" not in token.text.lower()
            return _Literal(int(token.text) if exact else number)
        if token.kind != "name":
            raise FilterError(f"expected a value at character {token.at + 1}, got {token.text!r}")
        word = token.text
        if word in ("true", "false", "null"):
            return _Literal({"true": True, "false": False, "null": None}[word])
        if word not in _ROOTS:
            raise FilterError(
                f"unknown name {word!r} at character {token.at + 1}; one of {', '.join(_ROOTS)}"
            )
        steps: list[str | int] = []
        while (nxt := self.peek()) is not None and nxt.text in (".", "["):
            self.take()
            if nxt.text == ".":
                name = self.take()
                if name.kind != "name":
                    raise FilterError(f"expected a field name at character {name.at + 1}")
                steps.append(name.text)
            else:
                index = self.take()
                if index.kind == "string":
                    steps.append(_unquote(index))
                elif index.kind == "number" and index.text.isdigit():
                    steps.append(int(index.text))
                else:
                    raise FilterError(f"expected an index or a string at character {index.at + 1}")
                self.expect("]")
        if word in ("offset", "partition", "timestamp") and steps:
            raise FilterError(f"{word} has no fields")
        if word == "headers" and len(steps) != 1:
            raise FilterError('a header is named as headers.NAME or headers["NAME"]')
        return _Path(word, tuple(steps))


def _unquote(token: _Token) -> str:
    body = token.text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


# --- evaluation ---------------------------------------------------------------------------


def _resolve(path: _Path, record: RecordView) -> Any:
    root = path.root
    if root == "offset":
        return record.offset
    if root == "partition":
        return record.partition
    if root == "timestamp":
        return record.timestamp
    if root == "headers":
        return record.header(str(path.steps[0]))
    if not path.steps:
        return record.text(root)
    current = record.parsed(root)
    for step in path.steps:
        in_list = isinstance(step, int) and isinstance(current, list)
        if in_list and -len(current) <= int(step) < len(current):
            current = current[int(step)]
        elif isinstance(step, str) and isinstance(current, dict) and step in current:
            current = current[step]
        else:
            return None
    return None if current is _NOT_JSON else current


def _value(operand: _Literal | _Path, record: RecordView) -> Any:
    return operand.value if isinstance(operand, _Literal) else _resolve(operand, record)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any) -> float | None:
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("==", "!="):
        if left is None or right is None or isinstance(left, bool) or isinstance(right, bool):
            equal = left is right if left is None or right is None else left == right
        elif _is_number(left) or _is_number(right):
            a, b = _number(left), _number(right)
            equal = a is not None and a == b
        else:
            equal = _as_text(left) == _as_text(right)
        return equal if op == "==" else not equal
    if left is None or right is None:
        return False
    if op in _WORD_OPS:
        text, part = _as_text(left), _as_text(right)
        if op == "contains":
            return part in text
        return text.startswith(part) if op == "startswith" else text.endswith(part)
    a, b = _number(left), _number(right)
    if a is None or b is None:
        if _is_number(left) or _is_number(right):
            return False
        a_text, b_text = _as_text(left), _as_text(right)
        return _ordered(op, a_text, b_text)
    return _ordered(op, a, b)


def _ordered(op: str, a: Any, b: Any) -> bool:
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _evaluate(node: _Node, record: RecordView) -> bool:
    if isinstance(node, _Compare):
        return _compare(node.op, _value(node.left, record), _value(node.right, record))
    if isinstance(node, _Exists):
        return _resolve(node.path, record) is not None
    if isinstance(node, _Not):
        return not _evaluate(node.inner, record)
    if node.op == "and":
        return all(_evaluate(item, record) for item in node.items)
    return any(_evaluate(item, record) for item in node.items)


def compile_filter(expression: str) -> Matcher:
    """A predicate over ``RecordView`` for ``expression``; ``FilterError`` when invalid."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise FilterError(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    tree = _Parser(expression).parse()
    return lambda record: _evaluate(tree, record)


def substring_matcher(text: str) -> Matcher:
    """Records whose key, value or any header value contains ``text`` (as UTF-8 bytes)."""
    needle = text.encode("utf-8")
    if not needle:
        raise FilterError("the search text is empty")

    def matches(record: RecordView) -> bool:
        if record.key is not None and needle in record.key:
            return True
        if record.value is not None and needle in record.value:
            return True
        return any(
            needle in name.encode("utf-8") or (data is not None and needle in data)
            for name, data in record.headers
        )

    return matches
