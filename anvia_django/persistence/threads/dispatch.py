"""Which thread runs the store's synchronous database work for async callers.

asgiref sends every ``sync_to_async(thread_sensitive=True)`` call to the one
sync thread the caller belongs to. Inside an ASGI request (Django gives each
its own ``ThreadSensitiveContext``) and under ``async_to_sync`` from sync
code, that thread holds the caller's connection: a store call there sees the
caller's open ``atomic()`` block and a test's transaction, which a second
connection could not. :func:`run_in_db_thread` keeps exactly that behaviour
whenever such a thread exists.

Anywhere else (``asyncio.run``, arq, a queue consumer, a command driving
agents) asgiref falls back to ONE thread shared by the whole process, so N
tasks queue on one connection. There the store uses a bounded pool of its
own threads instead (``ANVIA_DJANGO["STORE_THREADS"]``), each with its own
connections, so N tasks run up to that many queries at once. A SQLite alias
gets a single thread of its own: SQLite runs one writer at a time anyway,
and queueing in the process beats waking up from the busy timeout's sleeps.

Connections of pool threads live like those of a long-running worker (see
docs/production.md): an unusable one is dropped before the next call, a
positive ``CONN_MAX_AGE`` replaces it when it is older, a psycopg pool
(``OPTIONS["pool"]``) gets it back after every call, and
:func:`close_db_threads` (also run at exit) closes them all.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from django.db import connections

from anvia_django.conf import app_settings
from anvia_django.persistence.databases import read_alias, write_alias
from anvia_django.persistence.dialects import one_writer_at_a_time
from anvia_django.persistence.threads.pool import DatabaseThreadPool, RunAsGroup

R = TypeVar("R")


def has_outer_sync_thread() -> bool:
    """Whether asgiref ties this task to a sync thread other than its shared one.

    Mirrors the order in which ``SyncToAsync`` picks a thread-sensitive
    executor: an enclosing ``async_to_sync`` (its calling thread waits for
    work), a ``ThreadSensitiveContext`` (an ASGI request), or a loop that
    ``async_to_sync`` started. Should asgiref ever drop one of these
    attributes, the answer is "yes", which keeps asgiref's own behaviour.
    """
    try:
        if getattr(AsyncToSync.executors, "current", None) is not None:
            return True
        if SyncToAsync.thread_sensitive_context.get(None) is not None:
            return True
        return asyncio.get_running_loop() in AsyncToSync.loop_thread_executors
    except AttributeError:
        return True


async def run_in_db_thread(
    fn: Callable[..., R],
    /,
    *args: Any,
    using: str | None,
    together: RunAsGroup | None = None,
    **kwargs: Any,
) -> R:
    """Await ``fn(*args, using=using, **kwargs)``: sync database work on alias ``using``.

    ``together``: on a store thread, the call may run with others of the
    same ``fn`` queued at the same moment, as ``together`` runs them
    (:mod:`.groups`); only for calls whose outcome that cannot change.
    """
    size = app_settings.STORE_THREADS
    if size is None or has_outer_sync_thread():
        return await sync_to_async(fn)(*args, using=using, **kwargs)
    alias = write_alias(using)
    # ``using`` as given: a read follows the routers to its own alias.
    future = _pool_for(alias, size).submit(
        contextvars.copy_context(),
        partial(fn, *args, using=using, **kwargs),
        group=None if together is None else (alias, together),
        args=args,
        aliases=_aliases(using, alias),
    )
    waiter = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        if not future.cancel():
            # Already running: let it finish, so that the caller's next store
            # call cannot overtake this one on another thread, however often
            # the caller is cancelled meanwhile. Its outcome is dropped: the
            # caller sees the cancellation.
            while not waiter.done():
                with contextlib.suppress(BaseException):
                    await asyncio.shield(waiter)
        raise


def run_for_sync_caller(fn: Callable[..., R], /, *args: Any, using: str | None, **kwargs: Any) -> R:
    """``fn(*args, using=using, **kwargs)`` for a sync caller: on its own
    thread when that thread is the main one (a script, a command, a
    single-threaded worker) or is inside an ``atomic()`` block on the alias
    (whose transaction the call must see), else on a store thread, waited for.

    A framework's own worker threads (LangGraph runs a sync graph's
    checkpoint writes on a thread pool of its own, new for each run) would
    otherwise each open a connection that nothing closes. A thread running
    an event loop keeps Django's refusal of sync database calls.
    """
    alias = write_alias(using)
    size = app_settings.STORE_THREADS
    if (
        size is None
        or threading.current_thread() is threading.main_thread()
        or connections[alias].in_atomic_block
        or _runs_a_loop()
    ):
        return fn(*args, using=using, **kwargs)
    future = _pool_for(alias, size).submit(
        contextvars.copy_context(),
        partial(fn, *args, using=using, **kwargs),
        args=args,
        aliases=_aliases(using, alias),
    )
    return future.result()


def _runs_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _aliases(using: str | None, alias: str) -> tuple[str, ...]:
    """The aliases a call with ``using`` may touch: the write alias, and
    the read alias the routers give the inspector's reads."""
    read = read_alias(using)
    return (alias,) if read == alias else (alias, read)


def _one_call(call: Callable[[], R], aliases: tuple[str, ...]) -> R:
    """One store call as a unit of work on ``aliases``' connections, like a
    request for Django's connections (its start and its end)."""
    used = [connections[alias] for alias in aliases]
    for conn in used:
        if conn.connection is not None:
            if conn.settings_dict.get("CONN_MAX_AGE") == 0 and not _pooled(conn):
                keep_between_calls(conn)
            conn.close_if_unusable_or_obsolete()
    try:
        return call()
    finally:
        for conn in used:
            if conn.connection is not None and _pooled(conn) and not conn.in_atomic_block:
                conn.close()  # back to the psycopg pool, which bounds connections


def keep_between_calls(conn: Any) -> None:
    """Let ``close_if_unusable_or_obsolete`` keep ``conn`` (``CONN_MAX_AGE = 0``)
    unless it is unusable or its autocommit changed.

    0 means "close at the end of each request". A store thread serves no
    requests: like a management command (and Django's own async ORM calls
    outside requests) it keeps its connection. The one place that sets a
    private attribute of Django's (``close_at``, the deadline
    ``close_if_unusable_or_obsolete`` reads); tests/test_private_apis.py
    fails when Django renames it.
    """
    conn.close_at = None


def _pooled(conn: Any) -> bool:
    return bool(conn.settings_dict.get("OPTIONS", {}).get("pool"))


_pools: dict[tuple[str, int], DatabaseThreadPool] = {}
_pools_lock = threading.Lock()


def _pool_for(alias: str, size: int) -> DatabaseThreadPool:
    key = (alias, 1) if one_writer_at_a_time(alias) else ("", size)
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = DatabaseThreadPool(key[0] or "shared", key[1], _one_call)
    return pool


def queued_calls() -> int:
    """Store calls waiting for a store thread, on every database: how tests
    see appends queue up to form a group."""
    with _pools_lock:
        pools = list(_pools.values())
    return sum(pool.queued() for pool in pools)


def close_db_threads(timeout: float | None = 30) -> None:
    """Stop the store's database threads after their queued calls, closing their connections.

    For a worker's shutdown hook, or before closing a psycopg pool. Later
    store calls start new threads and connections.
    """
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close(timeout)


def _forget_pools_after_fork() -> None:
    # The child has none of the parent's threads; start its own on demand.
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


atexit.register(close_db_threads, 5)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)
