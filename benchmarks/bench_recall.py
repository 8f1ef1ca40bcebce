"""Retrieval benchmark: natural questions sent verbatim to search_nodes, over memories whose answers are known.

Run from the repository root (on demand; pytest does not collect it):

    .venv/bin/python benchmarks/bench_recall.py                                  # synthetic memory, both servers
    .venv/bin/python benchmarks/bench_recall.py --locomo /path/to/locomo10_v2    # and LoCoMo, both mappings
    .venv/bin/python benchmarks/bench_recall.py --locomo DIR --servers none      # in-process rankers only

Memories:

- synthetic: people, places, projects and chat turns generated here (deterministic), with
  questions phrased as people ask them and the entities that answer them;
- LoCoMo (``--locomo DIR``, the ``*.json`` conversations of the public LoCoMo data set, CC BY-NC:
  read from where you keep it, never copied into this repository): one entity per dialog turn,
  one memory per conversation, every question with evidence asked of its conversation's memory.
  Two mappings of a turn to an entity (``turn``: named by its dialog id, the speaker in the
  text; ``message``: named by speaker and id, the date apart), so that ranking is not tuned to one.

Each question goes to ``search_nodes`` of a real server process over stdio (this server and the
npm reference, installed with npm into a temporary directory), and to the in-process rankers
(``plain``: BM25 with stems, no field weights nor coverage; ``default``: what the server uses).
Reported per memory and server: recall@5 and recall@10 (an answer entity among the first 5 / 10
returned, per question), and the median and p95 answer size in bytes (the JSON-RPC line; in
process, the JSON of the result).
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

Record = dict[str, Any]


@dataclass(frozen=True)
class Question:
    text: str
    answers: frozenset[str]
    """Names of the entities that answer it (any one counts)."""


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
# LoCoMo (read from a path given on the command line; never part of this repository)
# -------------------------------------------------------------------------------------------

MAPPINGS = ("turn", "message")


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


def locomo_memories(directory: Path, mapping: str) -> list[Memory]:
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
            answers.append(Answer([item["name"] for item in graph_in(result)["entities"]], size))
    finally:
        client.close(timeout=30)
    return answers


def ask_in_process(ranker: ranking.Ranker, weights: ranking.FieldWeights, memory: Memory) -> list[Answer]:
    graph = rules.create_entities(rules.EMPTY, [record for record in memory.records
                                                if record["type"] == "entity"]).graph
    terms = ranking.TermIndex.build(((name, node.text) for name, node in graph.entities.items()), weights)
    graph = replace(rules.with_word_index(graph), terms=terms)
    answers = []
    for question in memory.questions:
        result = rules.search_nodes(graph, question.text, ranker=ranker)
        answers.append(Answer([item["name"] for item in result["entities"]],
                              len(json.dumps(result, separators=(",", ":")))))
    return answers


@dataclass
class Figures:
    questions: int
    recall_at_5: float
    recall_at_10: float
    found_any: float
    median_bytes: float
    p95_bytes: float


def figures(questions: Sequence[Question], answers: Sequence[Answer]) -> Figures:
    def recall(k: int) -> float:
        hits = sum(1 for question, answer in zip(questions, answers, strict=True)
                   if question.answers & set(answer.names[:k]))
        return hits / len(questions)

    sizes = [float(answer.size) for answer in answers]
    return Figures(len(questions), recall(5), recall(10), sum(1 for a in answers if a.names) / len(answers),
                   percentile(sizes, 0.5), percentile(sizes, 0.95))


def pooled(results: Sequence[tuple[Memory, list[Answer]]]) -> Figures:
    questions = [question for memory, _ in results for question in memory.questions]
    answers = [answer for _, answers in results for answer in answers]
    return figures(questions, answers)


def report_line(label: str, asker: str, result: Figures) -> str:
    return (f"{label:<18} {asker:<18} {result.questions:>5} q  recall@5 {result.recall_at_5:6.1%}  "
            f"recall@10 {result.recall_at_10:6.1%}  any {result.found_any:6.1%}  "
            f"answer median {result.median_bytes:>9,.0f} B  p95 {result.p95_bytes:>10,.0f} B")


# plain: BM25 with stems over all of an entity's text alike; default: what search_nodes does.
RANKERS = {"plain": (ranking.PLAIN, (1, 1)), "default": (ranking.DEFAULT, ranking.FIELD_WEIGHTS)}


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path, help="directory holding LoCoMo's conversation *.json files")
    parser.add_argument("--mappings", default=",".join(MAPPINGS), help=f"LoCoMo turn mappings ({', '.join(MAPPINGS)})")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the synthetic memory")
    parser.add_argument("--servers", default="ours,reference", help="ours, reference, both, or none")
    parser.add_argument("--ranker", default="plain,default", help="in-process rankers (plain, default, or none)")
    parser.add_argument("--limit", type=int, help="pass this limit argument to search_nodes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per answer")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    options = arguments(argv)
    groups: list[tuple[str, list[Memory]]] = []
    if not options.no_synthetic:
        groups.append(("synthetic", [synthetic_memory()]))
    if options.locomo is not None:
        for mapping in options.mappings.split(","):
            groups.append((f"locomo/{mapping}", locomo_memories(options.locomo, mapping)))
    servers = [name for name in options.servers.split(",") if name in ("ours", "reference")]
    rankers = [name for name in options.ranker.split(",") if name in RANKERS]
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
