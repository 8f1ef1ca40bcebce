"""The memory file's line format: decoding every kind of line, encoding records back."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_server.model.records import (
    LINES_PER_PIECE,
    TOO_DEEP,
    EntityRecord,
    Extended,
    Opaque,
    Rejected,
    RelationRecord,
    decode_file,
    decode_line,
    encode_file,
    encode_line,
    entity_with_extra,
    file_layout,
    join_lines,
    layout_pieces,
    relation_with_extra,
)

ALICE = EntityRecord("Alice", "person", ["likes tea", "born in Lyon"])
KNOWS = RelationRecord("Alice", "Bob", "knows")
ALICE_LINE = b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea","born in Lyon"]}'
KNOWS_LINE = b'{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}'


def test_records_encode_exactly_as_the_reference_writes_them() -> None:
    assert encode_line(ALICE) == ALICE_LINE
    assert encode_line(KNOWS) == KNOWS_LINE


def test_a_file_ends_every_line_with_a_newline() -> None:
    assert encode_file([ALICE, KNOWS]) == ALICE_LINE + b"\n" + KNOWS_LINE + b"\n"
    assert encode_file([]) == b""


def test_encode_then_decode_gives_the_records_back() -> None:
    records = [ALICE, EntityRecord("", "", []), EntityRecord("Ünï\ncode \"q\"", "t\u2028", ["\x00", "é"]), KNOWS]
    assert decode_file(encode_file(records)) == records


def test_a_file_the_reference_wrote_has_no_trailing_newline_and_reads_as_is() -> None:
    assert decode_file(ALICE_LINE + b"\n" + KNOWS_LINE) == [ALICE, KNOWS]


def test_crlf_line_endings_blank_lines_and_a_byte_order_mark_are_accepted() -> None:
    data = b"\xef\xbb\xbf" + ALICE_LINE + b"\r\n\r\n   \n\t\n" + KNOWS_LINE + b"\r\n"
    assert decode_file(data) == [ALICE, KNOWS]


def test_an_empty_file_has_no_records() -> None:
    assert decode_file(b"") == []
    assert decode_file(b"\n\n") == []


def test_the_type_tag_may_come_anywhere_in_the_line() -> None:
    line = b'{"name":"Alice","observations":["likes tea","born in Lyon"],"type":"entity","entityType":"person"}'
    assert decode_line(line, 1) == ALICE


def test_extra_fields_of_a_known_record_are_kept_raw() -> None:
    line = b'{"type":"entity","name":"Alice","entityType":"person","observations":[],"since":{"y": 1e400},"n":1}'
    decoded = decode_line(line, 1)
    assert isinstance(decoded, Extended)
    assert decoded.record == EntityRecord("Alice", "person", [])
    assert {key: bytes(value) for key, value in decoded.extra.items()} == {"since": b'{"y": 1e400}', "n": b"1"}


def test_extra_fields_are_written_after_the_known_ones_byte_for_byte() -> None:
    entity = decode_line(b'{"extra":[1, 2],"type":"entity","name":"A","entityType":"t","observations":["o"]}', 1)
    relation = decode_line(b'{"type":"relation","weight":0.50,"from":"A","to":"B","relationType":"r"}', 2)
    assert isinstance(entity, Extended) and isinstance(relation, Extended)
    assert isinstance(entity.record, EntityRecord) and isinstance(relation.record, RelationRecord)
    assert encode_line(entity_with_extra(entity.record, entity.extra)) == (
        b'{"type":"entity","name":"A","entityType":"t","observations":["o"],"extra":[1, 2]}')
    assert encode_line(relation_with_extra(relation.record, relation.extra)) == (
        b'{"type":"relation","from":"A","to":"B","relationType":"r","weight":0.50}')


@pytest.mark.parametrize("line", [
    b'{"type":"note","text":"a record type from a newer version"}',
    b'{"no":"type at all"}',
    b'{"type":"entity","name":5,"entityType":"person","observations":[]}',
    b'{"type":"entity","name":"Alice","entityType":"person"}',
    b'{"type":"relation","from":"A","to":"B","relationType":null}',
    b'{"type":["entity"],"name":"A","entityType":"t","observations":[]}',
    b'[1, 2, 3]',
    b'"just a string"',
    b'42',
    b'{"type":"entity","name":"\\ud800","entityType":"t","observations":[]}',
    b'{"type":"entity","name":"A","entityType":"t","observations":[1e400]}',
])
def test_json_that_is_no_usable_record_is_kept_verbatim(line: bytes) -> None:
    assert json.loads(line) is not None  # valid JSON for the reference's parser
    assert decode_line(line, 7) == Opaque(line)


def test_a_line_ending_in_cr_is_kept_without_it() -> None:
    assert decode_line(b'{"type":"note"}\r', 1) == Opaque(b'{"type":"note"}')


@pytest.mark.parametrize(("line", "reason"), [
    (b'{"type":"entity","name":"Alice"', "not valid JSON"),
    (b"not json at all", "not valid JSON"),
    (b'{"type":"entity","name":"A","entityType":"t","observations":[NaN]}', "not valid JSON"),
    (b'{"a":1}{"b":2}', "not valid JSON"),
    (b'{"type":"entity","name":"\xff\xfe","entityType":"t","observations":[]}', "not valid UTF-8"),
    (b"\xc3(\r", "not valid UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, TOO_DEEP),
])
def test_a_line_that_is_not_json_is_rejected_byte_for_byte(line: bytes, reason: str) -> None:
    assert decode_line(line, 3) == Rejected(line, 3, reason)


def test_one_bad_line_does_not_spoil_the_others() -> None:
    data = ALICE_LINE + b"\n{broken\n\n" + b'{"type":"note"}\n' + KNOWS_LINE
    assert decode_file(data) == [ALICE, Rejected(b"{broken", 2, "not valid JSON"), Opaque(b'{"type":"note"}'), KNOWS]


def test_opaque_lines_encode_verbatim_among_records() -> None:
    line = b'{"type":"note",  "spacing":"kept"}'
    assert encode_file([ALICE, msgspec.Raw(line)]) == ALICE_LINE + b"\n" + line + b"\n"


def test_a_string_with_an_unpaired_surrogate_cannot_be_encoded() -> None:
    with pytest.raises(UnicodeEncodeError):
        encode_file([EntityRecord("\ud800", "t", [])])


@pytest.mark.parametrize("count", [0, 1, LINES_PER_PIECE - 1, LINES_PER_PIECE, LINES_PER_PIECE + 1, 3 * LINES_PER_PIECE + 7])
def test_a_file_written_in_pieces_is_every_line_with_its_newline(count: int) -> None:
    lines = [encode_line(EntityRecord(f"e{n}", "t", [])) for n in range(count)]
    pieces = layout_pieces(file_layout([lines]))
    assert b"".join(pieces) == join_lines(iter(lines)) == b"".join(line + b"\n" for line in lines)
    assert len(pieces) == -(-count // LINES_PER_PIECE)  # no empty piece at the end, however the lines fall


part_lines = st.lists(st.binary(min_size=1, max_size=6).filter(lambda line: b"\n" not in line), max_size=40)


@settings(max_examples=300)
@given(parts=st.lists(part_lines, min_size=1, max_size=3), edits=st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 60), st.sampled_from(["replace", "insert", "delete", "append"]),
              st.binary(min_size=1, max_size=6).filter(lambda line: b"\n" not in line)), max_size=4),
       run=st.integers(1, 7))
def test_a_layout_is_the_whole_file_and_reuses_the_runs_that_stayed_the_same(
        parts: list[list[bytes]], edits: list[tuple[int, int, str, bytes]], run: int) -> None:
    before = file_layout(parts, run_lines=run)  # many runs from few lines
    after_parts = [list(part) for part in parts]
    for number, where, kind, line in edits:
        part = after_parts[number % len(after_parts)]
        if kind == "append" or not part:
            part.append(line)
        elif kind == "replace":
            part[where % len(part)] = line
        elif kind == "insert":
            part.insert(where % len(part), line)
        else:
            del part[where % len(part)]
    after = file_layout(after_parts, before, run_lines=run)
    for layout, lines in ((before, parts), (after, after_parts)):
        assert b"".join(layout_pieces(layout)) == b"".join(line + b"\n" for part in lines for line in part)
    for number, runs in enumerate(after):
        for index, kept in enumerate(runs):
            old = before[number][index] if number < len(before) and index < len(before[number]) else None
            # A run of the very same lines is the old run itself; any other is joined anew.
            assert (kept is old) == (old is not None and old.lines == kept.lines)
