"""Database writes that a cancelled caller cannot leave in an unknown state.

``sync_to_async`` runs the ORM in a worker thread. When the awaiting task is
cancelled (a client disconnect, ``asyncio.timeout``), asgiref stops waiting at
once while the thread goes on to commit or roll back: the caller sees
``CancelledError`` without knowing whether its write happened, and a retry may
double it. The SDKs' own sessions wait for the outcome first; so do we.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async

P = ParamSpec("P")
R = TypeVar("R")


async def write_to_completion(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run the sync ``function`` in asgiref's ORM thread and wait for it to
    finish, even if this task is cancelled meanwhile; a cancellation is
    re-raised once the write has committed or rolled back."""
    write = asyncio.ensure_future(sync_to_async(function)(*args, **kwargs))
    cancelled: asyncio.CancelledError | None = None
    while not write.done():
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError as exc:
            if write.cancelled():  # cancelled from inside, not by our caller
                raise
            cancelled = cancelled or exc
        except BaseException:
            break  # the write's own error, raised below
    if cancelled is not None:
        # Mark a failed write's error as seen (the caller asked to stop, so
        # the cancellation is what it gets), or asyncio logs it as unhandled.
        write.exception()
        raise cancelled
    return write.result()
