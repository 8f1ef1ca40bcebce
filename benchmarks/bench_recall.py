"""Retrieval benchmark: natural questions sent verbatim to search_nodes, over memories whose answers are known.

Run from the repository root (on demand; pytest does not collect it):

    .venv/bin/python benchmarks/bench_recall.py                                  # synthetic memory, both servers
    .venv/bin/python benchmarks/bench_recall.py --locomo /path/to/locomo10_v2    # and LoCoMo, both mappings
    .venv/bin/python benchmarks/bench_recall.py --locomo DIR --servers none      # in-process rankers only
    .venv/bin/python benchmarks/bench_recall.py --personal tuning                # a personal memory, by category
    .venv/bin/python benchmarks/bench_recall.py --personal held-out              # (never tune on held-out)
    .venv/bin/python benchmarks/bench_recall.py --personal second                # another memory, written apart
    .venv/bin/python benchmarks/bench_recall.py --personal third                 # and a third
    .venv/bin/python benchmarks/bench_recall.py --personal fourth                # and a fourth
    .venv/bin/python benchmarks/bench_recall.py --personal fifth                 # and a fifth
    .venv/bin/python benchmarks/bench_recall.py --personal sixth                 # and a sixth
    .venv/bin/python benchmarks/bench_recall.py --personal seventh               # and a seventh
    .venv/bin/python benchmarks/bench_recall.py --personal eighth                # and an eighth
    .venv/bin/python benchmarks/bench_recall.py --personal ninth                 # and a ninth
    .venv/bin/python benchmarks/bench_recall.py --personal tenth                 # and a tenth
    .venv/bin/python benchmarks/bench_recall.py --personal eleventh              # and an eleventh
    .venv/bin/python benchmarks/bench_recall.py --personal twelfth               # and a twelfth

Memories:

- synthetic: people, places, projects and chat turns generated here (deterministic), with
  questions phrased as people ask them and the entities that answer them;
- people: 20 people holding about 130 facts each (one entity per person, every fact an
  observation, as the README's prompt keeps them), with about 1,400 questions each answered by
  one fact, phrased in other words than the fact where people would;
- LoCoMo (``--locomo DIR``, the ``*.json`` conversations of the public LoCoMo data set, CC BY-NC:
  read from where you keep it, never copied into this repository): one entity per dialog turn,
  one memory per conversation, every question with evidence asked of its conversation's memory.
  Two mappings of a turn to an entity (``turn``: named by its dialog id, the speaker in the
  text; ``message``: named by speaker and id, the date apart), so that ranking is not tuned to one;
  and a third, ``speaker``, that merges the facts per speaker (one entity per person, each turn one
  of its observations: people holding hundreds of facts), where a question answered by one turn
  is scored by where that fact ends in the answer.

Each question goes verbatim, with no other argument, to ``search_nodes`` of a real server
process over stdio (this server and the npm reference, installed with npm into a temporary
directory), and to in-process askers: ``plain`` and ``default`` (the entity rankers, answering
whole entities, as search_nodes did before its answers were made of facts), ``fact BM25 top 10``
(plain BM25 over single facts, each fact a document with its entity's name, answering its best
ten), ``ours (in-process)`` (search_nodes' first page without a process) and, with ``--ranker
ready``, ``ours (model ready)`` (the tools' search_nodes over a store on a real file, dates and
the model on, asked once every fact has its vector: a stdio process answers its first questions
while it still embeds, so its figures depend on the machine's speed).
Reported per memory and asker: recall@5 and recall@10 (an answer entity among the first 5 / 10
returned, per question), the median and p95 answer size in bytes (the JSON-RPC line), and for
questions answered by one fact the share whose fact ends within the first 1, 2 and 4 KB of the
answer's text (its first text item, as the model reads it).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_memory import (  # a script beside this one
    REFERENCE_PACKAGE,
    BenchError,
    StdioServer,
    graph_in,
    initialize_request,
    install_reference,
    kill_live_processes,
    our_command,
    percentile,
    tool_call_request,
)

from memory_server.index import ranking
from memory_server.model import graph as rules
from memory_server.model import indexes, writes
from memory_server.model.items import Entity, Relation
from memory_server.retrieval import query
from memory_server.retrieval import query as retrieval
from memory_server.retrieval.paging.pager import Pager

Record = dict[str, Any]


@dataclass(frozen=True)
class Question:
    text: str
    answers: frozenset[str]
    """Names of the entities that answer it (any one counts)."""
    fact: str | None = None
    """The observation that answers it, when one does (the memory of people with many facts)."""


@dataclass(frozen=True)
class Memory:
    label: str
    records: list[Record]
    questions: list[Question]


def entity(name: str, entity_type: str, *observations: str) -> Record:
    return {"type": "entity", "name": name, "entityType": entity_type, "observations": list(observations)}


# -------------------------------------------------------------------------------------------
# The synthetic memory (pure, deterministic)
# -------------------------------------------------------------------------------------------

FIRST_NAMES = ["Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
               "Kofi", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tomás",
               "Uma", "Viktor", "Wen", "Ximena", "Yusuf", "Zoë", "Amara", "Bilal", "Carmen", "Dario"]
SURNAMES = ["Moreau", "Keller", "Rossi", "Ivanov", "Silva", "Haddad", "Lindqvist", "Tanaka", "García",
            "Novak", "Mensah", "Fischer", "Dubois", "Kowalski", "Okafor"]
CITIES = {"Lisbon": ("Portugal", "its tiled facades and custard tarts"),
          "Kyoto": ("Japan", "its temples and autumn maple leaves"),
          "Tromsø": ("Norway", "the northern lights"), "Cusco": ("Peru", "Inca stonework"),
          "Marrakesh": ("Morocco", "the spice souks of the medina"),
          "Vancouver": ("Canada", "mountains beside the harbour"),
          "Tbilisi": ("Georgia", "sulphur baths and wine cellars"),
          "Hobart": ("Australia", "a winter festival of art"),
          "Valparaíso": ("Chile", "colourful funiculars on steep hills"),
          "Ljubljana": ("Slovenia", "a dragon bridge and a castle on a hill")}
COMPANIES = ["Northwind Labs", "Bluefin Analytics", "Copperleaf Studio", "Helios Energy", "Quarry Robotics",
             "Saffron Health", "Tidewater Logistics"]
JOBS = ["data engineer", "nurse", "architect", "pastry chef", "product designer", "geologist", "translator",
        "pilot", "teacher", "veterinarian"]
PETS = [("beagle", "dog"), ("tabby", "cat"), ("parrot", "bird"), ("corgi", "dog"), ("rabbit", "rabbit"),
        ("tortoise", "tortoise")]
PET_NAMES = ["Rex", "Miso", "Pepper", "Biscuit", "Nova", "Olive", "Pixel", "Juniper"]
HOBBIES = ["rock climbing", "pottery", "birdwatching", "sourdough baking", "chess", "salsa dancing",
           "astrophotography", "marathon running", "woodworking", "choir singing"]
INSTRUMENTS = ["violin", "cello", "ukulele", "piano", "drums", "flute"]
CODENAMES = ["Aurora", "Basalt", "Cirrus", "Driftwood", "Ember", "Fjord", "Granite", "Harbor", "Ion", "Juno"]
TECH = ["Rust", "PostgreSQL", "Kubernetes", "React", "Kafka", "TensorFlow"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
FOODS = ["peanuts", "shellfish", "gluten", "strawberries", "sesame"]
BOOKS = ["a novel about lighthouse keepers", "a history of the Silk Road", "a memoir by a mountaineer",
         "a field guide to mushrooms", "a biography of Ada Lovelace"]
SMALL_TALK = ["Good morning! How was your weekend?", "Haha, that sounds like a lot of fun.",
              "Thanks so much, I really appreciate it!", "Let's catch up again next week.",
              "Sorry, I was busy with work all day.", "That's wonderful news, congratulations!"]


def synthetic_memory(seed: int = 7) -> Memory:
    pick = random.Random(seed)
    records: list[Record] = []
    questions: list[Question] = []
    people = [f"{first} {pick.choice(SURNAMES)}" for first in FIRST_NAMES]
    for city, (country, known_for) in CITIES.items():
        records.append(entity(city, "city", f"Located in {country}", f"Known for {known_for}"))
        questions.append(Question(f"What is {city} famous for?", frozenset([city])))
        questions.append(Question(f"Which country is {city} in?", frozenset([city])))
    leads: dict[str, str] = {}
    for codename in CODENAMES:
        lead = pick.choice(people)
        leads[codename] = lead
        company = pick.choice(COMPANIES)
        name = f"Project {codename}"
        records.append(entity(name, "project", f"Led by {lead}", f"Run by {company}",
                              f"Built with {pick.choice(TECH)}",
                              f"Deadline in {pick.choice(MONTHS)} {pick.randint(2025, 2027)}"))
        questions.append(Question(f"Who is leading the {codename} project?", frozenset([name])))
        questions.append(Question(f"What technology does {codename} use?", frozenset([name])))
        questions.append(Question(f"When is the {codename} deadline?", frozenset([name])))
    for person in people:
        first = person.split()[0]
        city = pick.choice(list(CITIES))
        breed, kind = pick.choice(PETS)
        pet = pick.choice(PET_NAMES)
        hobby = pick.choice(HOBBIES)
        food = pick.choice(FOODS)
        records.append(entity(person, "person", f"Lives in {city}",
                              f"Works at {pick.choice(COMPANIES)} as a {pick.choice(JOBS)}",
                              f"Adopted a {breed} named {pet} in {pick.randint(2015, 2024)}",
                              f"Spends weekends {hobby}", f"Allergic to {food}"))
        questions += [Question(f"Where does {first} live?", frozenset([person])),
                      Question(f"What kind of {kind} did {first} adopt?", frozenset([person])),
                      Question(f"Which company is {first} working for?", frozenset([person])),
                      Question(f"What is {first} allergic to?", frozenset([person])),
                      Question(f"What does {first} do for fun on the weekend?", frozenset([person]))]
    # Chats between two people: small talk around a few facts that are only said there.
    for chat in range(40):
        speaker, other = pick.sample(people, 2)
        turn = 0
        for _ in range(pick.randint(6, 12)):
            turn += 1
            records.append(entity(f"chat-{chat}:{turn}", "dialog_turn",
                                  f"{pick.choice((speaker, other))}: {pick.choice(SMALL_TALK)}"))
            if pick.random() < 0.3:
                turn += 1
                name = f"chat-{chat}:{turn}"
                fact = pick.randrange(3)
                first = speaker.split()[0]
                if fact == 0:
                    instrument = pick.choice(INSTRUMENTS)
                    records.append(entity(name, "dialog_turn", f"{speaker}: I finally started taking "
                                                               f"{instrument} lessons last {pick.choice(MONTHS)}!"))
                    questions.append(Question(f"When did {first} start learning the {instrument}?", frozenset([name])))
                elif fact == 1:
                    book = pick.choice(BOOKS)
                    records.append(entity(name, "dialog_turn", f"{speaker}: I'm reading {book}, it's gripping."))
                    questions.append(Question(f"What book was {first} reading?", frozenset([name])))
                else:
                    city = pick.choice(list(CITIES))
                    records.append(entity(name, "dialog_turn", f"{speaker}: We're travelling to {city} "
                                                               f"in {pick.choice(MONTHS)} for a week."))
                    questions.append(Question(f"Where is {first} going on a trip?", frozenset([name])))
    for codename, lead in leads.items():
        records.append({"type": "relation", "from": lead, "to": f"Project {codename}", "relationType": "leads"})
    return Memory("synthetic", records, questions)


# -------------------------------------------------------------------------------------------
# People with hundreds of facts each (pure, deterministic): the README's prompt keeps one entity
# per person and every fact as an observation; each question is answered by one fact.
# -------------------------------------------------------------------------------------------

TRIP_PURPOSES = ["for a friend's wedding", "for a work conference", "to hike for a week", "to see family",
                 "for a food festival", "on a school exchange", "to run a half marathon", "for a photography course"]
TITLES = ["The Salt Road", "Winter Orchard", "A Map of Small Rivers", "The Glass Harbour", "Quiet Engines",
          "Letters from Nowhere", "The Last Ferry", "Copper Sky", "Hollow Bells", "The Paper Garden",
          "Northern Static", "Under Lantern Light", "The Orchid Ledger", "Iron Meadows", "Tides of Amber"]
AUTHORS = ["Mara Quill", "Tobias Renn", "Ivy Castellan", "Omar Sadeq", "Lucia Fern", "Henrik Dahl"]
OPINIONS = ["loved the ending", "found it slow in the middle", "gave it five stars", "stopped halfway",
            "recommended it to everyone", "thought the characters were flat"]
RELATIVES = ["sister", "brother", "cousin", "aunt", "uncle", "niece", "nephew", "grandmother"]
RELATIVE_NAMES = ["Lotte", "Ravi", "Sofia", "Emeka", "Ingrid", "Pablo", "Yara", "Dmitri", "Hana", "Felix",
                  "Noor", "Caleb", "Mina", "Oren", "Talia", "Bas"]
OCCUPATIONS = ["dentist", "sailor", "librarian", "firefighter", "baker", "lawyer", "painter", "electrician"]
EVENTS = ["city half marathon", "charity bake sale", "chess tournament", "poetry slam", "hackathon",
          "open water swim", "film festival volunteer shift", "pottery exhibition", "choir concert",
          "cycling sportive", "quiz night", "startup pitch night"]
PLACINGS = ["finished third", "won first prize", "came last but had fun", "was a finalist", "helped organise it",
            "got a personal best"]
COURSES = ["Spanish", "welding", "first aid", "machine learning", "jazz piano", "bookkeeping", "sign language",
           "watercolour painting", "sailing", "ceramics"]
DISHES = ["lasagne", "pho", "shakshuka", "ramen", "paella", "biryani", "tacos al pastor", "moussaka",
          "pierogi", "jollof rice"]
RESTAURANTS = ["Luna", "The Copper Pot", "Sakura House", "Casa Verde", "The Olive Tree", "Bistro Nord"]
GIFTS = ["a telescope", "a fountain pen", "a cast iron pan", "a vinyl record player", "hiking boots",
         "a sourdough starter", "a drone", "noise cancelling headphones"]
OCCASIONS = ["birthday", "graduation", "anniversary", "retirement", "housewarming", "promotion"]


def people_memory(seed: int = 11, people_count: int = 20) -> Memory:
    """About 20 people with about 135 facts each; about 1,700 questions, each answered by one fact."""
    pick = random.Random(seed)
    records: list[Record] = []
    questions: list[Question] = []
    people = [f"{first} {SURNAMES[number % len(SURNAMES)]}" for number, first in enumerate(FIRST_NAMES[:people_count])]
    for person in people:
        first = person.split()[0]
        facts: list[tuple[str, list[str]]] = []  # (fact, questions it answers)
        city = pick.choice(list(CITIES))
        job, company = pick.choice(JOBS), pick.choice(COMPANIES)
        breed, kind = pick.choice(PETS)
        pet = pick.choice(PET_NAMES)
        facts += [(f"Lives in {city} since {pick.randint(2005, 2022)}", [f"Where does {first} live?",
                                                                        f"Which city is {first} based in?"]),
                  (f"Works at {company} as a {job}", [f"Which company employs {first}?",
                                                      f"What does {first} do for work?"]),
                  (f"Has a {breed} called {pet}", [f"What is {first}'s {kind} called?"]),
                  (f"Allergic to {pick.choice(FOODS)}", [f"What is {first} allergic to?"]),
                  (f"Plays the {pick.choice(INSTRUMENTS)} in a community orchestra",
                   [f"Which instrument does {first} play?"]),
                  (f"Birthday is on {pick.choice(MONTHS)} {pick.randint(1, 28)}", [f"When is {first}'s birthday?"]),
                  (f"Spends most weekends {pick.choice(HOBBIES)}", [f"What does {first} do at weekends?"])]
        for trip_city in pick.sample(list(CITIES), 8):
            if trip_city == city:
                continue
            month, year = pick.choice(MONTHS), pick.randint(2016, 2024)
            went = pick.choice(["Flew to", "Spent a week in", "Went to", "Took the train to"])
            facts.append((f"{went} {trip_city} in {month} {year} {pick.choice(TRIP_PURPOSES)}",
                          [f"When was {first} in {trip_city}?", f"What was {first}'s reason for visiting {trip_city}?"]))
        for title in pick.sample(TITLES, 10):
            facts.append((f"Finished '{title}' by {pick.choice(AUTHORS)} and {pick.choice(OPINIONS)}",
                          [f"Did {first} like the book {title}?"]))
        for relative, name in zip(pick.sample(RELATIVES, 6), pick.sample(RELATIVE_NAMES, 6), strict=True):
            facts.append((f"{relative.capitalize()} {name} is a {pick.choice(OCCUPATIONS)} in {pick.choice(list(CITIES))}",
                          [f"What is the profession of {first}'s {relative}?"]))
        for event in pick.sample(EVENTS, 10):
            facts.append((f"Took part in the {event} in {pick.choice(MONTHS)} {pick.randint(2018, 2024)} and "
                          f"{pick.choice(PLACINGS)}", [f"How did {first} do at the {event}?"]))
        for course in pick.sample(COURSES, 7):
            facts.append((f"Signed up for an evening course in {course} at the community college",
                          [f"Is {first} studying {course}?"]))
        for dish in pick.sample(DISHES, 6):
            facts.append((f"Cooks {dish} every time friends come over for dinner", [f"Does {first} ever make {dish}?"]))
        for restaurant in pick.sample(RESTAURANTS, 4):
            facts.append((f"Favourite table at {restaurant} is by the window, orders the {pick.choice(DISHES)}",
                          [f"What does {first} usually eat at {restaurant}?"]))
        for gift, occasion in zip(pick.sample(GIFTS, 5), pick.sample(OCCASIONS, 5), strict=True):
            facts.append((f"Received {gift} as a {occasion} present", [f"What was {first} given for the {occasion}?"]))
        # Small talk the model also wrote down: shares words with many questions, answers none.
        for _ in range(70):
            facts.append((pick.choice([
                f"Mentioned feeling tired after a long week at {company}",
                f"Said the {pick.choice(EVENTS)} looked fun but was too busy to go",
                f"Might visit {pick.choice(list(CITIES))} one day",
                f"Asked about good books like '{pick.choice(TITLES)}'",
                f"Thinks {pick.choice(DISHES)} is overrated",
                f"Wondered whether a {pick.choice(COURSES)} course would be worth it",
                f"Said the weather in {city} has been grey lately",
                "Wants to spend more time outdoors this year",
                "Asked for tips on sleeping better", "Is thinking about learning to cook more dishes",
                f"Talked about friends from {pick.choice(list(CITIES))}",
                "Enjoys long conversations over coffee", "Prefers mornings for deep work",
                f"Had dinner with family in {pick.choice(MONTHS)}", "Finds travel tiring but worth it",
                f"Is reading more books than last year ({pick.randint(2, 40)} so far)",
                f"Planning a weekend trip with {pick.choice(RELATIVE_NAMES)}",
            ]) + f" (note {pick.randint(1, 9999)})", []))
        pick.shuffle(facts)
        observations = list(dict.fromkeys(fact for fact, _ in facts))
        records.append(entity(person, "person", *observations))
        for fact, asked in facts:
            questions += [Question(text, frozenset([person]), fact) for text in asked]
    records += [entity(city, "city", f"Located in {country}") for city, (country, _) in CITIES.items()]
    return Memory("people", records, questions)


# -------------------------------------------------------------------------------------------
# LoCoMo (read from a path given on the command line; never part of this repository)
# -------------------------------------------------------------------------------------------

MAPPINGS = ("turn", "message", "speaker")


def locomo_turns(conversation: dict[str, Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(session number, session date, turn) in order."""
    sessions = sorted(int(match.group(1)) for key in conversation
                      if (match := re.fullmatch(r"session_(\d+)", key)) and isinstance(conversation[key], list))
    for number in sessions:
        date = conversation.get(f"session_{number}_date_time", "")
        for turn in conversation[f"session_{number}"]:
            yield number, date, turn


def locomo_entity(label: str, mapping: str, session: int, date: str, turn: dict[str, Any]) -> Record:
    text, speaker, dia_id = turn["text"], turn["speaker"], turn["dia_id"]
    caption = turn.get("blip_caption")
    if mapping == "turn":
        observations = [f"{speaker}: {text}"]
        if caption:
            observations.append(f"Shared {caption}")
        observations.append(f"Session {session}, {date}")
        return entity(f"{label}:{dia_id}", "dialog_turn", *observations)
    said = f"{text} (sharing {caption})" if caption else text
    return entity(f"{speaker} message {dia_id}", "message", said, f"Sent on {date}")


def speaker_fact(turn: dict[str, Any]) -> str:
    """A turn as one fact of its speaker (the ``speaker`` mapping)."""
    caption = turn.get("blip_caption")
    return f"{turn['text']} (sharing {caption})" if caption else turn["text"]


def locomo_speaker_memory(label: str, conversation: dict[str, Any]) -> Memory:
    """The ``speaker`` mapping: one entity per speaker holding every turn they said as one fact,
    as the README's prompt keeps what a person said (people with hundreds of facts each); a
    question answered by one turn has that fact as its answer."""
    facts: dict[str, list[str]] = {}
    said: dict[str, tuple[str, str]] = {}
    for _, _, turn in locomo_turns(conversation):
        name = turn["speaker"]  # (named as the prompt names a person: each conversation is a memory of its own)
        fact = speaker_fact(turn)
        if fact not in facts.setdefault(name, []):
            facts[name].append(fact)
        said[turn["dia_id"]] = (name, fact)
    records = [entity(name, "person", *observations) for name, observations in facts.items()]
    questions = []
    for item in conversation.get("qa", []):
        evidence = [part for cited in item.get("evidence", []) for part in re.split(r"[;,\s]+", cited)
                    if part in said]
        if evidence:
            answers = frozenset(said[dia_id][0] for dia_id in evidence)
            fact = said[evidence[0]][1] if len(set(evidence)) == 1 else None
            questions.append(Question(item["question"], answers, fact))
    return Memory(f"locomo/speaker/{label}", records, questions)


def locomo_memories(directory: Path, mapping: str) -> list[Memory]:
    if mapping == "speaker":
        return [locomo_speaker_memory(f"conv-{path.stem}", json.loads(path.read_text()))
                for path in sorted(directory.glob("*.json"))]
    memories = []
    for path in sorted(directory.glob("*.json")):
        conversation = json.loads(path.read_text())
        label = f"conv-{path.stem}"
        names: dict[str, str] = {}
        records = []
        for session, date, turn in locomo_turns(conversation):
            record = locomo_entity(label, mapping, session, date, turn)
            names[turn["dia_id"]] = record["name"]
            records.append(record)
        questions = []
        for item in conversation.get("qa", []):
            evidence = {part for cited in item.get("evidence", []) for part in re.split(r"[;,\s]+", cited) if part}
            answers = frozenset(names[dia_id] for dia_id in evidence if dia_id in names)
            if answers:  # a few questions cite turns that do not exist
                questions.append(Question(item["question"], answers))
        memories.append(Memory(f"locomo/{mapping}/{label}", records, questions))
    return memories


# -------------------------------------------------------------------------------------------
# Asking (I/O) and scoring (pure)
# -------------------------------------------------------------------------------------------


@dataclass
class Answer:
    names: list[str]
    size: int
    text: str = ""
    """The answer's text as the model reads it (the first text item: the JSON)."""


def memory_bytes(memory: Memory) -> bytes:
    return "\n".join(json.dumps(record, ensure_ascii=False) for record in memory.records).encode() + b"\n"


def ask_server(command: Sequence[str], memory: Memory, workdir: Path, limit: int | None,
               timeout: float) -> list[Answer]:
    memory_file = workdir / "memory.jsonl"
    memory_file.write_bytes(memory_bytes(memory))
    client = StdioServer(command, memory_file, workdir / "stderr.log")
    answers = []
    try:
        client.send(initialize_request(0))
        client.await_response(0, time.perf_counter() + timeout)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for number, question in enumerate(memory.questions, start=1):
            arguments: dict[str, Any] = {"query": question.text}
            if limit is not None:
                arguments["limit"] = limit
            client.send(tool_call_request(number, "search_nodes", arguments))
            result, _ = client.await_response(number, time.perf_counter() + timeout)
            size = len(json.dumps({"jsonrpc": "2.0", "id": number, "result": result}, separators=(",", ":")))
            text = result["content"][0]["text"] if result.get("content") else ""
            answers.append(Answer([item["name"] for item in graph_in(result)["entities"]], size, text))
    finally:
        client.close(timeout=30)
    return answers


def ask_in_process(ranker: ranking.Ranker, weights: ranking.FieldWeights, memory: Memory) -> list[Answer]:
    graph = writes.create_entities(rules.EMPTY, msgspec.convert([record for record in memory.records
                                                                 if record["type"] == "entity"], list[Entity])).graph
    terms = ranking.TermIndex.build(((name, node.text) for name, node in graph.entities.items()), weights)
    graph = replace(indexes.with_word_index(graph), terms=terms)
    answers = []
    for question in memory.questions:
        result = retrieval.matches(graph, question.text, ranker=ranker)
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
        answers.append(Answer([item["name"] for item in result["entities"]], len(text.encode()), text))
    return answers


def ask_ours_in_process(memory: Memory) -> list[Answer]:
    """What search_nodes answers (its first page, with no argument but the query), without a process."""
    graph = writes.create_entities(rules.EMPTY, msgspec.convert([record for record in memory.records
                                                                 if record["type"] == "entity"], list[Entity])).graph
    links = [record for record in memory.records if record["type"] == "relation"]
    if links:
        graph = writes.create_relations(graph, msgspec.convert(links, list[Relation])).graph
    graph = indexes.with_term_index(indexes.with_word_index(graph))
    pager = Pager()
    answers = []
    for question in memory.questions:
        facts = query.search(graph, question.text)
        page = pager.first_facts("search_nodes", b"", facts)
        value = json.loads(page.json)
        texts = [page.json.decode(), *page.notes]
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": text} for text in texts], "structuredContent": value}},
            separators=(",", ":"), ensure_ascii=False)
        answers.append(Answer([item["name"] for item in value["entities"]], len(line.encode()), texts[0]))
    return answers


def ask_ours_ready(memory: Memory, workdir: Path) -> list[Answer]:
    """What the tools' search_nodes answers (dates on, the model on), in this process over a store
    on a real file, once every observation has its vector: the figures of a server whose memory was
    embedded before (a process over stdio answers its first questions while it still embeds)."""
    import asyncio

    from memory_server.retrieval import semantic
    from memory_server.storage.store import GraphStore
    from memory_server.tools import MemoryTools, SearchNodes
    from protocol.context import RequestContext

    memory_file = workdir / "memory.jsonl"
    memory_file.write_bytes(memory_bytes(memory))
    answers: list[Answer] = []
    with GraphStore(memory_file) as store:
        tools = MemoryTools(store, lambda: None)
        semantic.prepare()
        store.read_graph()  # (a new file: no cache yet, so the graph is loaded)
        graph = store.graph_in_memory
        if graph is None or not semantic.ready(graph, 1_800):
            raise BenchError("the model did not embed the memory within 30 minutes (is the semantic extra installed?)")

        async def ask_all() -> None:
            for number, question in enumerate(memory.questions, start=1):
                context = RequestContext(number, "tools/call", None, None, None, None, "in-process")
                result = await tools.search_nodes(SearchNodes(query=question.text), context)
                structured = json.loads(bytes(result.structured)) if result.structured is not None else {}
                line = {"jsonrpc": "2.0", "id": number,
                        "result": {"content": result.content, "structuredContent": structured}}
                size = len(json.dumps(line, separators=(",", ":")))
                text = result.content[0]["text"] if result.content else ""
                answers.append(Answer([item["name"] for item in structured.get("entities", [])], size, text))
        asyncio.run(ask_all())
    return answers


def ask_fact_bm25(memory: Memory, best: int = 10) -> list[Answer]:
    """Plain BM25 over single facts (each observation a document, its entity's name before it),
    answering with its best ten, each as an entity holding that one fact."""
    facts = [(record["name"], record["entityType"], observation) for record in memory.records
             if record["type"] == "entity" for observation in record["observations"]]
    index = ranking.TermIndex.build(((str(number), f"{name}\x00\x00{observation}")
                                     for number, (name, _, observation) in enumerate(facts)), (1, 1))
    answers = []
    for question in memory.questions:
        scores = ranking.rank(index, question.text, ranking.PLAIN)
        ranked = sorted(scores, key=lambda key: (-scores[key], int(key)))[:best]
        entities = [{"name": facts[int(key)][0], "entityType": facts[int(key)][1],
                     "observations": [facts[int(key)][2]]} for key in ranked]
        text = json.dumps({"entities": entities, "relations": []}, separators=(",", ":"), ensure_ascii=False)
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}],
                                                                 "structuredContent": json.loads(text)}},
                          separators=(",", ":"), ensure_ascii=False)
        answers.append(Answer([entity["name"] for entity in entities], len(line.encode()), text))
    return answers


@dataclass
class Figures:
    questions: int
    recall_at_5: float
    recall_at_10: float
    found_any: float
    median_bytes: float
    p95_bytes: float
    within: dict[int, float] | None = None
    """For questions answered by one fact: the share whose fact ends within the first N bytes of
    the answer's text, by N."""


WITHIN = (1024, 2048, 4096)


def fact_end(text: str, fact: str) -> int | None:
    """Where the fact ends in the answer text, in UTF-8 bytes (None: not there)."""
    escaped = json.dumps(fact, ensure_ascii=False)[1:-1]
    at = text.find(escaped)
    if at < 0:
        return None
    return len(text[:at].encode()) + len(escaped.encode())


def figures(questions: Sequence[Question], answers: Sequence[Answer]) -> Figures:
    def recall(k: int) -> float:
        hits = sum(1 for question, answer in zip(questions, answers, strict=True)
                   if question.answers & set(answer.names[:k]))
        return hits / len(questions)

    sizes = [float(answer.size) for answer in answers]
    within = None
    factual = [(question, answer) for question, answer in zip(questions, answers, strict=True) if question.fact]
    if factual:
        ends = [fact_end(answer.text, question.fact or "") for question, answer in factual]
        within = {limit: sum(1 for end in ends if end is not None and end <= limit) / len(ends) for limit in WITHIN}
    return Figures(len(questions), recall(5), recall(10), sum(1 for a in answers if a.names) / len(answers),
                   percentile(sizes, 0.5), percentile(sizes, 0.95), within)


def pooled(results: Sequence[tuple[Memory, list[Answer]]]) -> Figures:
    questions = [question for memory, _ in results for question in memory.questions]
    answers = [answer for _, answers in results for answer in answers]
    return figures(questions, answers)


def report_line(label: str, asker: str, result: Figures) -> str:
    line = (f"{label:<18} {asker:<22} {result.questions:>5} q  recall@5 {result.recall_at_5:6.1%}  "
            f"recall@10 {result.recall_at_10:6.1%}  any {result.found_any:6.1%}  "
            f"answer median {result.median_bytes:>9,.0f} B  p95 {result.p95_bytes:>10,.0f} B")
    if result.within is not None:
        line += "  fact within " + " ".join(f"{limit // 1024}KB {share:6.1%}" for limit, share in result.within.items())
    return line


# plain: BM25 with stems over all of an entity's text alike; default: what search_nodes does.
RANKERS = {"plain": (ranking.PLAIN, (1, 1)), "default": (ranking.DEFAULT, ranking.FIELD_WEIGHTS)}


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path, help="directory holding LoCoMo's conversation *.json files")
    parser.add_argument("--personal", choices=("tuning", "held-out", "second", "third", "fourth", "fifth", "sixth",
                                                  "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth"),
                        help="only a personal memory (personal_memory.py, _second.py to _twelfth.py) and this "
                             "question set, per category: the answering fact within the first 1,000 characters")
    parser.add_argument("--show-misses", action="store_true", help="with --personal: print the questions missed")
    parser.add_argument("--mappings", default=",".join(MAPPINGS), help=f"LoCoMo turn mappings ({', '.join(MAPPINGS)})")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the synthetic memory")
    parser.add_argument("--no-people", action="store_true", help="skip the memory of people with many facts")
    parser.add_argument("--servers", default="ours,reference", help="ours, reference, both, or none")
    parser.add_argument("--ranker", default="plain,default,facts,ours",
                        help="in-process askers: plain, default (entity rankers, whole entities), facts (plain "
                             "BM25 over single facts, best ten), ours (search_nodes' first page), ready (the "
                             "tools' search_nodes on a file, dates and model on, every fact embedded first), or none")
    parser.add_argument("--limit", type=int, help="pass this limit argument to search_nodes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per answer")
    return parser.parse_args(argv)


PERSONAL_WITHIN = 1_000


def personal_passes(fact: str | None, answer: Answer) -> bool:
    """A question about the personal memory is answered when its fact ends within the first
    PERSONAL_WITHIN characters of the answer's text; one about something never said, when the
    answer is empty or one line (at most one observation)."""
    if fact is not None:
        end = fact_end(answer.text, fact)
        return end is not None and end <= PERSONAL_WITHIN
    try:
        shown = json.loads(answer.text) if answer.text else {"entities": []}
    except ValueError:
        return False
    return sum(max(len(entity.get("observations", [])), 1) for entity in shown.get("entities", [])) <= 1


def personal(options: argparse.Namespace) -> int:
    """The personal memory, one question set, per category, for ours (a real process, dates on),
    plain BM25 over facts, and the reference (when npm can install it)."""
    from datetime import UTC, datetime

    import personal_memory
    import personal_memory_eighth
    import personal_memory_eleventh
    import personal_memory_fifth
    import personal_memory_fourth
    import personal_memory_ninth
    import personal_memory_second
    import personal_memory_seventh
    import personal_memory_sixth
    import personal_memory_tenth
    import personal_memory_third
    import personal_memory_twelfth

    # "second" to "twelfth": other memories, each with its own questions, written apart from the ranking code
    source = {"second": personal_memory_second, "third": personal_memory_third,
              "fourth": personal_memory_fourth, "fifth": personal_memory_fifth,
              "sixth": personal_memory_sixth, "seventh": personal_memory_seventh,
              "eighth": personal_memory_eighth, "ninth": personal_memory_ninth,
              "tenth": personal_memory_tenth, "eleventh": personal_memory_eleventh,
              "twelfth": personal_memory_twelfth}.get(options.personal, personal_memory)
    asked = source.SETS[options.personal]
    records = source.memory(datetime.now(UTC).date())
    memory = Memory(f"personal/{options.personal}", records,
                    [Question(item.text, frozenset(), item.fact) for item in asked])
    entities = sum(1 for record in records if record["type"] == "entity")
    facts = sum(len(record["observations"]) for record in records if record["type"] == "entity")
    print(f"bench_recall --personal {options.personal} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
          f"{entities} entities, {facts} facts, {len(records) - entities} relations, {len(asked)} questions",
          flush=True)
    servers = [name for name in options.servers.split(",") if name in ("ours", "reference")]
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as scratch:
        root = Path(scratch)
        askers: list[tuple[str, Callable[[Path], list[Answer]]]] = []
        if "ours" in servers:
            askers.append(("ours (stdio)", lambda work: ask_server(our_command(), memory, work, None, options.timeout)))
        if "ready" in options.ranker.split(","):
            askers.append(("ours (model ready)", lambda work: ask_ours_ready(memory, work)))
        askers.append(("fact BM25 top 10", lambda work: ask_fact_bm25(memory)))
        try:
            if "reference" in servers:
                try:
                    command, version = install_reference(root / "npm", REFERENCE_PACKAGE, 600)
                    askers.append((f"reference {version}", lambda work: ask_server(command, memory, work, None,
                                                                                  options.timeout)))
                except BenchError as error:
                    print(f"reference not run: {error}", flush=True)
            print(f"{'asker':<24} " + " ".join(f"{category:>10}" for category in source.CATEGORIES)
                  + f" {'overall':>8} {'median B':>9}", flush=True)
            for label, ask in askers:
                work = root / "run"
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir()
                answers = ask(work)
                passed = [personal_passes(item.fact, answer) for item, answer in zip(asked, answers, strict=True)]
                cells = []
                for category in source.CATEGORIES:
                    mine = [ok for item, ok in zip(asked, passed, strict=True) if item.category == category]
                    cells.append(f"{sum(mine):>3}/{len(mine):<2} {sum(mine) / len(mine):4.0%}" if mine else "")
                sizes = sorted(answer.size for answer in answers)
                print(f"{label:<24} " + " ".join(f"{cell:>10}" for cell in cells)
                      + f" {sum(passed) / len(passed):8.1%} {sizes[len(sizes) // 2]:>9,}", flush=True)
                if options.show_misses:
                    for item, ok, answer in zip(asked, passed, answers, strict=True):
                        if not ok:
                            print(f"    miss [{item.category}] {item.text!r}: {answer.text[:300]}", flush=True)
        except BenchError as error:
            print(f"bench_recall: {error}", file=sys.stderr)
            return 1
        finally:
            kill_live_processes()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options = arguments(argv)
    if options.personal is not None:
        return personal(options)
    groups: list[tuple[str, list[Memory]]] = []
    if not options.no_synthetic:
        groups.append(("synthetic", [synthetic_memory()]))
    if not options.no_people:
        groups.append(("people", [people_memory()]))
    if options.locomo is not None:
        for mapping in options.mappings.split(","):
            groups.append((f"locomo/{mapping}", locomo_memories(options.locomo, mapping)))
    servers = [name for name in options.servers.split(",") if name in ("ours", "reference")]
    rankers = [name for name in options.ranker.split(",") if name in RANKERS]
    extra = {"facts": ("fact BM25 top 10", ask_fact_bm25), "ours": ("ours (in-process)", ask_ours_in_process)}
    ready = "ready" in options.ranker.split(",")
    askers: list[tuple[str, Callable[[Memory, Path], list[Answer]]]] = []
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as scratch:
        root = Path(scratch)
        try:
            if "ours" in servers:
                askers.append(("ours (stdio)", lambda memory, work: ask_server(
                    our_command(), memory, work, options.limit, options.timeout)))
            if "reference" in servers:
                command, version = install_reference(root / "npm", REFERENCE_PACKAGE, 600)
                askers.append((f"reference {version}", lambda memory, work: ask_server(
                    command, memory, work, options.limit, options.timeout)))
            for name in rankers:
                askers.append((f"{name} (in-process)", lambda memory, _, chosen=RANKERS[name]: ask_in_process(
                    *chosen, memory)))
            for name in options.ranker.split(","):
                if name in extra:
                    label, asker = extra[name]
                    askers.append((label, lambda memory, _, ask=asker: ask(memory)))
            if ready:
                askers.append(("ours (model ready)", ask_ours_ready))
            print(f"bench_recall {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
            for label, memories in groups:
                entities = sum(1 for memory in memories for record in memory.records if record["type"] == "entity")
                print(f"{label}: {len(memories)} memories, {entities} entities", flush=True)
                for asker, ask in askers:
                    results = []
                    for memory in memories:
                        work = root / "run"
                        shutil.rmtree(work, ignore_errors=True)
                        work.mkdir()
                        results.append((memory, ask(memory, work)))
                    print(report_line(label, asker, pooled(results)), flush=True)
        except BenchError as error:
            print(f"bench_recall: {error}", file=sys.stderr)
            return 1
        finally:
            kill_live_processes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
