"""A write that is one statement, where a transaction costs round trips."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction


@contextmanager
def one_statement(using: str) -> Iterator[None]:
    """A block running one statement: in autocommit, nothing around it (a
    statement is a transaction of its own; BEGIN and COMMIT would each cost
    a round trip); inside a caller's transaction, a savepoint, so that its
    failure, or a ``refuse()`` (``transaction.set_rollback``), leaves the
    caller's transaction as it was, locks included."""
    if connections[using].in_atomic_block:
        with transaction.atomic(using=using):
            yield
    else:
        yield


def refuse(using: str) -> None:
    """Inside :func:`one_statement`: what the statement did is undone (its
    locks released) when the block ends. In autocommit it wrote nothing
    and its locks went with it: nothing to do."""
    if connections[using].in_atomic_block:
        transaction.set_rollback(True, using=using)
