"""Java's notations that transform keys are written in: a literal as Connect's Values.parseString reads it, a
java.util.regex replacement ($1, ${name}), and a java.text.SimpleDateFormat pattern. Written by hand: no Python
library reads these Java forms."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from connectors.kafka_connect.data import Schema, decimal_schema

_INT_RANGES = (("INT8", 1 << 7), ("INT16", 1 << 15), ("INT32", 1 << 31), ("INT64", 1 << 63))
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def parse_literal(text: str | None) -> tuple[Schema | None, Any]:
    """A header literal as Values.parseString types it: booleans, the smallest integer type that holds a whole
    number, FLOAT32/FLOAT64 or Decimal for the others, else the text as a STRING. (Connect also reads arrays, maps
    and dates there; those stay text here.)"""
    if text is None or text.strip() == "null":
        return None, None
    stripped = text.strip()
    if stripped in ("true", "false"):
        return Schema("BOOLEAN"), stripped == "true"
    if stripped and _NUMBER.fullmatch(stripped):
        try:
            number = Decimal(stripped)
        except InvalidOperation:
            return Schema("STRING"), text
        return _number_schema_and_value(number)
    return Schema("STRING"), text


def _number_schema_and_value(number: Decimal) -> tuple[Schema, Any]:
    magnitude = abs(number)
    exact_range = magnitude <= Decimal("1e19") and (magnitude >= 1 or magnitude == 0)
    if exact_range and number == number.to_integral_value():
        whole = int(number)
        for type_name, bound in _INT_RANGES:
            if -bound <= whole < bound:
                return Schema(type_name), whole
    scale = -number.as_tuple().exponent
    if scale != 0:
        as_float = float(number)
        if abs(as_float) <= 3.4028234663852886e38:
            return Schema("FLOAT32"), as_float
        if as_float not in (float("inf"), float("-inf")):
            return Schema("FLOAT64"), as_float
    return dataclasses.replace(decimal_schema(scale), version=1), number  # Connect's Decimal schema is version 1


_JAVA_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")
_JAVA_BACKREFERENCE = re.compile(r"\\k<([A-Za-z][A-Za-z0-9]*)>")


def java_regex(pattern: str) -> re.Pattern:
    """A java.util.regex pattern compiled by Python's re: the two differ in how a named group is written
    ((?<name>...) and \\k<name>); re.error for a pattern neither reads."""
    pattern = _JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern)
    return re.compile(_JAVA_BACKREFERENCE.sub(r"(?P=\1)", pattern))


_JAVA_GROUP = re.compile(r"\\(.)|\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}|\$")


def java_replacement(replacement: str) -> Callable[[re.Match], str]:
    """Matcher.replaceFirst's replacement: $n and ${name} are groups, a backslash escapes the next character; a
    lone $ is an error (Java's IllegalArgumentException), raised here when the key is read."""
    parts: list[str | int | tuple[str, str]] = []
    position = 0
    for found in _JAVA_GROUP.finditer(replacement):
        parts.append(replacement[position:found.start()])
        escaped, number, name = found.groups()
        if escaped is not None:
            parts.append(escaped)
        elif number is not None:
            parts.append(int(number))
        elif name is not None:
            parts.append(("name", name))
        else:
            raise ValueError("a '$' in the replacement must name a group: $1 or ${name} (write \\$ for a dollar)")
        position = found.end()
    parts.append(replacement[position:])

    def expand(match: re.Match) -> str:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            else:
                group = match.group(part[1] if isinstance(part, tuple) else part)
                out.append(group or "")
        return "".join(out)

    return expand


# SimpleDateFormat letters -> how a UTC datetime renders them, by the letter and how many times it repeats.
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _field(letter: str, count: int, at: dt.datetime) -> str:
    if letter in "yY":
        return f"{at.year % 100:02d}" if count == 2 else f"{at.year:0{count}d}"
    if letter == "M":
        if count >= 4:
            return _MONTHS[at.month - 1]
        if count == 3:
            return _MONTHS[at.month - 1][:3]
        return f"{at.month:0{count}d}"
    numbers = {"d": at.day, "H": at.hour, "k": at.hour or 24, "K": at.hour % 12, "h": at.hour % 12 or 12,
               "m": at.minute, "s": at.second, "D": at.timetuple().tm_yday, "u": at.isoweekday()}
    if letter in numbers:
        return f"{numbers[letter]:0{count}d}"
    if letter == "S":
        return f"{at.microsecond // 1000:0{count}d}"
    if letter == "E":
        return _DAYS[at.weekday()] if count >= 4 else _DAYS[at.weekday()][:3]
    if letter == "a":
        return "AM" if at.hour < 12 else "PM"
    if letter in "zZX":
        return {"z": "UTC", "Z": "+0000"}.get(letter, "Z")
    raise ValueError(f"the pattern letter '{letter}' is not supported here")


_PATTERN_LETTERS = set("GyYMLwWDdFEuaHkKhmsSzZX")


def _tokens(pattern: str) -> list[tuple[str, int] | str]:
    """A SimpleDateFormat pattern as (letter, count) fields and literal texts ('text' quoted, '' a quote)."""
    tokens: list[tuple[str, int] | str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end == i + 1:
                tokens.append("'")
                i += 2
                continue
            if end < 0:
                raise ValueError("an unterminated quote in the pattern")
            tokens.append(pattern[i + 1:end])
            i = end + 1
        elif char.isascii() and char.isalpha():
            if char not in _PATTERN_LETTERS:
                raise ValueError(f"illegal pattern character '{char}'")
            count = 1
            while i + count < len(pattern) and pattern[i + count] == char:
                count += 1
            tokens.append((char, count))
            i += count
        else:
            tokens.append(char)
            i += 1
    return tokens


def simple_date_format(pattern: str) -> Callable[[int], str]:
    """A formatter of milliseconds since the epoch, in UTC, by a SimpleDateFormat pattern. A pattern letter it cannot
    render raises ValueError when the key is read."""
    tokens = _tokens(pattern)
    probe = dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
    for token in tokens:
        if isinstance(token, tuple):
            _field(*token, probe)  # an unsupported letter fails here, at load

    def format_ms(timestamp_ms: int) -> str:
        at = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=timestamp_ms)
        return "".join(token if isinstance(token, str) else _field(*token, at) for token in tokens)

    return format_ms


# The finest time a pattern letter shows, in milliseconds (every other letter shows a day or more).
_LETTER_RESOLUTION_MS = {"S": 1, "s": 1_000, "m": 60_000, "H": 3_600_000, "k": 3_600_000, "K": 3_600_000,
                         "h": 3_600_000, "a": 3_600_000}
DAY_MS = 86_400_000


def simple_date_resolution_ms(pattern: str) -> int:
    """The span of time (ms, UTC) within which a SimpleDateFormat pattern writes the same text: timestamps floored to
    it format alike (a day for yyyyMMdd, an hour for yyyyMMddHH)."""
    return min((_LETTER_RESOLUTION_MS.get(token[0], DAY_MS) for token in _tokens(pattern) if isinstance(token, tuple)),
               default=DAY_MS)


_PARSED_NUMBERS = {"y": "year", "Y": "year", "M": "month", "d": "day", "H": "hour", "k": "hour", "m": "minute",
                   "s": "second", "S": "millisecond"}


def simple_date_parser(pattern: str) -> Callable[[str], int]:
    """A parser of texts written by a SimpleDateFormat pattern, in UTC, to milliseconds since the epoch; ValueError for
    a text the pattern does not match. Numbers, month names and literal texts are read (a zone letter reads Z or
    +hh:mm); a pattern letter it cannot read raises ValueError when the key is read."""
    tokens = _tokens(pattern)
    parts, names = [], []
    for index, token in enumerate(tokens):
        if isinstance(token, str):
            parts.append(re.escape(token))
            continue
        letter, count = token
        abutting = index + 1 < len(tokens) and isinstance(tokens[index + 1], tuple)
        if letter in _PARSED_NUMBERS or (letter == "M" and count <= 2):
            parts.append(rf"([+-]?\d{{{count}}})" if abutting else r"([+-]?\d+)")
            names.append(_PARSED_NUMBERS[letter])
        elif letter == "M":
            parts.append("(" + "|".join(m[:3] if count == 3 else m for m in _MONTHS) + ")")
            names.append("month_name")
        elif letter == "E":
            parts.append("(?:" + "|".join(d if count >= 4 else d[:3] for d in _DAYS) + ")")
        elif letter == "a":
            parts.append("(AM|PM)")
            names.append("half")
        elif letter in "zZX":
            parts.append(r"(Z|UTC|GMT|[+-]\d\d:?\d\d)")
            names.append("zone")
        else:
            raise ValueError(f"the pattern letter '{letter}' cannot be read here")
    matcher = re.compile("".join(parts), re.IGNORECASE)

    def parse(text: str) -> int:
        found = matcher.fullmatch(text)
        if found is None:
            raise ValueError(f"{text!r} does not match the pattern {pattern!r}")
        values = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "millisecond": 0}
        offset_minutes = 0
        for name, group in zip(names, found.groups()):
            if name == "month_name":
                values["month"] = [m[:len(group)].lower() for m in _MONTHS].index(group.lower()) + 1
            elif name == "half":
                values["hour"] = values["hour"] % 12 + (12 if group.upper() == "PM" else 0)
            elif name == "zone":
                if group[0] in "+-":
                    digits = group[1:].replace(":", "")
                    offset_minutes = (int(digits[:2]) * 60 + int(digits[2:])) * (1 if group[0] == "+" else -1)
            else:
                values[name] = int(group)
        at = dt.datetime(values["year"], 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
            days=_days_before(values["year"], values["month"]) + values["day"] - 1, hours=values["hour"],
            minutes=values["minute"] - offset_minutes, seconds=values["second"], milliseconds=values["millisecond"])
        return (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)

    return parse


def _days_before(year: int, month: int) -> int:
    """Days from January 1st to the first of `month` (a month past 12 rolls into the next year, as Java's lenient
    calendar does)."""
    extra_years, month_index = divmod(month - 1, 12)
    first = dt.date(year + extra_years, month_index + 1, 1)
    return (first - dt.date(year, 1, 1)).days
