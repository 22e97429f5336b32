"""Loads in the event loop, for both vendors' modules
(:mod:`anvia_django.async_sqlite`, :mod:`anvia_django.async_postgres`).

:func:`~anvia_django.persistence.reads.read_messages` is synchronous and
its queries are the thread's, so it is replayed: it runs on the rows
fetched so far, and where it asks for rows not fetched yet it stops
(:class:`_Unread`); the vendor fetches them in the loop and it runs again.
A load is one query, or two when a user-scoped read found nothing (then
the owner).

The fetched rows are converted (a message's JSON decoded, mostly) before
the replay, a piece at a time (64 rows, or fewer where the messages are
long: :data:`CONVERTING_CHARS`): after about :data:`CONVERTING_SLICE`
seconds of it the loop runs its other callbacks before the next piece. So a
1,000-message transcript no longer has to go to the store's thread to spare
the loop, where the hop and the decoded messages crossing to the loop's
thread cost a third of the load (``benchmarks/analysis.md``); only a load
past the fetch bounds of :class:`~anvia_django.event_loops.LoadBound` does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from .core.memory.types import MemoryContext, Message
from .event_loops import LOAD_BATCH, Fetched, LongLoads
from .persistence.compiled import CompiledQuery
from .persistence.reads import read_messages

Fetch = Callable[[str, list[Any]], Awaitable[Fetched | None]]
"""A vendor's fetch of a query's rows (SQL, parameters) in the loop; ``None``
when they are past the bounds of :class:`~anvia_django.event_loops.LoadBound`."""

CONVERTING_SLICE = 0.0005
"""Seconds of converting rows after which a load lets the loop run its
other callbacks: about what a 20-message load takes in all."""

CONVERTING_CHARS = 64 * 1024
"""Message text converted at a time, on average over the load's rows: 64
rows of long messages would hold the loop for milliseconds, decoding alone."""

_MOST_QUERIES_PER_LOAD = 2


async def load_replayed(
    context: MemoryContext,
    connection: BaseDatabaseWrapper,
    limit: int | None,
    long_loads: LongLoads,
    fetch: Fetch,
) -> list[Message] | None:
    """``store.load(context)`` with ``load_limit`` ``limit`` on the rows of
    ``fetch``, converted through Django's ``connection`` in the loop's
    thread (which stays closed) as the thread converts its own; ``None``,
    and the load remembered in ``long_loads``, when a query's rows are past
    the bounds. Raises what ``fetch`` raises.
    """
    load = (context.session_id, limit)
    if load in long_loads:
        return None
    converted: dict[tuple[Any, ...], list[Any]] = {}
    for _ in range(_MOST_QUERIES_PER_LOAD + 1):
        try:
            return read_messages(_Replay(converted), context, connection.alias, limit)
        except _Unread as unread:
            query, values = unread.query, unread.values
        fetched = await fetch(query.sql, query.params_for(connection, values))
        if fetched is None:
            long_loads.add(load)
            return None
        converted[_key(query, values)] = await _converted(query, fetched, connection)
    return None  # not reached: read_messages runs two queries at most


async def _converted(
    query: CompiledQuery, fetched: Fetched, connection: BaseDatabaseWrapper
) -> list[Any]:
    """``fetched`` converted (values of a one-column query, else lists),
    giving the loop a turn after each :data:`CONVERTING_SLICE` of converting."""
    one_column = len(query.columns) == 1
    convert = query.column_converter(connection) if one_column else query.rows_converter(connection)
    rows = fetched.rows
    # Pieces of about CONVERTING_CHARS, as many rows as hold that much text
    # on average: the fetch counted the text, and counting it row by row
    # again would cost a long load of short messages a few percent.
    per_piece = max(1, min(LOAD_BATCH, CONVERTING_CHARS * len(rows) // max(1, fetched.chars)))
    if len(rows) <= per_piece:
        return convert(rows)
    converted: list[Any] = []
    started = time.perf_counter()
    for start in range(0, len(rows), per_piece):
        if start and time.perf_counter() - started > CONVERTING_SLICE:
            await asyncio.sleep(0)
            started = time.perf_counter()
        converted += convert(rows[start : start + per_piece])
    return converted


class _Unread(Exception):
    """Rows a replayed load needs and has not fetched yet."""

    def __init__(self, query: CompiledQuery, values: Mapping[str, Any]) -> None:
        self.query = query
        self.values = values


def _key(query: CompiledQuery, values: Mapping[str, Any]) -> tuple[Any, ...]:
    return (query.sql, *values.items())


class _Replay:
    """A :class:`~anvia_django.persistence.reads.Reader` of rows already
    fetched and converted."""

    def __init__(self, converted: dict[tuple[Any, ...], list[Any]]) -> None:
        self.converted = converted

    def column(self, query: CompiledQuery, values: Mapping[str, Any]) -> list[Any]:
        return self._converted(query, values)

    def rows(self, query: CompiledQuery, values: Mapping[str, Any]) -> list[list[Any]]:
        return self._converted(query, values)

    def _converted(self, query: CompiledQuery, values: Mapping[str, Any]) -> list[Any]:
        try:
            # A copy: read_messages may reorder what it gets.
            return list(self.converted[_key(query, values)])
        except KeyError:
            raise _Unread(query, values) from None
