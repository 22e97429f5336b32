"""Database writes that a cancelled caller cannot leave in an unknown state.

Store calls run the ORM in a worker thread
(:func:`~anvia_django.persistence.threads.dispatch.run_in_db_thread`).
When the awaiting task is cancelled (a client disconnect, ``asyncio.timeout``),
the awaiting stops at once while the thread goes on to commit or roll back: the caller sees
``CancelledError`` without knowing whether its write happened, and a retry may
double it. The SDKs' own sessions wait for the outcome first; so do we.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from anvia_django.persistence.threads.dispatch import run_in_db_thread

R = TypeVar("R")


async def write_to_completion(
    function: Callable[..., R], *args: Any, using: str | None, **kwargs: Any
) -> R:
    """Run the sync ``function(*args, using=using, **kwargs)`` in a database
    thread and wait for it to finish, even if this task is cancelled meanwhile;
    a cancellation is re-raised once the write has committed or rolled back."""
    return await to_completion(run_in_db_thread(function, *args, using=using, **kwargs))


async def to_completion(write: Awaitable[R]) -> R:
    """Await ``write`` (a store call) to its end, even if this task is
    cancelled meanwhile; a cancellation is re-raised once it has ended."""
    task = asyncio.ensure_future(write)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.cancelled():  # cancelled from inside, not by our caller
                raise
            cancelled = cancelled or exc
        except BaseException:
            break  # the write's own error, raised below
    if cancelled is not None:
        # Mark a failed write's error as seen (the caller asked to stop, so
        # the cancellation is what it gets), or asyncio logs it as unhandled.
        task.exception()
        raise cancelled
    return task.result()
