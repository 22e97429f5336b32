"""Sync reads that also work when called from inside async code.

Django refuses ORM calls from a thread running an event loop
(``SynchronousOnlyOperation``): an async view, a Jupyter cell, a LangChain
callback. :func:`read_off_the_loop` runs such a call in a fresh thread
instead and blocks until it returns, as the caller of a sync API expects.

Only reads go this way. They cannot deadlock: the fresh thread needs nothing
from the blocked loop, and a read takes no lock a transaction elsewhere could
hold (plain ``SELECT``s; on SQLite at worst it waits out the busy timeout and
raises). A write could wait forever on a row lock held by a sync caller that
is itself waiting for this loop (``async_to_sync`` inside ``atomic()``), so
sync writes keep Django's refusal and async code uses the ``a`` methods.

The fresh thread has its own database connection: it sees committed data
only, and closes that connection before it ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def in_event_loop_thread() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def read_off_the_loop(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)``, in a fresh thread if this one runs an event loop."""
    if not in_event_loop_thread():
        return function(*args, **kwargs)
    outcome: list[R] = []
    failure: list[BaseException] = []
    context = contextvars.copy_context()

    def read() -> None:
        try:
            outcome.append(context.run(function, *args, **kwargs))
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)
        finally:
            connections.close_all()  # this thread's connections only

    worker = threading.Thread(target=read, name="anvia-sync-read", daemon=True)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]
