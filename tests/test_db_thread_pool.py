"""How the store's database threads hand out calls (the pool alone, no database)."""

from __future__ import annotations

import contextvars
import functools
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from anvia_django.persistence.threads.pool import DatabaseThreadPool


@pytest.fixture
def pool() -> Iterator[DatabaseThreadPool]:
    threads = DatabaseThreadPool("test", 4)
    yield threads
    threads.close()


def run(pool: DatabaseThreadPool, call: Callable[[], Any]) -> Any:
    return pool.submit(contextvars.copy_context(), call).result(timeout=20)


def this_thread() -> str:
    return threading.current_thread().name


def test_calls_one_after_another_stay_on_one_thread(pool: DatabaseThreadPool) -> None:
    assert {run(pool, this_thread) for _ in range(50)} == {"anvia-db-test-0"}


def test_after_a_burst_the_most_recently_idle_thread_takes_the_next_call(
    pool: DatabaseThreadPool,
) -> None:
    barrier = threading.Barrier(4)

    def meet() -> str:
        barrier.wait(timeout=20)
        return this_thread()

    burst = [pool.submit(contextvars.copy_context(), meet) for _ in range(4)]
    assert len({future.result(timeout=20) for future in burst}) == 4
    # Round-robin over the four idle threads would spread these.
    assert len({run(pool, this_thread) for _ in range(20)}) == 1


class Transcript:
    """A call's result that can be watched with a weak reference."""


def test_a_thread_keeps_nothing_of_a_finished_call() -> None:
    pool = DatabaseThreadPool("test", 1)
    try:
        result = weakref.ref(run(pool, Transcript))
        # The next call runs on the same (only) thread, after the first one
        # is done with: the result is gone unless that thread still holds it.
        assert run(pool, lambda: result() is None)
    finally:
        pool.close()


def test_close_runs_the_calls_still_waiting_for_a_thread() -> None:
    pool = DatabaseThreadPool("test", 1)
    release = threading.Event()
    first = pool.submit(contextvars.copy_context(), lambda: release.wait(timeout=20))
    waiting = [pool.submit(contextvars.copy_context(), functools.partial(str, n)) for n in range(3)]
    release.set()
    pool.close()
    assert first.result(timeout=0) is True
    assert [future.result(timeout=0) for future in waiting] == ["0", "1", "2"]
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(contextvars.copy_context(), this_thread)
