"""The model of meaning as the database's store takes it (storage/interface.py's MeaningModel):
the semantic package's calls, given to the store by the adapter that builds it, so that storage
needs nothing of retrieval. The file's searches use the package directly (retrieval/answer.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import semantic


class SemanticMeaning:
    """The process's model (retrieval/semantic), its settings read at each call: a test (or a
    change of MEMORY_SEMANTIC) that changes one is met by the next call, as by the file's searches."""

    def identity(self) -> str | None:
        return semantic.model_identity()

    def embed(self, texts: Sequence[str]) -> Any | None:
        return semantic.embed(texts)

    def query_vector(self, query: str) -> Any | None:
        return semantic.query_vector(query)

    @property
    def min_similarity(self) -> float:
        return semantic.MIN_SIMILARITY

    @property
    def exact_up_to(self) -> int:
        return semantic.EXACT_UP_TO

    @property
    def shortlist_least(self) -> int:
        return semantic.SHORTLIST_MIN

    @property
    def sign_words(self) -> int:
        return semantic.WORDS

    @property
    def chunk(self) -> int:
        return semantic.CHUNK

    def quantize(self, vectors: Any) -> tuple[Any, Any]:
        import numpy as np

        return semantic.quantize(np, vectors)

    def sign_codes(self, rows: Any) -> Any:
        import numpy as np

        return semantic.sign_codes(np, rows)

    def table_scores(self, matrix: Any, scales: Any, codes: Any, count: int, vector: Any, k: int, *,
                     exact_up_to: int, least: int) -> Any:
        import numpy as np

        return semantic.table_scores(np, matrix, scales, codes, count, vector, k, exact_up_to=exact_up_to, least=least)


MEANING = SemanticMeaning()
"""What the adapter gives every database store it builds."""
