"""Forking a conversation, and reading its lineage both ways.

A fork is a new conversation holding a copy of the source's first N
messages (and the summaries covering only those), made in one transaction
while the source is locked, so no append or rewind can interleave. The new
row records its source and N; the source is never modified.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from anvia_django import signals
from anvia_django.conf import app_settings
from anvia_django.core.memory.branches import (
    ForkLineage,
    Lineage,
    MemoryForkInput,
    check_position_within,
    validate_fork_input,
)
from anvia_django.core.memory.errors import ConversationScopeError, InvalidMemoryInputError
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryContext, MemoryConversationSummary
from anvia_django.models import Conversation, MemoryMessage, MemorySummary
from anvia_django.persistence.codec import Owner, codec_for
from anvia_django.persistence.databases import read_alias, write_alias
from anvia_django.persistence.dialects.json_values import MetadataString
from anvia_django.persistence.inspector.conversations import validate_limit
from anvia_django.persistence.inspector.keyset import RowKey, older_than, page_of
from anvia_django.persistence.inspector.metadata_values import (
    TenantRestriction,
    restrict_to_tenants,
)
from anvia_django.persistence.inspector.rows import SUMMARY_FIELDS, as_utc, summary_from_row
from anvia_django.persistence.notify import send_after_commit
from anvia_django.persistence.reconnect import (
    retry_if_connection_lost,
    retry_read_if_connection_lost,
)
from anvia_django.persistence.scope import check_scope, scope_key
from anvia_django.persistence.transcript.locking import lock_existing_conversation

COPY_BATCH = 500
_SOURCE_FIELDS = (
    "forked_from_id",
    "forked_at_position",
    "forked_from__ref",
    "forked_from__session_id",
    "forked_from__user_id",
)
_COPIED = ("position", "run_id", "turn", "role", "message")


@retry_if_connection_lost(idempotent=False)
def fork_conversation(
    input: MemoryForkInput, *, using: str | None = None, scope: ConversationScope | None = None
) -> MemoryConversationSummary:
    """Create ``input.session_id`` from the first ``input.position`` messages of the source.

    Refused (nothing written): an unknown source, a position past its end,
    a session id already in use (``InvalidMemoryInputError``), another
    user's source, an untrusted caller giving the fork to someone else, or
    metadata that moves the fork to another scope (tenant) than its
    source's without ``input.cross_scope`` (``ConversationScopeError``).
    """
    validate_fork_input(input, app_settings.input_limits)
    source_key = scope_key(input.source, scope)
    alias = write_alias(using)
    with transaction.atomic(using=alias):
        row = lock_existing_conversation(alias, input.source.session_id, source_key)
        if row is None:
            raise InvalidMemoryInputError("has no conversation to fork", path="source.session_id")
        source_id, source_ref, owner = row
        check_scope(owner, input.source.user_id)
        user_id = input.user_id if input.user_id is not None else owner
        if input.source.user_id and user_id != input.source.user_id:
            raise ConversationScopeError(
                "A fork belongs to the user of its source; only trusted server code "
                "may give it to another user. Nothing was written."
            )
        count, metadata = (
            Conversation.objects.using(alias)
            .filter(pk=source_id)
            .values_list("message_count", "metadata")
            .get()
        )
        check_position_within(input.position, count, "position")
        fork_metadata = input.metadata if input.metadata is not None else metadata
        # The fork's own scope: its session and user, and the metadata it
        # keeps (a tenant carries over unless the input names another).
        fork_key = scope_key(MemoryContext(input.session_id, user_id, fork_metadata), scope)
        if not input.cross_scope:
            check_same_scope(input, user_id, fork_key, scope)
        now = timezone.now()
        try:
            # A savepoint: a taken session id fails this insert alone.
            with transaction.atomic(using=alias):
                fork = Conversation.objects.using(alias).create(
                    session_id=input.session_id,
                    scope_key=fork_key,
                    user_id=user_id,
                    metadata=fork_metadata,
                    created_at=now,
                    updated_at=now,
                    message_count=input.position,
                    forked_from_id=source_id,
                    forked_at_position=input.position,
                )
        except IntegrityError:
            raise InvalidMemoryInputError(
                "already names a conversation; a fork needs a new session id", path="session_id"
            ) from None
        fork_owner = (user_id, fork.ref, fork_key)
        _copy_messages(alias, source_id, fork.pk, input.position, now, owner=fork_owner)
        _copy_summaries(alias, source_id, fork.pk, input.position, owner=fork_owner)
        send_after_commit(
            signals.conversation_forked,
            using=alias,
            session_id=fork.session_id,
            ref=fork.ref,
            user_id=user_id,
            source_session_id=input.source.session_id,
            source_ref=source_ref,
            position=input.position,
        )
    return summary_from_row(tuple(getattr(fork, name) for name in SUMMARY_FIELDS))


def check_same_scope(
    input: MemoryForkInput,
    user_id: str | None,
    fork_key: str,
    scope: ConversationScope | None,
) -> None:
    """Refuse a fork whose metadata puts it in another scope than its source.

    The fork's key is compared with the key the same session and user would
    have with the source context's metadata (the metadata that found the
    source): a difference is the metadata's alone, another tenant.
    """
    same = MemoryContext(input.session_id, user_id, input.source.metadata)
    if fork_key == scope_key(same, scope):
        return
    described = (scope if scope is not None else app_settings.scope).describe()
    raise ConversationScopeError(
        "A fork stays in its source's tenant: its metadata gives it another scope "
        f"({described}) than the source's. Pass cross_scope=True to fork into another "
        "tenant. Nothing was written."
    )


def _copy_messages(
    alias: str,
    source_id: int,
    fork_id: int,
    up_to: int,
    now: datetime,
    *,
    owner: Owner,
) -> None:
    """Copy the source's messages before ``up_to`` into the fork (``owner``:
    its user id and ref), each stored as the codec stores a copy (sealed
    again: the associated data binds a ciphertext to its conversation)."""
    codec = codec_for(alias)
    copy = codec.copier(source_id, owner, fork_id)

    # Keyset batches on the (conversation, position) index: memory stays
    # bounded and no batch rescans the rows before it.
    messages = MemoryMessage.objects.using(alias).filter(conversation_id=source_id)
    after = -1
    while after + 1 < up_to:
        rows = list(
            messages.filter(position__gt=after, position__lt=up_to)
            .order_by("position")
            .values_list(*_COPIED)[:COPY_BATCH]
        )
        if not rows:
            break
        # Stamped with the fork's time, like every message of a conversation
        # (made within its lifetime); the source keeps the original times.
        if codec.opens:
            rows = [(*row[:-1], copy(row[0], row[-1])) for row in rows]
        copies = [
            MemoryMessage(
                conversation_id=fork_id, created_at=now, **dict(zip(_COPIED, row, strict=True))
            )
            for row in rows
        ]
        MemoryMessage.objects.using(alias).bulk_create(copies)
        after = rows[-1][0]


def _copy_summaries(alias: str, source_id: int, fork_id: int, up_to: int, *, owner: Owner) -> None:
    """Copy the source's summaries of positions before ``up_to`` into the
    fork (``owner``: its user id, ref and scope key), stored as the codec stores them."""
    summaries = MemorySummary.objects.using(alias).filter(
        conversation_id=source_id, covers_through__lt=up_to
    )
    rows = list(summaries.values_list("covers_through", "message", "created_at"))
    codec = codec_for(alias)
    if codec.opens:
        rows = [
            (k, codec.summary_value(owner, fork_id, k, codec.open_summary(source_id, k, m)), c)
            for k, m, c in rows
        ]
    MemorySummary.objects.using(alias).bulk_create(
        [
            MemorySummary(conversation_id=fork_id, covers_through=k, message=m, created_at=c)
            for k, m, c in rows
        ]
    )


@retry_read_if_connection_lost
def conversation_lineage(
    conversation_id: int,
    *,
    user_id: str | None = None,
    limit: int = 50,
    tenants: TenantRestriction | None = None,
    using: str | None = None,
) -> Lineage:
    """Where the conversation was forked from, and its ``limit`` newest forks.

    With ``user_id``, conversations of other users are left out (a hidden
    source reads like a deleted one), and with ``tenants`` those of other
    tenants. Two queries, whatever the lineage.
    """
    page = lineage_page(conversation_id, user_id=user_id, limit=limit, tenants=tenants, using=using)
    return page.lineage


@dataclass(frozen=True, slots=True)
class LineagePage:
    lineage: Lineage
    next_key: RowKey | None
    """Pass as ``before`` for the next page of forks; ``None`` on the last."""


@retry_read_if_connection_lost
def lineage_page(
    conversation_id: int,
    *,
    user_id: str | None = None,
    limit: int = 50,
    before: RowKey | None = None,
    tenants: TenantRestriction | None = None,
    using: str | None = None,
) -> LineagePage:
    """:func:`conversation_lineage` with the forks paged: the ``limit``
    newest forks older than ``before``. Every page names the source.

    With ``tenants``, conversations of other tenants are left out, as other
    users' are with ``user_id``."""
    validate_limit(limit)
    conversations = Conversation.objects.using(read_alias(using))
    source_query = conversations.filter(pk=conversation_id)
    tenant_field: tuple[str, ...] = ()
    if tenants is not None:
        source_query = source_query.annotate(
            _source_tenant=MetadataString(tenants.path, "forked_from__metadata")
        )
        tenant_field = ("_source_tenant",)
    source: Any = source_query.values_list(*_SOURCE_FIELDS, *tenant_field).first()
    forked_from = None
    if source is not None and source[0] is not None:
        _, position, ref, session_id, owner, *source_tenant = source
        visible = user_id is None or owner == user_id
        if tenants is not None:
            visible = visible and source_tenant[0] in tenants.values
        forked_from = ForkLineage(
            ref if visible else None, session_id if visible else None, position
        )
    forks = conversations.filter(forked_from_id=conversation_id)
    if user_id is not None:
        forks = forks.filter(user_id=user_id)
    forks = restrict_to_tenants(forks, tenants)
    if before is not None:
        forks = forks.filter(older_than("created_at", before.moment, before.id))
    rows = list(
        forks.order_by("-created_at", "-id").values_list(
            "ref", "session_id", "forked_at_position", "created_at", "id"
        )[: limit + 1]
    )
    page = page_of(
        rows,
        limit,
        lambda row: RowKey(as_utc(row[3]), row[4]),
        lambda row: ForkLineage(row[0], row[1], row[2] or 0),
    )
    return LineagePage(Lineage(forked_from, page.items), page.next_key)
