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
import collections
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from django.db import connections

from anvia_django.conf import app_settings

from .databases import read_alias, write_alias
from .dialects import one_writer_at_a_time
from .groups import commit_together

R = TypeVar("R")

MOST_CALLS_PER_GROUP = 32
"""Bounds how long one group's transaction holds its locks (see :mod:`.groups`)."""


@dataclass(slots=True)
class _Job:
    future: Future[Any]
    context: contextvars.Context
    call: Callable[[], Any]
    group: str | None
    """The alias of a call that may share a transaction with others queued
    for it (an append: :func:`.groups.commit_together`), else ``None``."""
    aliases: tuple[str, ...]
    """The aliases whose connections the call uses (see :func:`_one_call`)."""


_Inbox = queue.SimpleQueue[_Job | None]


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
    fn: Callable[..., R], /, *args: Any, using: str | None, groupable: bool = False, **kwargs: Any
) -> R:
    """Await ``fn(*args, using=using, **kwargs)``: sync database work on alias ``using``.

    ``groupable``: on a store thread, the call may share one transaction
    with others queued at the same time, each in a savepoint of its own
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
        group=alias if groupable else None,
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


class DatabaseThreadPool:
    """Up to ``size`` threads, started on demand; the most recently idle one
    takes the next call.

    A caller making one call after another keeps getting the same thread
    and connection, even after a burst of concurrent calls started more
    threads: handed out in turn over several threads, its calls ran slower
    (benchmarks/analysis.md, fifth round).
    """

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._lock = threading.Lock()
        self._idle: list[_Inbox] = []
        """The inboxes of idle threads, the most recently idle last."""
        self._backlog: collections.deque[_Job] = collections.deque()
        """Calls waiting for a thread: all ``size`` are busy."""
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(
        self,
        context: contextvars.Context,
        call: Callable[[], R],
        *,
        group: str | None = None,
        aliases: tuple[str, ...] = (),
    ) -> Future[R]:
        future: Future[R] = Future()
        job = _Job(future, context, call, group, aliases)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the store's database threads {self.name!r} are closed")
            if self._idle:
                self._idle.pop().put(job)
            elif len(self._threads) < self.size:
                inbox: _Inbox = queue.SimpleQueue()
                inbox.put(job)
                thread = threading.Thread(
                    target=self._work,
                    args=(inbox,),
                    name=f"anvia-db-{self.name}-{len(self._threads)}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
            else:
                self._backlog.append(job)
        return future

    def close(self, timeout: float | None = 30) -> None:
        """Finish the queued jobs, close each thread's connections, stop the threads."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            # Busy threads stop once the backlog is empty (see _next_job).
            for inbox in self._idle:
                inbox.put(None)
            self._idle.clear()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def _work(self, inbox: _Inbox) -> None:
        try:
            while self._run_next(inbox):
                pass
        finally:
            connections.close_all()

    def _run_next(self, inbox: _Inbox) -> bool:
        """Wait for a job and run it, with the jobs it may share a
        transaction with; False when told to stop.

        Nothing of the jobs outlives this call: a result kept until the next
        job (a loaded transcript, say) would stay in memory while the thread
        idles, and be freed on the next caller's time.
        """
        job = inbox.get()
        if job is None:
            return False
        jobs = [
            each
            for each in [job, *self._joining(job)]
            if each.future.set_running_or_notify_cancel()
        ]
        if not jobs:
            self._next_job(inbox)
            return True
        if len(jobs) == 1:
            only = jobs[0]
            outcomes = [_outcome(only.context, partial(_one_call, only.call, only.aliases))]
        else:
            alias = job.group
            assert alias is not None
            calls = [(each.context, each.call) for each in jobs]
            # Each call runs in its own caller's context (commit_together).
            together = partial(_one_call, partial(commit_together, alias, calls), job.aliases)
            ok, value = _outcome(contextvars.Context(), together)
            outcomes = value if ok else [(False, value)] * len(jobs)
        # Idle before the callers hear back: a caller's next call, submitted
        # as soon as it does, then finds this thread and its connection.
        self._next_job(inbox)
        for each, (ok, value) in zip(jobs, outcomes, strict=True):
            if ok:
                each.future.set_result(value)
            else:
                each.future.set_exception(value)
        return True

    def _joining(self, job: _Job) -> list[_Job]:
        """The queued jobs that may share ``job``'s transaction, taken off the backlog."""
        if job.group is None:
            return []
        with self._lock:
            joining = [each for each in self._backlog if each.group == job.group]
            joining = joining[: MOST_CALLS_PER_GROUP - 1]
            if joining:
                taken = {id(each) for each in joining}
                self._backlog = collections.deque(
                    each for each in self._backlog if id(each) not in taken
                )
        return joining

    def _next_job(self, inbox: _Inbox) -> None:
        """Give this thread a waiting job, else stop it when closed, else mark it idle."""
        with self._lock:
            if self._backlog:
                inbox.put(self._backlog.popleft())
            elif self._closed:
                inbox.put(None)
            else:
                self._idle.append(inbox)


def _outcome(context: contextvars.Context, call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, result)`` or ``(False, exception)`` of ``call()`` in ``context``."""
    try:
        return True, context.run(call)
    except BaseException as exc:
        return False, exc


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
    key = (alias, 1) if one_writer_at_a_time(connections[alias]) else ("", size)
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = DatabaseThreadPool(key[0] or "shared", key[1])
    return pool


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
