"""The pager: a process's cut answers and the cursors into them. It gives the first page of a read,
the page a cursor points at, and makes the page after one ahead; the pages themselves are cut by
:mod:`.entity_pages` and :mod:`.fact_pages`, the answers kept by :mod:`.kept`."""

from __future__ import annotations

import secrets
import threading
from typing import Any, Final

import msgspec

from ...model.census import Listing, summarise
from .budget import _SMALLEST_ENTITY, _SMALLEST_RELATION, DEFAULT_BUDGET, MINIMUM_BUDGET
from .cursors import CursorError, make_cursor, open_cursor
from .entity_pages import EntityPages
from .fact_pages import _facts_page
from .kept import KEPT_ANSWER_BYTES, KEPT_ANSWERS, KEPT_ANSWERS_IN_ALL, KeptAnswers
from .pages import Answer, Facts, Page

_encoder: Final = msgspec.json.Encoder()


class Pager:
    """Cuts answers larger than `budget` into pages, and follows cursors into the last few of them.

    Safe to share between threads."""

    def __init__(self, budget: int = DEFAULT_BUDGET, *, keep: int = KEPT_ANSWERS,
                 keep_in_all: int = KEPT_ANSWERS_IN_ALL, keep_bytes: int = KEPT_ANSWER_BYTES,
                 key: bytes | None = None) -> None:
        if budget < MINIMUM_BUDGET:
            raise ValueError(f"the answer budget must be at least {MINIMUM_BUDGET}")
        self.budget = budget
        self.kept = KeptAnswers(keep, keep_in_all, keep_bytes)
        self._key = key if key is not None else secrets.token_bytes(32)
        self._lock = threading.Lock()  # for _ahead (the kept answers have their own)
        self._ahead: tuple[tuple[int, int, int], Page] | None = None  # see prepare
        self._entities = EntityPages(budget, self._cursor)

    # -- the first page ------------------------------------------------------------------------

    def first_page(self, tool: str, request: bytes, entities: list[Any], relations: list[Any], *,
                   summarise_graph: bool = False, client: str | None = None) -> Page:
        """The whole answer when it fits the budget (exactly as an uncut answer is encoded),
        else the first page of it, led by the graph's summary when `summarise_graph` (from the
        entities' own `summarise` when they are a Listing, else counted here).

        Entities and relations are their objects, or their JSON as msgspec.Raw (an answer read
        from the index cache, not decoded until a page needs more than its bytes). A cut answer is
        kept among `client`'s (whoever the transport says asked; None for a lone client)."""
        smallest = _SMALLEST_ENTITY * len(entities) + _SMALLEST_RELATION * len(relations)
        if smallest <= self.budget:
            encoded = _encoder.encode({"entities": entities, "relations": relations})
            if len(encoded) <= self.budget:
                return Page(encoded)
        summary = None
        if summarise_graph:
            limit = self.budget // 4
            graph_summary = entities.summarise if isinstance(entities, Listing) else None
            summary = _encoder.encode(graph_summary(limit) if graph_summary is not None
                                      else summarise(entities, relations, limit))
        answer = Answer(tool, request, entities + relations, len(entities), summary)
        answer_id = self.kept.new_id()
        self.kept.add(answer_id, answer, client)
        return self._page(answer_id, answer, 0, 0, first=True)

    def first_facts(self, tool: str, request: bytes, facts: Facts, *, client: str | None = None) -> Page:
        """The first page of a search answer made of facts (see :class:`Facts`): the whole answer
        when it fits `facts.characters` (exactly as an uncut answer is encoded, when every entity
        is shown whole), else its first page, with a cursor to the next."""
        answer_id = self.kept.new_id()  # an id unused when the answer fits: ids only need to differ
        page = self._facts_page(answer_id, facts, 0)
        if page.following is not None:
            self.kept.add(answer_id, Answer(tool, request, [], 0, facts=facts), client)
        return page

    def _facts_page(self, answer_id: int, facts: Facts, start: int) -> Page:
        def cursor(end: int) -> str | None:
            return self._cursor(answer_id, end, 0) if end < len(facts.order) else None

        return _facts_page(facts, start, cursor, answer_id)

    # -- later pages ---------------------------------------------------------------------------

    def next_page(self, cursor: str, tool: str, request: bytes) -> Page:
        """The page a cursor points at. CursorError when it is malformed, forged, expired, or made
        for another tool or other arguments."""
        start_again = f"Call {tool} again without a cursor to start from the first page."
        answer_id, unit, part = open_cursor(self._key, cursor, start_again)
        answer = self.kept.get(answer_id, use=True)
        if answer is None:
            raise CursorError(f"This cursor has expired: the server keeps the pages of each client's last {self.kept.keep} "
                              f"cut answers ({self.kept.keep_in_all} in all, fewer when they are large) and forgets them all "
                              f"when it restarts. {start_again}")
        if answer.tool != tool:
            raise CursorError(f"This cursor continues an answer of {answer.tool}, not of {tool}: pass it to "
                              f"{answer.tool} with the same arguments as before, or call {tool} without a cursor.")
        if answer.request != request:
            raise CursorError(f"This cursor continues a {tool} call with other arguments: pass the same arguments "
                              f"as for the first page together with the cursor, or call {tool} again without a "
                              "cursor to start over.")
        with self._lock:
            ahead = self._ahead
        if ahead is not None and ahead[0] == (answer_id, unit, part):
            return ahead[1]
        return self._page(answer_id, answer, unit, part, first=False)

    def prepare(self, page: Page) -> None:
        """Makes the page after `page` now, text included, for the cursor `page` gave. A client that
        follows cursors reads one page while the next is made, and finds it ready when it asks (the
        checks of its cursor stay the same); only the latest one is kept."""
        if page.following is None:
            return
        answer_id, unit, part = page.following
        answer = self.kept.get(answer_id, use=False)
        if answer is None:
            return
        made = self._page(answer_id, answer, unit, part, first=False)
        made = Page(made.json, made.notes, made.following, _encoder.encode(made.json.decode()))
        with self._lock:
            self._ahead = (page.following, made)

    def _cursor(self, answer_id: int, unit: int, part: int) -> str:
        return make_cursor(self._key, answer_id, unit, part)

    # -- cutting one page ----------------------------------------------------------------------

    def _page(self, answer_id: int, answer: Answer, unit: int, part: int, *, first: bool) -> Page:
        if answer.facts is not None:
            return self._facts_page(answer_id, answer.facts, unit)
        return self._entities.page(answer_id, answer, unit, part, first=first)
