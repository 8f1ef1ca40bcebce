"""How a store's conditions are waited on as events (interface.py's wait_until, guarantees E1-E3).

E1. Whoever changes what a condition reads calls :meth:`Signal.changed` after the change; a
    waiter looks at its condition again after each change, and at no other time but its first
    look and its timeout (never on a clock of its own).
E2. No change is missed: a change between a waiter's look and its sleep wakes it at once.
E3. The condition is read outside the signal's lock, so it may take the store's locks or stat a
    file; :meth:`Signal.changed` takes that lock alone, so it may be called under any of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Signal:
    """A count of changes that wakes the threads waiting for a condition (E1-E3)."""

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._changes = 0

    def changed(self) -> None:
        with self._condition:
            self._changes += 1
            self._condition.notify_all()

    def wait_until(self, holds: Callable[[], bool], timeout: float) -> bool:
        """True once `holds()` is true, False when `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._condition:
                seen = self._changes
            if holds():
                return True
            with self._condition:
                while self._changes == seen:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._condition.wait(left)
