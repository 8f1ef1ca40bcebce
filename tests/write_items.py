"""The items of a write (memory_server/model/items.py) made of the dicts a test writes them as, the
tools' wire shape, and checked as a client's call is decoded: a dict of another shape fails here
rather than in the write. Items already made pass as they are."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from memory_server.model.items import Entity, ObservationsToAdd, ObservationsToDelete, Relation


def entity_items(items: Iterable[Any]) -> list[Entity]:
    return msgspec.convert(list(items), list[Entity])


def relation_items(items: Iterable[Any]) -> list[Relation]:
    return msgspec.convert(list(items), list[Relation])


def addition_items(items: Iterable[Any]) -> list[ObservationsToAdd]:
    return msgspec.convert(list(items), list[ObservationsToAdd])


def deletion_items(items: Iterable[Any]) -> list[ObservationsToDelete]:
    return msgspec.convert(list(items), list[ObservationsToDelete])
