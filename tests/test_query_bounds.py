"""A search's work is bounded where the query enters (tools.bounded_query): a query longer than
MAX_QUERY_CHARS is refused at once with a tool error saying so, whatever words it repeats, and the
server goes on serving; shorter long queries are searched as before. The tokenizer takes each
distinct word once, so repeats cost the scan only."""

from __future__ import annotations

from pathlib import Path

from memory_helpers import (  # noqa: F401  (era and memory_servers are fixtures)
    MemoryServers,
    entity,
    era,
    memory_servers,
    undated,
)

from memory_server.index import ranking
from memory_server.tools import MAX_QUERY_CHARS, MAX_QUERY_WORDS

WORDS = " ".join(f"word{n}" for n in range(MAX_QUERY_WORDS - 1))


def repeated(words: str, length: int) -> str:
    return ((words + " ") * (length // (len(words) + 1) + 1))[:length]


def test_a_query_of_megabytes_of_repeated_words_is_refused_at_once(memory_servers: MemoryServers, era: str,
                                                                   tmp_path: Path) -> None:
    client = memory_servers.client(era, tmp_path / "memory.jsonl")
    client.ok("create_entities", {"entities": [entity("Ann", "person", ["word7 likes tea"])]})
    flood = repeated(WORDS, 12_000_000)
    message = client.tool_error("search_nodes", {"query": flood})
    assert f"{len(flood):,} characters long" in message and f"at most {MAX_QUERY_CHARS:,}" in message
    assert "a few specific words" in message
    just_over = repeated("tea ", MAX_QUERY_CHARS + 1)
    assert f"at most {MAX_QUERY_CHARS:,}" in client.tool_error("search_nodes", {"query": just_over})
    # The longest query taken is searched, and the server still answers everyone.
    # (of a thousand words of which Ann's fact holds one, no fact is evidence: empty arrays; a
    # query of her fact's words, repeated to the longest, finds her)
    longest = repeated(WORDS, MAX_QUERY_CHARS)
    assert client.ok("search_nodes", {"query": longest}) == {"entities": [], "relations": []}
    longest = repeated("word7 likes tea", MAX_QUERY_CHARS)
    assert [item["name"] for item in client.ok("search_nodes", {"query": longest})["entities"]] == ["Ann"]
    assert client.ok("search_nodes", {"query": "tea"})["entities"][0]["name"] == "Ann"
    assert undated(client.graph())["entities"] == [entity("Ann", "person", ["word7 likes tea"])]


def test_too_many_distinct_words_is_still_said_first(memory_servers: MemoryServers, tmp_path: Path) -> None:
    client = memory_servers.client("legacy", tmp_path / "memory.jsonl")
    flood = " ".join(f"w{n}" for n in range(1_100_000))
    assert f"more than {MAX_QUERY_WORDS} distinct words" in client.tool_error("search_nodes", {"query": flood})


def test_repeated_words_give_the_terms_of_the_words_once() -> None:
    for words in (WORDS, "Who plays the cello?", "the the the", "Café CAFÉ café 北京 北京"):
        many = " ".join([words] * 40)
        assert ranking.query_terms(many) == ranking.query_terms(words)
        assert ranking.query_terms(many, question_words=False) == ranking.query_terms(words, question_words=False)
