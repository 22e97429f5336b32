"""Group commit: appends queued for a store thread at the same moment run
together, in one transaction.

On SQLite every transaction ends in a sync of the journal and one writer
runs at a time: sixteen tasks appending at once would otherwise wait for
sixteen syncs in turn. Grouped, they wait for one. On PostgreSQL a group is
one statement, the append function called once per append, so sixteen
appends cost one round trip and one commit. Each append still behaves as it
would alone:

- one that fails (another user's session, a database error) fails alone,
  with its own error: on SQLite it rolls back its own savepoint; on
  PostgreSQL the function writes nothing for it, or the statement fails and
  every append of it runs again alone;
- a retried append is recognised and writes nothing, as alone;
- its ``messages_appended`` signal goes out after the group's commit;
- when the group's transaction fails as a whole (its commit, a lost
  connection), every append of it runs again alone, with the usual
  reconnect: appends are idempotent (SPEC invariant 7), so one that did
  reach the database is recognised and not written twice.

Appends of one caller never share a group (a caller waits for each append
before it makes the next), so the order of a session's appends is the
order in which their callers made them, as without grouping.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from django.db import DatabaseError, transaction

from anvia_django.core.memory.types import MemoryAppendInput
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.dialects import (
    AppendRequest,
    Dialect,
    LockedConversation,
    dialect_for,
    groups_appends,
)
from anvia_django.persistence.threads.pool import CallResult, QueuedCall, RunAsGroup
from anvia_django.persistence.transcript import unconfirmed
from anvia_django.persistence.transcript.append import (
    announce_append,
    append_validated,
    validated_append,
)


def group_for(alias: str) -> RunAsGroup | None:
    """How appends queued together on ``alias`` run as a group; ``None``
    where its database runs each alone (see ``dialects.groups_appends``)."""
    return appends_together if groups_appends(alias) else None


def appends_together(alias: str, members: Sequence[QueuedCall]) -> list[CallResult]:
    """Run the ``append_messages`` calls of ``members`` as one group on ``alias``."""
    dialect = dialect_for(alias)
    outcomes, requests = _validated(members)
    if not dialect.appends_in_one_statement(alias, codec_for(alias)):
        _in_one_transaction_without_savepoints(alias, members, requests, outcomes)
    else:
        _in_one_statement(alias, dialect, members, requests, outcomes)
    assert all(outcome is not None for outcome in outcomes)
    return [outcome for outcome in outcomes if outcome is not None]


def _validated(
    members: Sequence[QueuedCall],
) -> tuple[list[CallResult | None], list[tuple[int, AppendRequest]]]:
    """Each member's validated append, with its index; bad input and empty
    appends already have their outcome."""
    outcomes: list[CallResult | None] = [None] * len(members)
    requests: list[tuple[int, AppendRequest]] = []
    for index, (_, _, (input, *scope)) in enumerate(members):
        try:
            request = validated_append(input, *scope)
        except Exception as error:  # bad input: its own error, nothing written
            outcomes[index] = (False, error)
            continue
        if request is None:
            outcomes[index] = (True, None)
        else:
            requests.append((index, request))
    # Conversations locked in one order by every group, by their whole key
    # (one session id may name several conversations, one per scope): two
    # groups never wait on each other.
    requests.sort(key=lambda item: (item[1].session_id, item[1].scope_key))
    return outcomes, requests


def _in_one_statement(
    alias: str,
    dialect: Dialect,
    members: Sequence[QueuedCall],
    requests: list[tuple[int, AppendRequest]],
    outcomes: list[CallResult | None],
) -> None:
    try:
        written = (
            dialect.append_group(alias, [request for _, request in requests]) if requests else []
        )
    except DatabaseError:
        # Written or not: the statement's answer may be what was lost.
        for _, request in requests:
            unconfirmed.remember(alias, request)
        written = [None] * len(requests)  # each alone
    for (index, request), conversation in zip(requests, written, strict=True):
        context, call, (input, *_) = members[index]
        if conversation is None:
            # The function wrote nothing (a retry, another user's session)
            # or the statement failed: alone, the steps say which.
            outcomes[index] = _alone(context, call)
        else:
            outcomes[index] = _signalled(context, alias, input, request, conversation)


def _in_one_transaction_without_savepoints(
    alias: str,
    members: Sequence[QueuedCall],
    requests: list[tuple[int, AppendRequest]],
    outcomes: list[CallResult | None],
) -> None:
    """The appends of ``members`` in one transaction, none in a savepoint of
    its own: the first that fails or finds a retry dooms the transaction,
    and then each runs again alone (which is rare: a retry, another user's
    session). Two statements fewer an append than a savepoint each."""
    committing = False
    try:
        with transaction.atomic(using=alias):
            for index, request in requests:
                context, _, (input, *_) = members[index]
                call = partial(append_validated, alias, input, request, savepoint=False)
                outcome = _alone(context, call)
                if not outcome[0]:
                    raise _GroupFailed
            if transaction.get_rollback(using=alias):
                # A retry found, or a savepoint that could not be rolled back
                # (its connection broke): nothing of it will commit.
                raise _GroupFailed
            committing = True
    except (DatabaseError, _GroupFailed):
        if committing:  # the COMMIT failed: it may have reached the database
            for _, request in requests:
                unconfirmed.remember(alias, request)
        for index, _ in requests:
            context, alone, _ = members[index]
            outcomes[index] = _alone(context, alone)
        return
    for index, _ in requests:
        outcomes[index] = (True, None)


class _GroupFailed(Exception):
    """Ends a group whose transaction can no longer commit; never leaves this module."""


def _alone(context: contextvars.Context, call: Callable[[], Any]) -> CallResult:
    try:
        return True, context.run(call)
    except Exception as exc:
        return False, exc


def _signalled(
    context: contextvars.Context,
    alias: str,
    input: MemoryAppendInput,
    request: AppendRequest,
    conversation: LockedConversation,
) -> CallResult:
    """A committed append's outcome, its signal sent (in its caller's context)."""
    context.run(announce_append, alias, input, request, conversation)
    return True, None
