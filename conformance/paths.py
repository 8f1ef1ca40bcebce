"""Paths into JSON messages: the syntax of volatile paths and of diff output.

A path is a chain of segments from the message root: ``result.serverInfo.version``,
``result.content[0].text``, ``result._meta["io.modelcontextprotocol/serverInfo"].version``.

- ``name`` (letters, digits, ``_``, ``$``, ``-``) is an object key; in a pattern a bare
  all-digit name also matches that array index, so ``content.0.text`` works too.
- ``["any key"]`` is an object key written as a JSON string, for keys holding dots, slashes
  or other characters; ``[3]`` is an array index only.
- ``*`` or ``[*]`` in a pattern matches any single key or index (never several levels).
- A ``?`` at the very end makes the pattern *optional*: as a volatile path it also accepts
  the key being absent on one side, for a field one server sends and another does not
  (``result.instructions?``).

Diff output prints paths in this same syntax so a reported path can be pasted into
``--volatile`` or a header's ``volatile`` list as it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TypeAlias

# A concrete location inside a message: object keys are str, array indices are int.
PathSegment: TypeAlias = str | int
Path: TypeAlias = tuple[PathSegment, ...]

_BARE = re.compile(r"[A-Za-z0-9_$-]+")
_INDEX = re.compile(r"\d+")
# Keys printed bare must not look like indices, or the printed path would be ambiguous.
_PRINTABLE_BARE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


@dataclass(frozen=True)
class Wildcard:
    pass


@dataclass(frozen=True)
class Name:
    """A bare pattern segment: the key itself, or the index it spells."""

    text: str


@dataclass(frozen=True)
class Key:
    text: str


@dataclass(frozen=True)
class Index:
    value: int


PatternSegment: TypeAlias = Wildcard | Name | Key | Index


@dataclass(frozen=True)
class Pattern:
    source: str
    segments: tuple[PatternSegment, ...]
    optional: bool = False


class PathSyntaxError(ValueError):
    pass


def parse_pattern(source: str) -> Pattern:
    optional = source.endswith("?")
    body = source[:-1] if optional else source
    segments: list[PatternSegment] = []
    position = 0
    expect_separator = False
    while position < len(body):
        char = body[position]
        if char == "[":
            segment, position = _parse_bracket(body, position + 1)
            segments.append(segment)
            expect_separator = True
            continue
        if expect_separator:
            if char != ".":
                raise PathSyntaxError(f"{source!r}: expected '.' or '[' at offset {position}")
            position += 1
        segment, position = _parse_bare(body, position)
        segments.append(segment)
        expect_separator = True
    if not segments:
        raise PathSyntaxError("an empty path names nothing; write at least one key")
    return Pattern(source, tuple(segments), optional)


def _parse_bare(source: str, position: int) -> tuple[PatternSegment, int]:
    if source.startswith("*", position):
        return Wildcard(), position + 1
    match = _BARE.match(source, position)
    if match is None:
        raise PathSyntaxError(
            f"{source!r}: expected a key at offset {position}; "
            'write keys with other characters as ["key"]'
        )
    return Name(match.group()), match.end()


def _parse_bracket(source: str, position: int) -> tuple[PatternSegment, int]:
    segment: PatternSegment
    if source.startswith("*", position):
        segment, position = Wildcard(), position + 1
    elif source.startswith('"', position):
        try:
            text, position = json.JSONDecoder().raw_decode(source, position)
        except json.JSONDecodeError as error:
            raise PathSyntaxError(f"{source!r}: bad quoted key: {error.msg}") from None
        segment = Key(text)
    else:
        match = _INDEX.match(source, position)
        if match is None:
            raise PathSyntaxError(
                f'{source!r}: inside [...] write *, an index or a "quoted key" (offset {position})'
            )
        segment, position = Index(int(match.group())), match.end()
    if not source.startswith("]", position):
        raise PathSyntaxError(f"{source!r}: missing ']' at offset {position}")
    return segment, position + 1


def matches(pattern: Pattern, path: Path) -> bool:
    return len(pattern.segments) == len(path) and all(
        _segment_matches(wanted, actual) for wanted, actual in zip(pattern.segments, path)
    )


def _segment_matches(wanted: PatternSegment, actual: PathSegment) -> bool:
    match wanted:
        case Wildcard():
            return True
        case Name(text):
            return str(actual) == text if isinstance(actual, int) else actual == text
        case Key(text):
            return isinstance(actual, str) and actual == text
        case Index(value):
            return isinstance(actual, int) and actual == value
    return False


def format_path(path: Path) -> str:
    if not path:
        return "(whole message)"
    parts: list[str] = []
    for segment in path:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _PRINTABLE_BARE.fullmatch(segment):
            parts.append(f".{segment}" if parts else segment)
        else:
            parts.append(f"[{json.dumps(segment, ensure_ascii=False)}]")
    return "".join(parts)
