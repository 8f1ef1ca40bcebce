"""Questions on topics a memory never mentions: how many answer nothing (issue 28's "absent means empty").

Run from the repository root (on demand; pytest does not collect it):

    .venv/bin/python benchmarks/bench_absent.py                       # every personal memory
    .venv/bin/python benchmarks/bench_absent.py --memories sixth,fourth --show

Each question below names its topic by a few word stems. A question is asked of a memory only
when no entity name, type or observation of that memory holds any of them (case folded), so
that "never mentions" is checked, not assumed: a memory with a violin in it is not asked
"Do I play the violin?". The questions were written for this file, apart from the memories and
their own absent questions, and are not used to tune anything. An answer passes as
bench_recall's absent questions do: empty arrays, or at most one observation. The askers are
bench_recall's "ours (model ready)" (the tools' search_nodes in this process, dates and the
model on, every fact embedded first) and plain BM25 over single facts, for scale.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_recall

TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Which cryptocurrency do I own?", ("crypto", "bitcoin", "ethereum")),
    ("What video game am I playing at the moment?", ("video game", "gaming", "playstation", "xbox", "nintendo",
                                                     "console")),
    ("Which podcast do I listen to on my commute?", ("podcast",)),
    ("What is my favourite anime?", ("anime", "manga")),
    ("What is my PIN number?", (" pin ", "pin code", "pin number")),
    ("Which Formula 1 team do I follow?", ("formula", " f1")),
    ("Have I ever been skydiving?", ("skydiv", "parachut")),
    ("What is my wifi password?", ("wifi", "wi-fi", "password")),
    ("What is my favourite cocktail?", ("cocktail", "mojito", "margarita")),
    ("Which chess opening do I prefer?", ("chess",)),
    ("Which saxophone brand do I have?", ("saxophone", " sax")),
    ("What is my favourite Pokémon?", ("pokémon", "pokemon")),
    ("What's my favourite emoji?", ("emoji",)),
    ("Do I collect stamps?", ("stamp", "philatel")),
    ("Which surfboard do I ride?", ("surf",)),
    ("How many followers do I have on TikTok?", ("tiktok", "follower", "instagram")),
    ("Which astronomy club am I in?", ("astronom", "telescope")),
    ("What is my favourite brand of sneakers?", ("sneaker", "trainers", "nike", "adidas")),
    ("Which escape room did I do?", ("escape room",)),
    ("Do I own a drone?", ("drone",)),
    ("What's my favourite board game?", ("board game", "boardgame", "monopoly", "catan")),
    ("Which volcano did I climb?", ("volcano",)),
    ("What is the name of my tortoise?", ("tortoise", "turtle")),
    ("Which karaoke song do I always sing?", ("karaoke",)),
    ("What magic tricks can I do?", ("magic", "conjur")),
    ("Which vinyl records did I buy?", ("vinyl", "record player", "turntable")),
    ("Did I ever win the lottery?", ("lottery", "lotto")),
    ("What is my golf handicap?", ("golf", "handicap")),
    ("Which taekwondo belt do I have?", ("taekwondo", "karate", "judo", "martial art")),
    ("What did I name my sourdough starter?", ("sourdough",)),
)
"""Each question, and the stems of its topic: a memory holding any of them is not asked it."""

MEMORIES = ("tuning", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
            "twelfth")


def memory_records(name: str) -> list[dict[str, Any]]:
    import importlib

    module = importlib.import_module({"tuning": "personal_memory"}.get(name, f"personal_memory_{name}"))
    return list(module.memory(datetime.now(UTC).date()))


def mentions(records: Sequence[dict[str, Any]], stems: Sequence[str]) -> bool:
    """Whether any entity name, type or observation of the memory holds one of the stems."""
    for record in records:
        if record.get("type") != "entity":
            continue
        texts = [record["name"].replace("_", " "), record["entityType"], *record["observations"]]
        for text in texts:
            folded = f" {text.casefold()} "
            if any(stem in folded for stem in stems):
                return True
    return False


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", default=",".join(MEMORIES), help="personal memories, comma separated")
    parser.add_argument("--show", action="store_true", help="print each failing answer's start")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    options = arguments(argv)
    print(f"bench_absent {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {len(TOPICS)} questions", flush=True)
    print(f"{'memory':<9} {'asked':>5} {'ours empty':>11} {'BM25 empty':>11}", flush=True)
    total = ours_total = bm25_total = 0
    for name in options.memories.split(","):
        records = memory_records(name)
        asked = [text for text, stems in TOPICS if not mentions(records, stems)]
        memory = bench_recall.Memory(f"absent/{name}", records,
                                     [bench_recall.Question(text, frozenset()) for text in asked])
        with tempfile.TemporaryDirectory(prefix="bench-absent-") as scratch:
            ours = bench_recall.ask_ours_ready(memory, Path(scratch))
        bm25 = bench_recall.ask_fact_bm25(memory)
        ours_passed = [bench_recall.personal_passes(None, answer) for answer in ours]
        bm25_passed = [bench_recall.personal_passes(None, answer) for answer in bm25]
        total += len(asked)
        ours_total += sum(ours_passed)
        bm25_total += sum(bm25_passed)
        print(f"{name:<9} {len(asked):>5} {sum(ours_passed):>4} {sum(ours_passed) / len(asked):5.0%} "
              f"{sum(bm25_passed):>4} {sum(bm25_passed) / len(asked):5.0%}", flush=True)
        if options.show:
            for text, passed, answer in zip(asked, ours_passed, ours, strict=True):
                if not passed:
                    print(f"    not empty: {text!r}: {answer.text[:300]}", flush=True)
    print(f"{'all':<9} {total:>5} {ours_total:>4} {ours_total / total:5.0%} {bm25_total:>4} {bm25_total / total:5.0%}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
