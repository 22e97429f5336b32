"""Running a concurrency test's workers at once, as threads of the test
process or as OS processes, all released together by a start gate.

A worker is a function whose first argument is the test database's name
(``None`` in a thread: Django is set up already) and whose last is the
gate, at which it waits (:func:`tests.workers.start_together`) once it is
ready: no worker begins before every one of them can.

Processes come from a fork server (:data:`PROCESSES`), started once per
test process with Django's heavier modules imported: a worker forked from
it shares nothing with the test process (no threads, no connections), as a
spawned one, but starts in a fraction of the time (eight spawned workers
took about 3.5 s to start on two cores, forked ones about 1.3 s). Each gets
the test process's environment of the moment (:func:`apply`), as a spawned
one would.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, connections

Job = tuple[Callable[..., Any], tuple[Any, ...]]
"""A worker and its arguments between the database name and the gate."""

PROCESSES = multiprocessing.get_context("forkserver")
# Modules that read no setting when imported: the workers configure Django
# themselves (tests/workers.py), from the environment they are given.
PROCESSES.set_forkserver_preload(
    [
        "django.db.models",
        "django.contrib.admin",
        "django.core.management",
        "django.test",
        "rest_framework",
        "psycopg",
        "MySQLdb",
    ]
)


def in_child(fn: Callable[..., Any], environ: dict[str, str], *args: Any) -> Any:
    """``fn(*args)`` in a worker process, under the test process's environment."""
    os.environ.clear()
    os.environ.update(environ)
    return fn(*args)


def apply(pool: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``pool.apply_async(fn, args)``, run under the current environment
    (a test may have set a variable its workers read: see :func:`in_child`)."""
    return pool.apply_async(in_child, (fn, dict(os.environ), *args))


@contextmanager
def start_gate(parties: int, *, processes: bool) -> Iterator[Any]:
    """A barrier for ``parties`` workers: a thread barrier, or for worker
    processes one served by a manager process (a pool's workers can only
    share a proxy)."""
    if not processes:
        yield threading.Barrier(parties)
        return
    with PROCESSES.Manager() as manager:
        yield manager.Barrier(parties)


def run_at_once(jobs: list[Job], *, processes: bool, timeout: float = 600) -> list[Any]:
    """Run ``jobs`` concurrently, released together; what each returned, in order.

    An exception in any worker fails the test here, in its own thread.
    """
    if processes:
        database_name = connection.settings_dict["NAME"]
        connections.close_all()
        with (
            start_gate(len(jobs), processes=True) as gate,
            PROCESSES.Pool(len(jobs)) as pool,
        ):
            pending = [apply(pool, fn, (database_name, *args, gate)) for fn, args in jobs]
            return [result.get(timeout=timeout) for result in pending]
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []
    gate = threading.Barrier(len(jobs))

    def work(slot: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            results[slot] = fn(None, *args, gate)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
            gate.abort()  # the others stop waiting for this one

    threads = [threading.Thread(target=work, args=(n, *job)) for n, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert errors == [], f"an error reached a caller: {errors!r}"
    return results
