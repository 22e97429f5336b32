"""Operator queries: finding a conversation, erasure, retention and export.

Everything here works in bounded batches, so a table of any size never has
to fit in memory: deletions take the oldest (or lowest) ``batch_size``
conversations per transaction, export walks keyset pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, transaction
from django.db.models import Count, Q, QuerySet, Sum

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import MemoryConversationMessage, MemoryConversationSummary
from anvia_django.models import (
    AdkEvent,
    AdkSession,
    AdkUserState,
    AgentRun,
    Conversation,
    FailedRun,
    MemoryMessage,
    MemorySummary,
)
from anvia_django.persistence.adk.state import (
    SessionStates,
    erase_user_state,
    states_of_sessions,
)
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import read_alias, write_alias
from anvia_django.persistence.dialects import vendor_dialect
from anvia_django.persistence.dialects.json_values import MetadataString
from anvia_django.persistence.inspector.conversations import find_conversation
from anvia_django.persistence.inspector.metadata_values import (
    filter_by_metadata,
    validate_metadata_filter,
)
from anvia_django.persistence.inspector.rows import (
    MESSAGE_FIELDS,
    SUMMARY_FIELDS,
    message_from_row,
    summary_from_row,
)
from anvia_django.persistence.reconnect import retry_read_if_connection_lost
from anvia_django.persistence.transcript.deletion import (
    ROW_FIELDS,
    ConversationRow,
    DeletionCounts,
    delete_conversations,
)

DEFAULT_BATCH_SIZE = 500

BatchCallback = Callable[[DeletionCounts], None]


@dataclass(frozen=True, slots=True)
class ConversationFilter:
    """Which conversations an operation covers; all fields unset means all.

    ``metadata``: dotted paths and the string each must hold in the
    conversation's metadata (``{"tenant_id": "acme"}``), as the inspector's
    tenant filters match them.
    """

    ref: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    updated_before: datetime | None = None
    metadata: Mapping[str, str] | None = None

    def apply(self, conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
        if self.metadata:
            conversations = filter_by_metadata(
                conversations, validate_metadata_filter(self.metadata)
            )
        if self.ref is not None:
            conversations = conversations.filter(ref=self.ref)
        if self.session_id is not None:
            conversations = conversations.filter(session_id=self.session_id)
        if self.user_id is not None:
            conversations = conversations.filter(user_id=self.user_id)
        if self.updated_before is not None:
            conversations = conversations.filter(updated_at__lt=self.updated_before)
        return conversations


@dataclass(frozen=True, slots=True)
class ExportedMessage:
    """One message of an export, with the conversation it belongs to."""

    ref: str
    session_id: str
    message: MemoryConversationMessage


@dataclass(frozen=True, slots=True)
class ExportedAdkState:
    """An ADK session's state in an export, right after its conversation:
    its own, its user's in its app and its app's (:class:`SessionStates`)."""

    ref: str
    session_id: str
    states: SessionStates


ExportRecord = MemoryConversationSummary | ExportedAdkState | ExportedMessage


AMBIGUOUS_REFS_SHOWN = 5


@retry_read_if_connection_lost
def resolve_conversation(
    session_id_or_ref: str,
    *,
    metadata: Mapping[str, str] | None = None,
    using: str | None = None,
) -> MemoryConversationSummary | None:
    """The conversation with this session id or, failing that, with this ref.

    The session id wins: it is what an operator usually has at hand, and a
    ref, being random, is never chosen to look like someone's session id.
    A session id that several scopes share (two users, two tenants) names
    no single conversation: ``InvalidMemoryInputError`` lists their refs.
    ``metadata`` (``{"tenant_id": "acme"}``) narrows both to the
    conversations whose metadata holds those strings.
    """
    metadata = validate_metadata_filter(metadata)
    conversations = filter_by_metadata(Conversation.objects.using(read_alias(using)), metadata)
    rows = list(
        conversations.filter(session_id=session_id_or_ref)
        .order_by("pk")
        .values_list(*SUMMARY_FIELDS)[:AMBIGUOUS_REFS_SHOWN]
    )
    if len(rows) > 1:
        shared = [summary_from_row(row) for row in rows]
        refs = ", ".join(f"{s.ref} (user {s.user_id!r})" for s in shared)
        raise InvalidMemoryInputError(
            f"{session_id_or_ref!r} is the session id of several conversations, one per "
            f"scope: {refs}; give the ref of one",
            path="session",
        )
    if rows:
        return summary_from_row(rows[0])
    found = find_conversation(session_id_or_ref, using=using)
    if found is None or (metadata and not conversations.filter(pk=found.id).exists()):
        return None
    return found.summary


TenantValues = tuple[str | None, ...]
"""A conversation's strings at each of some metadata paths (``None``: no string there)."""


@retry_read_if_connection_lost
def tenants_of(
    selection: ConversationFilter,
    paths: Sequence[str],
    *,
    limit: int = AMBIGUOUS_REFS_SHOWN,
    using: str | None = None,
) -> list[TenantValues]:
    """The distinct values at ``paths`` (the scope's metadata keys) among the
    conversations ``selection`` covers, at most ``limit`` of them, sorted.

    One query; it reads the selected rows' metadata until it has found
    ``limit`` distinct values (all of them when there are fewer).
    """
    if not paths:
        return []
    conversations = selection.apply(Conversation.objects.using(read_alias(using)))
    columns = {f"_tenant_{index}": MetadataString(path) for index, path in enumerate(paths)}
    rows = conversations.annotate(**columns).order_by().values_list(*columns).distinct()[:limit]
    found = [tuple(row) for row in rows]
    return sorted(found, key=lambda values: [(value is not None, value or "") for value in values])


@retry_read_if_connection_lost
def count_conversations(
    selection: ConversationFilter, *, using: str | None = None
) -> DeletionCounts:
    """What deleting ``selection`` would remove, without removing it.

    Message totals come from the stored counts: one aggregate, no row scan
    of the message table.
    """
    alias = read_alias(using)
    conversations = selection.apply(Conversation.objects.using(alias))
    totals = conversations.aggregate(count=Count("id"), messages=Sum("message_count"))
    failed_runs = FailedRun.objects.using(alias).filter(conversation__in=conversations).count()
    return DeletionCounts(totals["count"], totals["messages"] or 0, failed_runs)


def delete_matching_conversations(
    selection: ConversationFilter,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    using: str | None = None,
    on_batch: BatchCallback | None = None,
) -> DeletionCounts:
    """Delete every conversation ``selection`` covers, ``batch_size`` per transaction.

    Each batch is atomic: it locks its conversations (so a concurrent append
    waits, and a conversation updated meanwhile no longer matches a retention
    cutoff), deletes them with their messages and failed runs, and commits.
    A failure stops at a batch boundary; running the call again finishes.
    """
    _check_batch_size(batch_size)
    alias = write_alias(using)
    total = DeletionCounts()
    while True:
        with transaction.atomic(using=alias):
            values = (
                selection.apply(Conversation.objects.using(alias))
                .select_for_update()
                .order_by("updated_at", "id")
                .values_list(*ROW_FIELDS)[:batch_size]
            )
            rows = [ConversationRow(*row) for row in values]
            counts = delete_conversations(alias, rows)
        if not rows:
            return total
        total += counts
        if on_batch is not None:
            on_batch(counts)


def erase_user_conversations(
    user_id: str,
    *,
    metadata: Mapping[str, str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    using: str | None = None,
) -> DeletionCounts:
    """Delete every conversation of ``user_id`` (with ``metadata``, only
    those whose metadata holds these strings: one tenant's) in one
    transaction: an erasure request is carried out whole or, on any
    failure, not at all."""
    alias = write_alias(using)
    selection = ConversationFilter(user_id=user_id, metadata=metadata)
    with transaction.atomic(using=alias):
        counts = delete_matching_conversations(selection, batch_size=batch_size, using=alias)
        # ADK sessions went with their conversations; the user's ADK state too.
        erase_user_state(alias, user_id, metadata)
        return counts


def scope_keys_of(selection: ConversationFilter, *, using: str | None = None) -> list[str]:
    """The scope keys of the conversations ``selection`` covers (one
    tenant's of a user: what chooses their data keys)."""
    alias = write_alias(using)
    conversations = selection.apply(Conversation.objects.using(alias))
    return sorted(set(conversations.values_list("scope_key", flat=True)))


ERASED_TABLES = (
    MemoryMessage,
    FailedRun,
    MemorySummary,
    AgentRun,
    AdkEvent,
    AdkSession,
    AdkUserState,
    Conversation,
)
"""The tables an erasure deletes rows from."""


def compact_after_erase(using: str | None = None) -> list[str]:
    """After :func:`erase_user_conversations` (committed): reclaim what the
    deleted rows left in the live database where it can be done now (see
    ``Dialect.compact``); the statements left to run by hand."""
    alias = write_alias(using)
    return vendor_dialect(connections[alias]).compact(alias, ERASED_TABLES)


def iter_export_records(
    selection: ConversationFilter,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    using: str | None = None,
) -> Iterator[ExportRecord]:
    """Each conversation's summary, followed (for an ADK session) by its
    state and by its messages in position order.

    Conversations come in creation order. Both tables are read in keyset
    pages of ``batch_size`` rows, so memory stays bounded by the page size
    and the query count by rows / ``batch_size``. Pages are separate reads:
    a conversation changed during a long export shows the state its page saw.
    """
    _check_batch_size(batch_size)
    alias = read_alias(using)
    conversations = selection.apply(Conversation.objects.using(alias)).order_by("id")
    last_id = 0
    while True:
        page = list(
            conversations.filter(id__gt=last_id).values_list(
                "id", "adk_session__id", *SUMMARY_FIELDS
            )[:batch_size]
        )
        if not page:
            return
        last_id = page[-1][0]
        adk = [row[0] for row in page if row[1] is not None]
        states = states_of_sessions(alias, adk) if adk else {}
        messages = _message_pages(alias, [row[0] for row in page], batch_size)
        pending = next(messages, None)
        for conversation_id, _, *summary_fields in page:
            summary = summary_from_row(tuple(summary_fields))
            yield summary
            if conversation_id in states:
                yield ExportedAdkState(summary.ref, summary.session_id, states[conversation_id])
            while pending is not None and pending[0] == conversation_id:
                message = message_from_row(pending[1:])
                yield ExportedMessage(summary.ref, summary.session_id, message)
                pending = next(messages, None)


def _message_pages(
    alias: str, conversation_ids: list[int], batch_size: int
) -> Iterator[tuple[Any, ...]]:
    """The messages of ``conversation_ids`` by (conversation, position), paged."""
    messages = (
        MemoryMessage.objects.using(alias)
        .filter(conversation_id__in=conversation_ids)
        .order_by("conversation_id", "position")
    )
    codec = codec_for(alias)
    after: Q | None = None
    while True:
        page = messages.filter(after) if after is not None else messages
        rows = list(page.values_list("conversation_id", *MESSAGE_FIELDS)[:batch_size])
        yield from ((*row[:-1], codec.open_message(row[0], row[1], row[-1])) for row in rows)
        if len(rows) < batch_size:
            return
        conversation_id, position = rows[-1][0], rows[-1][1]
        after = Q(conversation_id__gt=conversation_id) | Q(
            conversation_id=conversation_id, position__gt=position
        )


def _check_batch_size(batch_size: object) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidMemoryInputError("must be a positive integer", path="batch_size")
