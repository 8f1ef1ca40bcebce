"""memory_server/storage/settling.py: a store's conditions waited on as events (E1 to E3), and the
file store's wait_until (storage/interface.py). Every wait is on an event; the only timeouts are
those a condition that never holds runs out."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memory_server.model.items import Entity
from memory_server.storage.interface import Queued, Until
from memory_server.storage.settling import Signal
from memory_server.storage.store import GraphStore

WAIT = 60.0


def test_e1_a_waiter_looks_again_after_each_change_and_gives_up_at_its_timeout() -> None:
    signal = Signal()
    value = {"n": 0}
    looks: list[int] = []
    looked = [threading.Event() for _ in range(3)]

    def holds() -> bool:
        looks.append(value["n"])
        looked[len(looks) - 1].set()
        return value["n"] >= 2

    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(signal.wait_until(holds, WAIT)))
    waiter.start()
    assert looked[0].wait(WAIT)
    value["n"] = 1
    signal.changed()
    assert looked[1].wait(WAIT)
    value["n"] = 2
    signal.changed()
    waiter.join(WAIT)
    assert results == [True] and looks == [0, 1, 2]  # one look at the start, one after each change
    assert signal.wait_until(lambda: False, 0.05) is False


def test_e2_a_change_between_the_look_and_the_sleep_is_not_missed() -> None:
    signal = Signal()
    state = {"looked": False}

    def holds() -> bool:
        if not state["looked"]:
            state["looked"] = True
            signal.changed()  # the change lands after this look, before the waiter sleeps
            return False
        return True

    assert signal.wait_until(holds, WAIT) is True


def test_e3_changed_may_be_called_under_a_lock_the_condition_takes() -> None:
    signal = Signal()
    lock = threading.Lock()
    value = {"set": False}
    looking = threading.Event()

    def holds() -> bool:
        looking.set()
        with lock:
            return value["set"]

    results: list[bool] = []
    with lock:
        waiter = threading.Thread(target=lambda: results.append(signal.wait_until(holds, WAIT)))
        waiter.start()
        assert looking.wait(WAIT)  # the waiter is in its condition, waiting for this lock
        value["set"] = True
        signal.changed()  # returns at once: the waiter reads its condition outside the signal's lock
    waiter.join(WAIT)
    assert results == [True]


def test_a_file_store_waits_for_its_own_conditions_and_refuses_the_databases(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    with GraphStore(memory) as store:
        assert store.wait_until(Queued(0), WAIT)
        assert not store.wait_until(Until.INDEXED, 0.05)  # no graph yet, and nothing makes one
        store.create_entities([Entity("Ann", "person", ["plays the cello"])])
        store.poll_external_change()  # makes the word index, as the watcher does
        assert store.wait_until(Until.INDEXED, WAIT)
        assert store.wait_until(Until.HOT, WAIT)  # a write came first: the graph answers (coldstart)
        with pytest.raises(ValueError):
            store.wait_until(Until.EMBEDDED, WAIT)
