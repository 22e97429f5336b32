"""Writing one framework call's messages as one batch, retried safely.

Framework session APIs have no notion of runs or turns. Each ``add`` call
becomes one append with its own batch id as ``run_id`` (``"<source>-<hex>"``)
and turn 1, which gives the store's retried-append idempotency something
exact to compare against.
"""

from __future__ import annotations

import uuid

from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext, Message
from anvia_django.persistence import append_messages

BATCH_TURN = 1


def new_batch_id(source: str) -> str:
    return f"{source}-{uuid.uuid4().hex}"


def append_batch(
    context: MemoryContext, source: str, messages: list[Message], *, using: str | None
) -> None:
    """Append ``messages`` as one atomic batch with a fresh batch id.

    A connection lost mid-call is retried by the store itself
    (``persistence.reconnect``); the batch id stays the same across that
    retry, so a batch whose first attempt did commit is not written twice.
    """
    append = MemoryAppendInput(
        context=context, run_id=new_batch_id(source), turn=BATCH_TURN, messages=messages
    )
    append_messages(append, using=using)
