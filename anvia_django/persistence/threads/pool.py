"""A bounded pool of threads for the store's synchronous database work.

The pool hands out calls; what a call does with Django's connections is
:mod:`.threads`'s business, and how calls queued together run together
(appends sharing a transaction) is :mod:`.groups`'.
"""

from __future__ import annotations

import collections
import contextvars
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from django.db import connections

R = TypeVar("R")

MOST_CALLS_PER_GROUP = 32
"""Bounds how long one group's transaction holds its locks (see :mod:`.groups`)."""

GROUPS_AT_ONCE = 1
"""Groups of one kind (one alias's appends) running at once. While one
runs, later ones wait for it instead of taking another idle thread, so they
gather into the next group: on PostgreSQL with 8 threads, 16 tasks
appending went from 1.85x to 1.04-1.07x the raw driver, 8 writers on one
session from 1.25x to 0.70x (benchmarks/analysis.md). Other calls (loads,
the inspector) still take any idle thread."""

QueuedCall = tuple[contextvars.Context, Callable[[], Any], tuple[Any, ...]]
"""A call of a group: its caller's context, the call alone, its arguments."""
CallResult = tuple[bool, Any]
"""``(True, result)`` or ``(False, exception)``."""
RunAsGroup = Callable[[str, Sequence[QueuedCall]], list[CallResult]]
"""Runs calls queued at the same moment on one alias together; their
outcomes in order, never raising."""


@dataclass(slots=True)
class _Job:
    future: Future[Any]
    context: contextvars.Context
    call: Callable[[], Any]
    group: tuple[str, RunAsGroup] | None
    """For a call that may run together with others queued for it (an
    append): its alias and how such calls run together."""
    args: tuple[Any, ...]
    """The call's arguments, for :data:`RunAsGroup`."""
    aliases: tuple[str, ...]
    """The aliases whose connections the call uses (see :data:`UnitOfWork`)."""


_Inbox = queue.SimpleQueue[_Job | None]

UnitOfWork = Callable[[Callable[[], Any], tuple[str, ...]], Any]
"""``around(call, aliases)`` runs ``call`` as one unit of work on those
aliases' connections, returning what it returns."""


def _just_call(call: Callable[[], Any], aliases: tuple[str, ...]) -> Any:
    return call()


class DatabaseThreadPool:
    """Up to ``size`` threads, started on demand; the most recently idle one
    takes the next call.

    A caller making one call after another keeps getting the same thread
    and connection, even after a burst of concurrent calls started more
    threads: handed out in turn over several threads, its calls ran slower
    (benchmarks/analysis.md, fifth round).
    """

    def __init__(self, name: str, size: int, around: UnitOfWork = _just_call) -> None:
        self.name = name
        self.size = size
        self._around = around
        """Runs each call, or a group's, as one unit of work on its aliases."""
        self._lock = threading.Lock()
        self._idle: list[_Inbox] = []
        """The inboxes of idle threads, the most recently idle last."""
        self._backlog: collections.deque[_Job] = collections.deque()
        """Calls waiting for a thread: all ``size`` are busy, or (a group's)
        :data:`GROUPS_AT_ONCE` of its kind are running."""
        self._running: collections.Counter[tuple[str, RunAsGroup]] = collections.Counter()
        """Groups (or lone calls that could have grouped) running, by kind."""
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(
        self,
        context: contextvars.Context,
        call: Callable[[], R],
        *,
        group: tuple[str, RunAsGroup] | None = None,
        args: tuple[Any, ...] = (),
        aliases: tuple[str, ...] = (),
    ) -> Future[R]:
        future: Future[R] = Future()
        job = _Job(future, context, call, group, args, aliases)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the store's database threads {self.name!r} are closed")
            if not self._may_start(job):
                self._backlog.append(job)
            elif self._idle:
                self._hand(job, self._idle.pop())
            elif len(self._threads) < self.size:
                inbox: _Inbox = queue.SimpleQueue()
                self._hand(job, inbox)
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

    def queued(self) -> int:
        """Calls waiting for a thread (or for a group of their kind to end)."""
        with self._lock:
            return len(self._backlog)

    def _may_start(self, job: _Job) -> bool:
        return job.group is None or self._running[job.group] < GROUPS_AT_ONCE

    def _hand(self, job: _Job, inbox: _Inbox) -> None:
        """Give ``job`` to the thread of ``inbox`` (the lock held)."""
        if job.group is not None:
            self._running[job.group] += 1
        inbox.put(job)

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
            self._next_job(inbox, finished=job)
            return True
        if len(jobs) == 1:
            only = jobs[0]
            outcomes = [_outcome(only.context, partial(self._around, only.call, only.aliases))]
        else:
            assert job.group is not None
            alias, run_together = job.group
            members = [(each.context, each.call, each.args) for each in jobs]
            # Each call runs in its own caller's context (see RunAsGroup).
            together = partial(self._around, partial(run_together, alias, members), job.aliases)
            ok, value = _outcome(contextvars.Context(), together)
            outcomes = value if ok else [(False, value)] * len(jobs)
        # Idle before the callers hear back: a caller's next call, submitted
        # as soon as it does, then finds this thread and its connection.
        self._next_job(inbox, finished=job)
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

    def _next_job(self, inbox: _Inbox, finished: _Job) -> None:
        """After ``finished``: give this thread a waiting job it may start,
        else stop it when closed, else mark it idle; and start the waiting
        jobs that ``finished`` held back on idle threads."""
        with self._lock:
            if finished.group is not None:
                self._running[finished.group] -= 1
            idle = [inbox, *reversed(self._idle)]
            self._idle.clear()
            for job in list(self._backlog):
                if not idle:
                    break
                if self._may_start(job):
                    self._backlog.remove(job)
                    self._hand(job, idle.pop(0))
            if self._closed and not self._backlog:
                for left in idle:
                    left.put(None)
            else:
                self._idle.extend(reversed(idle))  # this thread the most recently idle


def _outcome(context: contextvars.Context, call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, result)`` or ``(False, exception)`` of ``call()`` in ``context``."""
    try:
        return True, context.run(call)
    except BaseException as exc:
        return False, exc
