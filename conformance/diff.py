"""Structural comparison of two JSON values, reporting each difference by path.

JSON semantics, not Python's: key order is insignificant, ``1`` equals ``1.0`` (a
JavaScript peer cannot tell them apart), and ``true`` is not ``1``. A volatile path
accepts any value as long as it is present on both sides or on neither; an optional one
(written with a final ``?``) also accepts it missing on either side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from conformance.paths import Path, Pattern, matches


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


@dataclass(frozen=True)
class Difference:
    path: Path
    expected: Any
    actual: Any


def diff(expected: Any, actual: Any, volatile: Sequence[Pattern] = ()) -> list[Difference]:
    return list(_walk(expected, actual, (), tuple(volatile)))


def _walk(expected: Any, actual: Any, path: Path, volatile: tuple[Pattern, ...]):
    present_on_both = expected is not ABSENT and actual is not ABSENT
    if any((present_on_both or pattern.optional) and matches(pattern, path) for pattern in volatile):
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(key for key in actual if key not in expected)]:
            yield from _walk(expected.get(key, ABSENT), actual.get(key, ABSENT), (*path, key), volatile)
    elif isinstance(expected, list) and isinstance(actual, list):
        for index in range(max(len(expected), len(actual))):
            yield from _walk(_item(expected, index), _item(actual, index), (*path, index), volatile)
    elif not same_scalar(expected, actual):
        yield Difference(path, expected, actual)


def _item(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else ABSENT


def same_scalar(expected: Any, actual: Any) -> bool:
    if _is_number(expected) and _is_number(actual):
        return bool(expected == actual)
    if isinstance(expected, (dict, list)) or isinstance(actual, (dict, list)):
        return False
    return type(expected) is type(actual) and expected == actual


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
