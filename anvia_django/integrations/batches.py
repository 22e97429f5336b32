"""Writing one framework call's messages as one batch, retried safely.

Framework session APIs have no notion of runs or turns. Each ``add`` call
becomes one append with its own batch id as ``run_id`` (``"<source>-<hex>"``)
and turn 1, which gives the store's retried-append idempotency something
exact to compare against.
"""

from __future__ import annotations

import uuid

from django.db import InterfaceError, OperationalError, connections

from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext, Message
from anvia_django.persistence import append_messages
from anvia_django.persistence.databases import write_alias

BATCH_TURN = 1


def new_batch_id(source: str) -> str:
    return f"{source}-{uuid.uuid4().hex}"


def append_batch(
    context: MemoryContext, source: str, messages: list[Message], *, using: str | None
) -> None:
    """Append ``messages`` atomically, retrying once after a connection failure.

    A connection can break after the database committed but before it said
    so. The retry carries the same batch id, so if the first attempt did
    commit, the store recognises the retry and writes nothing; if it did not,
    the retry writes the batch once. Inside a caller's ``atomic`` block no
    retry is attempted: that transaction is already lost.
    """
    append = MemoryAppendInput(
        context=context, run_id=new_batch_id(source), turn=BATCH_TURN, messages=messages
    )
    try:
        append_messages(append, using=using)
    except (OperationalError, InterfaceError):
        connection = connections[write_alias(using)]
        if connection.in_atomic_block:
            raise
        connection.close_if_unusable_or_obsolete()
        append_messages(append, using=using)
