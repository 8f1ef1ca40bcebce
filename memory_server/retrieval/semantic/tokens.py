"""Tokens: BERT's uncased WordPiece, as all-MiniLM-L6-v2 was trained with.

The vocabulary is ``minilm_vocab.txt`` beside this module (the uncased BERT vocabulary that
all-MiniLM-L6-v2 uses, Apache-2.0). Standard library only.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Final

MAX_TOKENS: Final = 256
"""all-MiniLM-L6-v2 was trained on at most 256 tokens: a longer observation is embedded by its start."""
VOCABULARY: Final = Path(__file__).with_name("minilm_vocab.txt")


def _is_punctuation(character: str) -> bool:
    code = ord(character)
    # BERT counts every non-alphanumeric ASCII character as punctuation ("$", "^", "`" too).
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(character).startswith("P")


def _is_ideograph(code: int) -> bool:
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
            or 0x2A700 <= code <= 0x2CEAF or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)


class WordPiece:
    """Text -> token ids: lower case, accents stripped, split at spaces and punctuation (each
    CJK ideograph a word of its own), each word the longest pieces of the vocabulary, greedily."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.ids = {piece: index for index, piece in enumerate(vocabulary)}
        self.unknown = self.ids["[UNK]"]
        self.first = self.ids["[CLS]"]
        self.last = self.ids["[SEP]"]
        self.pieces = lru_cache(maxsize=65_536)(self._pieces)

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        return cls(path.read_text(encoding="utf-8").splitlines())

    def encode(self, text: str) -> list[int]:
        ids = [self.first]
        for word in words(text):
            ids.extend(self.pieces(word))
            if len(ids) >= MAX_TOKENS - 1:
                break
        del ids[MAX_TOKENS - 1:]
        ids.append(self.last)
        return ids

    def _pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > 100:
            return (self.unknown,)
        found: list[int] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if (index := self.ids.get(piece)) is not None:
                    found.append(index)
                    start = end
                    break
            else:
                return (self.unknown,)
        return tuple(found)


def words(text: str) -> list[str]:
    """BERT's basic tokenizer (uncased): the words WordPiece splits further."""
    cleaned = []
    for character in unicodedata.normalize("NFD", text.lower()):
        category = unicodedata.category(character)
        if category == "Mn" or character == "\ufffd" or (category in ("Cc", "Cf") and character not in "\t\n\r"):
            continue
        code = ord(character)
        if character == "\x00":
            continue
        if _is_punctuation(character) or _is_ideograph(code):
            cleaned.append(f" {character} ")
        else:
            cleaned.append(character)
    return "".join(cleaned).split()
