"""`-k PATTERN`: which cases run, the way pytest's `-k` reads.

Words are matched, case-insensitively, as substrings of a case's id, section and
keywords; they combine with `and`, `or`, `not` and parentheses. Words side by
side without an operator must all match.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Matcher = Callable[[str], bool]
TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class PatternError(ValueError):
    pass


def compile_pattern(pattern: str | None) -> Matcher:
    if not pattern or not pattern.strip():
        return lambda _words: True
    tokens: list[str] = TOKEN.findall(pattern)
    position = 0

    def peek() -> str | None:
        return tokens[position].lower() if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise PatternError(f"-k {pattern!r} ends too early")
        position += 1
        return tokens[position - 1]

    def alternatives() -> Matcher:
        left = conjunction()
        while peek() == "or":
            take()
            left = _either(left, conjunction())
        return left

    def conjunction() -> Matcher:
        left = negation()
        while peek() not in (None, "or", ")"):
            if peek() == "and":
                take()
            left = _both(left, negation())
        return left

    def negation() -> Matcher:
        if peek() == "not":
            take()
            inner = negation()
            return lambda words: not inner(words)
        token = take()
        if token == "(":
            inner = alternatives()
            if take() != ")":
                raise PatternError(f"-k {pattern!r}: unbalanced parentheses")
            return inner
        if token == ")" or token.lower() in ("and", "or"):
            raise PatternError(f"-k {pattern!r}: unexpected {token!r}")
        word = token.lower()
        return lambda words: word in words

    matcher = alternatives()
    if position != len(tokens):
        raise PatternError(f"-k {pattern!r}: unexpected {tokens[position]!r}")
    return matcher


def _either(a: Matcher, b: Matcher) -> Matcher:
    return lambda words: a(words) or b(words)


def _both(a: Matcher, b: Matcher) -> Matcher:
    return lambda words: a(words) and b(words)
