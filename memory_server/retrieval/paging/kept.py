"""The cut answers a process keeps for their cursors: a few per client, a bounded number and bytes in
all, the one unused for longest forgotten first (its cursors expire)."""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Final

import msgspec

from .pages import Answer

KEPT_ANSWERS: Final = 16
"""Cut answers kept for each client's cursors; its oldest is forgotten (its cursors expire) after this many."""
KEPT_ANSWERS_IN_ALL: Final = 256
"""Cut answers kept for all clients together; beyond it the one unused for longest is forgotten."""
KEPT_ANSWER_BYTES: Final = 64 << 20
"""Bytes the kept answers may hold of their own (see :func:`footprint`), all clients together;
beyond it the one unused for longest is forgotten (the newest is always kept)."""

_REFERENCE: Final = 8
"""Bytes of one reference in a list."""


def footprint(answer: Answer) -> int:
    """About how many bytes a kept answer holds of its own: its call's key, its summary, the JSON
    of units read from the index cache (msgspec.Raw, copies of the file's bytes), and a reference
    per unit and per fact. The objects they refer to are not counted: the graph's, or those of the
    graph of candidates the answer was found in, which its pages ask for their relations."""
    size = len(answer.request) + len(answer.summary or b"") + _REFERENCE * len(answer.units)
    size += sum(len(unit) for unit in answer.units if type(unit) is msgspec.Raw)
    if (facts := answer.facts) is not None:
        size += _REFERENCE * len(facts.entities) + 2 * _REFERENCE * len(facts.order)
    return size


class KeptAnswers:
    """The cut answers kept, each under its id, least recently used first. Safe to share between threads."""

    def __init__(self, keep: int = KEPT_ANSWERS, keep_in_all: int = KEPT_ANSWERS_IN_ALL,
                 keep_bytes: int = KEPT_ANSWER_BYTES) -> None:
        self.keep = keep
        self.keep_in_all = keep_in_all
        self.keep_bytes = keep_bytes
        self._sizes: dict[int, int] = {}  # each kept answer's footprint
        self.kept_bytes = 0
        """The footprints of the answers kept now, added up."""
        self._answers: OrderedDict[int, Answer] = OrderedDict()  # least recently used first
        # Each client's answers, least recently used first, and whose each answer is: one client
        # making many cut answers forgets its own, never another's (see `_keep`).
        self._of_client: dict[str | None, OrderedDict[int, None]] = {}
        self._client_of: dict[int, str | None] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def new_id(self) -> int:
        """An id no other answer of this process has."""
        with self._lock:
            return next(self._ids)

    def add(self, answer_id: int, answer: Answer, client: str | None) -> None:
        """Keeps `answer` among `client`'s (see `_keep`)."""
        with self._lock:
            self._keep(answer_id, answer, client)

    def get(self, answer_id: int, *, use: bool) -> Answer | None:
        """The answer kept under `answer_id` (None: never kept, or forgotten); with `use`, it becomes
        its client's and everyone's most recently used."""
        with self._lock:
            answer = self._answers.get(answer_id)
            if answer is not None and use:
                self._answers.move_to_end(answer_id)
                self._of_client[self._client_of[answer_id]].move_to_end(answer_id)
        return answer

    def _keep(self, answer_id: int, answer: Answer, client: str | None) -> None:
        """Under the lock: keep `answer`, forgetting its client's oldest beyond `keep` and the
        oldest of all beyond `keep_in_all`, or while all of them hold more than `keep_bytes`."""
        self._answers[answer_id] = answer
        self._client_of[answer_id] = client
        self._sizes[answer_id] = size = footprint(answer)
        self.kept_bytes += size
        mine = self._of_client.setdefault(client, OrderedDict())
        mine[answer_id] = None
        while len(mine) > self.keep:
            self._forget(next(iter(mine)))
        while len(self._answers) > self.keep_in_all or (self.kept_bytes > self.keep_bytes and len(self._answers) > 1):
            self._forget(next(iter(self._answers)))

    def _forget(self, answer_id: int) -> None:
        del self._answers[answer_id]
        self.kept_bytes -= self._sizes.pop(answer_id)
        client = self._client_of.pop(answer_id)
        theirs = self._of_client[client]
        del theirs[answer_id]
        if not theirs:
            del self._of_client[client]
