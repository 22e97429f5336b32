"""Appends and loads in the event loop: when they may run there, and
the connections kept per loop.

Where :mod:`anvia_django.db_threads` would send a store call to one of the
store's own threads (async code with no request or ``async_to_sync`` caller
around it), the call already runs on connections of the store's own, so
nothing a caller holds is lost by leaving Django's connection objects too.
There an append runs in the event loop itself, on connections the store
keeps per event loop and alias: :mod:`anvia_django.async_postgres` (psycopg
3's async connections) and :mod:`anvia_django.async_sqlite`. Loads run
there too, on the same connections (:mod:`anvia_django.event_loop_loads`).
The two thread hops cost more than an append's own statements, or a short
load's; a long load's decoded messages cost more still to cross from a
thread to the loop's. What those modules cannot do there goes to the
store's threads as before.

``ANVIA_DJANGO["EVENT_LOOP_APPENDS"] = False`` keeps appends (and loads) on
the threads too, e.g. for instrumentation that wraps Django's cursors:
statements run in the event loop do not go through them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

from .conf import app_settings
from .db_threads import has_outer_sync_thread

T = TypeVar("T")


def may_run_in_event_loop() -> bool:
    """Whether an append (or a load) called now may run in the event
    loop: the setting allows it and the store would otherwise use its own
    threads, whose connections see nothing a caller's would not."""
    if not app_settings.EVENT_LOOP_APPENDS or app_settings.STORE_THREADS is None:
        return False
    return not has_outer_sync_thread()  # else the caller's thread and connection


MOST_LOADED_ROWS = 2_000
"""A load in the event loop that fetches more rows goes to the thread (it
stops at the batch that crosses the bound). On SQLite the fetch holds the loop: about a
third of a millisecond per 1,000 rows on this project's benchmark machine
(the conversion after it gives the loop turns: :mod:`.event_loop_loads`)."""

MOST_LOADED_CHARS = 2 * 1024 * 1024
"""Nor does a load fetch more message text than this in the event loop
(give or take the batch that crosses it)."""

LOAD_BATCH = 64
"""Rows fetched, and converted, at a time."""

MOST_REMEMBERED_LONG_LOADS = 1024
"""Loads found too long, remembered per event loop and alias (:class:`LongLoads`)."""


class Fetched(NamedTuple):
    """A load's query's rows, fetched in the event loop."""

    rows: list[tuple[Any, ...]]
    chars: int
    """The text in their last column (the message, or the owner)."""


class LoadBound:
    """Counts one query's rows as a load in the event loop fetches them, in
    batches of :data:`LOAD_BATCH`, against :data:`MOST_LOADED_ROWS` and
    :data:`MOST_LOADED_CHARS` (the last column: the message, or the owner)."""

    __slots__ = ("chars", "rows")

    def __init__(self) -> None:
        self.rows = 0
        self.chars = 0

    def passed_by(self, batch: list[tuple[Any, ...]]) -> bool:
        """Count ``batch`` in; whether the query is now past a bound."""
        self.rows += len(batch)
        self.chars += sum([len(row[-1] or "") for row in batch])
        return self.rows > MOST_LOADED_ROWS or self.chars > MOST_LOADED_CHARS


class LongLoads:
    """``(session_id, load_limit)`` of loads found too long in one event loop,
    oldest first, at most :data:`MOST_REMEMBERED_LONG_LOADS`: they go straight
    to the thread (a long transcript rarely gets short again), sparing the
    event loop a read it would throw away."""

    def __init__(self) -> None:
        self._loads: dict[tuple[str, int | None], None] = {}

    def __contains__(self, load: tuple[str, int | None]) -> bool:
        return load in self._loads

    def add(self, load: tuple[str, int | None]) -> None:
        self._loads[load] = None
        if len(self._loads) > MOST_REMEMBERED_LONG_LOADS:
            del self._loads[next(iter(self._loads))]


class PerEventLoop(Generic[T]):
    """One ``T`` per running event loop and database alias.

    Each is closed with ``close``: when its loop is collected, when a later
    loop opens its own after that loop closed, or by :meth:`close_all`
    (``close_db_threads``). A forked child forgets the parent's without
    closing them: their sockets and files are the parent's.
    """

    def __init__(self, open: Callable[[str], T], close: Callable[[T], None]) -> None:
        self._open = open
        self._close = close
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, T]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        _every.append(self)

    def get(self, alias: str) -> T:
        """The running loop's ``T`` for ``alias``, opened on first use."""
        loop = asyncio.get_running_loop()
        held = self._by_loop.get(loop)
        if held is None:
            with self._lock:
                for other, theirs in list(self._by_loop.items()):
                    if other.is_closed():
                        self._close_each(theirs)
                        del self._by_loop[other]
                held = self._by_loop[loop] = {}
            weakref.finalize(loop, self._close_each, held)
        found = held.get(alias)
        if found is None:
            found = held[alias] = self._open(alias)
        return found

    def all(self) -> list[T]:
        """Every loop's, for tests and for closing."""
        with self._lock:
            return [item for held in self._by_loop.values() for item in held.values()]

    def close_all(self) -> None:
        with self._lock:
            every = list(self._by_loop.values())
            self._by_loop.clear()
        for held in every:
            self._close_each(held)

    def _close_each(self, held: dict[str, T]) -> None:
        for item in held.values():
            self._close(item)
        held.clear()

    def _forget(self) -> None:
        self._by_loop = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()


_every: list[PerEventLoop[Any]] = []


def close_event_loop_connections() -> None:
    """Close what every event loop holds (see ``close_db_threads``)."""
    for registry in list(_every):
        registry.close_all()


def _forget_after_fork() -> None:
    for registry in _every:
        registry._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
