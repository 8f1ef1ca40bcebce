"""conformance/dated.py: a dated field of an answer's entity matches by its documented shape, each
numbered rule with a case it accepts and cases it refuses (refused: the difference names the field)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.dated import undated
from conformance.diff import ABSENT, Difference, diff

PLAIN = {"name": "Ada", "entityType": "person", "observations": ["Wrote the notes", "Born in 1815"]}


def answer(entity: dict[str, Any]) -> dict[str, Any]:
    return {"result": {"structuredContent": {"entities": [entity], "relations": []}}}


def differences(expected: Any, actual: Any) -> list[Difference]:
    return diff(*undated(expected, actual))


def field_path(key: str) -> tuple[Any, ...]:
    return ("result", "structuredContent", "entities", 0, key)


@pytest.mark.parametrize("day", ["2026", "2026-12", "2026-12-01", "0455-06-02", "9999-12-31", "2024-02-29"])
def test_1_a_created_or_updated_date_of_any_precision_matches(day: str) -> None:
    assert differences(answer(PLAIN), answer({**PLAIN, "createdAt": day, "updatedAt": day})) == []


@pytest.mark.parametrize("day", ["2026-13-01", "2026-02-30", "2023-02-29", "0000", "26-12-01", "2026-12-01T10:00:00Z",
                                 "", 20261201, None, "yesterday"])
def test_1_anything_else_as_a_created_date_is_a_difference(day: Any) -> None:
    assert differences(answer(PLAIN), answer({**PLAIN, "createdAt": day})) == [
        Difference(field_path("createdAt"), ABSENT, day)]


@pytest.mark.parametrize("dates", [["2026-12-01", None], ["happened 2023-05-07, recorded 2026-12-01", "happened 1815"],
                                   [None, "happened 2023-05"]])
def test_2_observation_dates_parallel_to_the_observations_match(dates: list[Any]) -> None:
    assert differences(answer(PLAIN), answer({**PLAIN, "observationDates": dates})) == []


@pytest.mark.parametrize("dates", [["2026-12-01"], ["2026-12-01", None, None], "2026-12-01",
                                   ["recorded 2026-12-01", None], ["happened 2023-05-07, recorded later", None],
                                   ["happened ", None], [7, None]])
def test_2_observation_dates_of_another_shape_are_a_difference(dates: Any) -> None:
    found = differences(answer(PLAIN), answer({**PLAIN, "observationDates": dates}))
    assert found and all(item.path[:5] == field_path("observationDates") for item in found), found


def test_3_observation_authors_parallel_to_the_observations_match() -> None:
    assert differences(answer(PLAIN), answer({**PLAIN, "observationAuthors": ["tests", None]})) == []


@pytest.mark.parametrize("authors", [["tests"], ["tests", ""], ["tests", 3], "tests"])
def test_3_observation_authors_of_another_shape_are_a_difference(authors: Any) -> None:
    assert differences(answer(PLAIN), answer({**PLAIN, "observationAuthors": authors}))


def test_4_a_date_on_either_side_matches_and_nothing_else_of_the_entity_is_spared() -> None:
    dated = {**PLAIN, "createdAt": "2026-11-30", "observationDates": ["2026-11-30", None]}
    assert differences(answer(dated), answer(PLAIN)) == []
    assert differences(answer(dated), answer({**dated, "createdAt": "2027-01-01"})) == []
    changed = {**PLAIN, "observations": ["Wrote the notes", "Born in 1816"], "createdAt": "2026-12-01"}
    assert differences(answer(PLAIN), answer(changed)) == [
        Difference((*field_path("observations"), 1), "Born in 1815", "Born in 1816")]
    # A field that is not a date field, or not on an entity, compares exactly.
    assert differences(answer(PLAIN), answer({**PLAIN, "bornOn": "1815-12-10"})) == [
        Difference(field_path("bornOn"), ABSENT, "1815-12-10")]
    assert differences({"result": {}}, {"result": {"createdAt": "2026-12-01"}}) == [
        Difference(("result", "createdAt"), ABSENT, "2026-12-01")]


def text_answer(entity: dict[str, Any]) -> dict[str, Any]:
    graph = {"entities": [entity], "relations": []}
    return {"result": {"content": [{"type": "text", "text": json.dumps(graph, separators=(",", ":"))}]}}


def test_5_a_json_text_that_differs_only_by_its_dates_matches() -> None:
    dated = {**PLAIN, "createdAt": "2026-12-01", "observationAuthors": ["tests", "tests"]}
    assert differences(text_answer(PLAIN), text_answer(dated)) == []
    resource = {"result": {"contents": [{"uri": "memory://knowledge-graph", "text": json.dumps({"entities": [dated]})}]}}
    assert differences({"result": {"contents": [{"uri": "memory://knowledge-graph",
                                                 "text": json.dumps({"entities": [PLAIN]})}]}}, resource) == []


def test_5_a_json_text_that_differs_otherwise_or_a_plain_text_is_compared_as_text() -> None:
    changed = {**PLAIN, "entityType": "poet", "createdAt": "2026-12-01"}
    [found] = differences(text_answer(PLAIN), text_answer(changed))
    assert found.path == ("result", "content", 0, "text") and "poet" in found.actual
    misdated = {**PLAIN, "createdAt": "2026-12-01T10:00:00Z"}
    assert differences(text_answer(PLAIN), text_answer(misdated))
    plain = {"result": {"content": [{"type": "text", "text": "Created 1 entity"}]}}
    other = {"result": {"content": [{"type": "text", "text": "Created 1 entity on 2026-12-01"}]}}
    assert differences(plain, other) == [Difference(("result", "content", 0, "text"), "Created 1 entity",
                                                    "Created 1 entity on 2026-12-01")]
