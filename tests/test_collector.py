"""storage/collector.py: the process's one policy for the cyclic collector (G1 to G3)."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

from memory_server.storage import collector


class Cycle:
    me: Any


def test_g1_pauses_are_counted_across_threads_and_someone_elses_pause_is_theirs() -> None:
    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with collector.paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with collector.paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause still holds
    leave.set()
    thread.join()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # not ours to resume
    finally:
        gc.enable()


def test_g2_what_was_young_goes_to_the_oldest_generation() -> None:
    gc.collect()
    young = [[index] for index in range(20)]
    with collector.paused():
        made = [[index] for index in range(20)]
    oldest = {id(item) for item in gc.get_objects(generation=2)}
    assert all(id(item) in oldest for item in young + made)


def test_g3_a_process_that_only_pauses_still_frees_its_cycles() -> None:
    alive: weakref.WeakSet[Cycle] = weakref.WeakSet()
    for _ in range(2 * collector.PROMOTIONS_PER_COLLECTION + 1):
        with collector.paused():
            cycle = Cycle()
            cycle.me = cycle
            alive.add(cycle)
            del cycle
    assert gc.isenabled()
    assert len(alive) <= collector.PROMOTIONS_PER_COLLECTION + 1
