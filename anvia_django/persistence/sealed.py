"""Appends with encryption at rest on (``ANVIA_DJANGO["ENCRYPTION"]``).

Always the append in steps, inside the caller's ``transaction.atomic``:

1. lock (or create) the conversation and reserve the positions, as every
   dialect does; check the scope;
2. fetch the data key of the conversation's owner (its user, else the
   conversation), creating it on first use. A key that does not unwrap
   raises here, naming its id: the transaction rolls back, nothing written;
3. the retried-append check (SPEC invariant 7): the newest messages stored
   for the run and turn, opened, compared as text with the new ones. The
   database cannot compare ciphertexts (each has a random nonce), so
   PostgreSQL's one-statement append function is not used;
4. seal each message, with its conversation id and position (known under
   the lock) as associated data, and insert the envelopes.
"""

from __future__ import annotations

from django.db.models import TextField
from django.db.models.functions import Cast

from anvia_django.encryption.keys import (
    data_key_for,
    open_column_text,
    owner_of,
    seal_messages,
)
from anvia_django.models import MemoryMessage

from .dialects import AppendRequest, LockedConversation, NewMessages, dialect_for
from .scope import check_scope


def append_sealed_under_lock(alias: str, append: AppendRequest) -> LockedConversation | None:
    """The append in steps with sealed messages; ``None``: a retry (the
    caller rolls back the reservation)."""
    dialect = dialect_for(alias)
    count = len(append.encoded)
    conversation = dialect.lock_conversation(
        alias,
        session_id=append.session_id,
        scope_key=append.scope_key,
        user_id=append.user_id,
        metadata=append.metadata,
        now=append.now,
        reserve=count,
    )
    check_scope(conversation.user_id, append.user_id)
    key_id, cipher = data_key_for(alias, owner_of(conversation.user_id, conversation.ref))
    if conversation.could_hold(count) and _stored_tail(alias, conversation.id, append) == list(
        append.encoded
    ):
        return None
    sealed = seal_messages(
        cipher, key_id, conversation.id, conversation.first_position, append.encoded
    )
    rows = NewMessages(
        conversation.id,
        conversation.first_position,
        append.run_id,
        append.turn,
        append.roles,
        sealed,
        conversation.updated_at,
    )
    dialect.insert_messages(alias, rows, unless_retry_of=None)
    return conversation


def _stored_tail(alias: str, conversation_id: int, append: AppendRequest) -> list[str]:
    """The JSON text of the newest messages stored for the append's run and
    turn (as many as it has), in position order, opened."""
    stored = list(
        MemoryMessage.objects.using(alias)
        .filter(conversation_id=conversation_id, run_id=append.run_id, turn=append.turn)
        .annotate(text=Cast("message", output_field=TextField()))
        .order_by("-position")
        .values_list("position", "text")[: len(append.encoded)]
    )
    stored.reverse()
    return [open_column_text(alias, conversation_id, position, text) for position, text in stored]
