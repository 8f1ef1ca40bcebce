"""memory_server/background.py: one owner for the memory's threads, with real threads and
real processes (B1 to B6); every wait is on an event, none on a clock."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memory_server.background import Background

REPO = Path(__file__).resolve().parents[1]
WAIT_SECONDS = 60.0


def test_b1_b2_work_runs_in_named_workers_no_more_than_asked() -> None:
    background = Background(workers=2)
    seen: set[str] = set()
    release = threading.Event()
    started = threading.Barrier(3)

    def work() -> None:
        seen.add(threading.current_thread().name)
        started.wait(WAIT_SECONDS)
        release.wait(WAIT_SECONDS)

    assert background.submit(work) and background.submit(work)
    started.wait(WAIT_SECONDS)  # both run at once
    assert background.submit(work)  # a third waits for a worker
    assert len(background.running) == 2
    release.set()
    assert background.close(WAIT_SECONDS) == []
    assert seen == {"memory-background-1", "memory-background-2"}


def test_b2_later_runs_after_its_delay_unless_cancelled() -> None:
    background = Background()
    done = threading.Event()
    never = threading.Event()
    handle = background.later(60.0, never.set)
    assert handle is not None
    handle.cancel()
    assert background.later(0.0, done.set) is not None
    assert done.wait(WAIT_SECONDS)
    assert background.close(WAIT_SECONDS) == []
    assert not never.is_set()


def test_b2_b3_close_stops_long_work_between_steps_drops_waiting_work_and_refuses_more() -> None:
    background = Background(workers=1)
    step = threading.Event()
    steps: list[int] = []
    dropped = threading.Event()

    def long_work() -> None:
        for number in range(1_000_000):
            if background.stopping.is_set():
                return
            steps.append(number)
            step.set()

    assert background.submit(long_work)
    assert background.submit(dropped.set)
    assert step.wait(WAIT_SECONDS)
    assert background.close(WAIT_SECONDS) == []
    assert len(steps) < 1_000_000 and not dropped.is_set()
    assert background.running == []
    assert not background.submit(dropped.set) and background.later(0.0, dropped.set) is None
    assert background.close(WAIT_SECONDS) == []  # closing twice is closing once


def test_b3_a_thread_that_does_not_stop_is_named_on_stderr(capsys: object) -> None:
    background = Background(name="stubborn")
    release = threading.Event()
    running = threading.Event()

    def ignores_stopping() -> None:
        running.set()
        release.wait(WAIT_SECONDS)

    assert background.submit(ignores_stopping)
    assert running.wait(WAIT_SECONDS)
    assert background.close(0.0) == ["stubborn-1"]
    release.set()
    assert "the background thread stubborn-1 did not stop within 0 s" in capsys.readouterr().err  # type: ignore[attr-defined]


@pytest.mark.parametrize("made", ["background.process()", "background.Background(name='owned')"])
def test_b4_a_background_never_closed_is_closed_at_exit(made: str) -> None:
    # the process's own, and one that a part of the memory owns and never closed
    code = (
        "import threading\n"
        "from memory_server import background\n"
        f"b = {made}\n"
        "started = threading.Event()\n"
        "def work():\n"
        "    started.set()\n"
        "    b.stopping.wait()\n"
        "    print('stopped', flush=True)\n"
        "b.submit(work)\n"
        "started.wait()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT_SECONDS,
                            env={"PYTHONPATH": str(REPO)}, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stopped\n" and result.stderr == ""


def test_b5_quick_work_runs_at_its_time_while_long_work_holds_every_worker() -> None:
    background = Background(workers=1)
    release = threading.Event()
    running = threading.Event()
    quick = threading.Event()
    slow = threading.Event()
    ran_in: list[str] = []

    def long_work() -> None:
        running.set()
        release.wait(WAIT_SECONDS)

    def quick_work() -> None:
        ran_in.append(threading.current_thread().name)
        quick.set()

    assert background.submit(long_work)
    assert running.wait(WAIT_SECONDS)
    assert background.later(0.0, slow.set) is not None  # waits for the one worker
    assert background.later(0.0, quick_work, quick=True) is not None
    assert quick.wait(WAIT_SECONDS)  # while the worker is still held
    assert not slow.is_set() and ran_in == ["memory-background-later"]
    release.set()
    assert slow.wait(WAIT_SECONDS)
    assert background.close(WAIT_SECONDS) == []


def test_b6_run_gives_the_outcome_in_a_future_and_cancels_what_never_runs() -> None:
    background = Background(workers=1)
    release = threading.Event()
    running = threading.Event()

    def hold() -> str:
        running.set()
        release.wait(WAIT_SECONDS)
        return "held"

    def fail() -> None:
        raise ValueError("no")

    held = background.run(hold)
    assert held is not None and running.wait(WAIT_SECONDS)
    failing, cancelled, dropped = background.run(fail), background.run(print, "never"), background.run(int, "4")
    assert failing is not None and cancelled is not None and dropped is not None
    assert cancelled.cancel()  # not yet taken by the one worker: it never runs
    release.set()
    assert held.result(WAIT_SECONDS) == "held"
    assert isinstance(failing.exception(WAIT_SECONDS), ValueError)
    assert dropped.result(WAIT_SECONDS) == 4
    release.clear()
    running.clear()
    blocker = background.run(hold)
    assert blocker is not None and running.wait(WAIT_SECONDS)
    waiting = background.run(int, "5")  # behind the one worker, which `hold` keeps
    assert waiting is not None
    settled = threading.Event()
    waiting.add_done_callback(lambda _: settled.set())
    closer = threading.Thread(target=background.close, args=(WAIT_SECONDS,))
    closer.start()
    assert settled.wait(WAIT_SECONDS) and waiting.cancelled()  # dropped by close, while `hold` still runs
    release.set()
    closer.join(WAIT_SECONDS)
    assert not closer.is_alive() and blocker.result(0) == "held"
    assert background.run(int, "6") is None


B7_PROBE = """
import sys
from memory_server.background import give_back_memory

def resident():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

blocks = [bytes(4000) + bytes([n % 256]) for n in range(50_000)]  # 200 MB from glibc's heap
kept = blocks[::64]  # a block kept every 256 KB: the freed ones lie between them, not at the top
del blocks
before = resident()
give_back_memory()
print(before - resident())
"""


def test_b7_the_heap_that_bulk_work_freed_goes_back_to_the_system() -> None:
    # In a process of its own: its heap is this work's alone.
    done = subprocess.run([sys.executable, "-c", B7_PROBE], capture_output=True, text=True, cwd=REPO,
                          timeout=WAIT_SECONDS, check=True)
    assert int(done.stdout) > 100 << 20, "most of the 200 MB freed between the kept blocks leaves the process"
