"""Deleting whole conversations: the one place rows leave the database.

``clear`` (one session), erasure (every session of a user) and retention
pruning all end here, so each deletion removes the same rows and sends the
same ``conversation_cleared`` signal after its commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from anvia_django import signals
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.notify import send_after_commit


@dataclass(frozen=True, slots=True)
class DeletionCounts:
    """How many rows a deletion removed (or, for a dry run, would remove)."""

    conversations: int = 0
    messages: int = 0
    failed_runs: int = 0

    def __add__(self, other: DeletionCounts) -> DeletionCounts:
        return DeletionCounts(
            self.conversations + other.conversations,
            self.messages + other.messages,
            self.failed_runs + other.failed_runs,
        )


@dataclass(frozen=True, slots=True)
class ConversationRow:
    """The columns a deletion needs: the key, and what its signal reports."""

    id: int
    session_id: str
    ref: str
    user_id: str | None


ROW_FIELDS = ("id", "session_id", "ref", "user_id")


def delete_conversations(alias: str, rows: Sequence[ConversationRow]) -> DeletionCounts:
    """Delete ``rows`` with their messages and failed runs.

    Must run inside ``transaction.atomic(using=alias)`` with the rows locked,
    so no append can add a message to a conversation being deleted.
    """
    if not rows:
        return DeletionCounts()
    ids = [row.id for row in rows]
    # Children first, each in one statement: no per-row cascade collection.
    messages, _ = MemoryMessage.objects.using(alias).filter(conversation_id__in=ids).delete()
    failed_runs, _ = FailedRun.objects.using(alias).filter(conversation_id__in=ids).delete()
    conversations, _ = Conversation.objects.using(alias).filter(pk__in=ids).delete()
    # Only the keys of conversations without a user go with them: no scope needed.
    codec_for(alias).forget_deleted([(row.user_id, row.ref, "") for row in rows])
    for row in rows:
        send_after_commit(
            signals.conversation_cleared,
            using=alias,
            session_id=row.session_id,
            ref=row.ref,
            user_id=row.user_id,
        )
    return DeletionCounts(conversations, messages, failed_runs)
