"""Group commit: appends queued for a store thread at the same moment share
one transaction, each in a savepoint of its own.

On SQLite every transaction ends in a sync of the journal, and only one
writer runs at a time: sixteen tasks appending at once would otherwise wait
for sixteen syncs in turn. Grouped, they wait for one. Each append still
behaves as it would alone:

- it runs its own code (:func:`~.writes.append_messages`) in its own
  savepoint, so one that fails (the scope error, a retry recognised, a
  database error) rolls back alone and its caller gets its own error;
- its signal goes out after the group's commit (``on_commit`` callbacks of a
  rolled-back savepoint are dropped, as they would be alone);
- when the group's transaction itself fails (its commit, a lost
  connection), every append of it runs again alone, as if it had never been
  grouped: appends are idempotent (SPEC invariant 7), so one that did reach
  the database is recognised as a retry and not written twice.

Appends of one caller never share a group (a caller waits for each append
before it makes the next), so the order of a session's appends is the
order in which their callers made them, as without grouping.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DatabaseError, transaction

Call = tuple[contextvars.Context, Callable[[], Any]]
Outcome = tuple[bool, Any]
"""``(True, result)`` or ``(False, exception)``."""


def commit_together(alias: str, calls: Sequence[Call]) -> list[Outcome]:
    """Run ``calls`` in one transaction on ``alias``, each in a savepoint;
    their outcomes in order. Never raises: a failure is an outcome."""
    outcomes: list[Outcome] = []
    try:
        with transaction.atomic(using=alias):
            for context, call in calls:
                outcomes.append(_in_savepoint(alias, context, call))
            if transaction.get_rollback(using=alias):
                # A savepoint that could not be rolled back (its connection
                # broke) dooms the transaction: nothing of it will commit.
                raise _GroupFailed
    except (DatabaseError, _GroupFailed):
        return [_alone(context, call) for context, call in calls]
    return outcomes


class _GroupFailed(Exception):
    """Ends a group whose transaction can no longer commit; never leaves this module."""


def _in_savepoint(alias: str, context: contextvars.Context, call: Callable[[], Any]) -> Outcome:
    def run() -> Any:
        with transaction.atomic(using=alias):
            return call()

    return _alone(context, run)


def _alone(context: contextvars.Context, call: Callable[[], Any]) -> Outcome:
    try:
        return True, context.run(call)
    except Exception as exc:
        return False, exc
