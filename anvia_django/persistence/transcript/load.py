"""Loading a session's transcript for the agent runtime."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

from django.db.models import Field, Subquery, TextField
from django.db.models.functions import Cast

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryContext, Message
from anvia_django.core.memory.validation import validate_context
from anvia_django.core.memory.window import window_start
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence.codec import Codec, codec_for
from anvia_django.persistence.compiled import CompiledQuery, Slot, compile_once
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.scope import check_scope, lookup


@retry_if_connection_lost
def load_messages(
    context: MemoryContext,
    *,
    using: str | None = None,
    limit: int | None = None,
    scope: ConversationScope | None = None,
) -> list[Message]:
    """The session's messages in position order; the newest run-aligned
    window of at most ``limit`` messages when ``limit`` is given.

    Reads from the write database: an agent must see its own last turn,
    which a lagging replica might not have yet.
    """
    validate_context(context, app_settings.input_limits)
    values = _values(context, scope)
    alias = write_alias(using)
    codec = codec_for(alias)
    if codec.opens:
        return _load_opened(codec, context, alias, values, limit, latest=False)
    # One query when the context is trusted or the session has messages its
    # user may read; a second one only when a user-scoped read found nothing,
    # to tell an empty or unknown session from another user's.
    if limit is None:
        messages = _messages_query(alias, _scoped(context), None).column(alias, values)
        if not messages:
            _check_owner(context, alias, values)
        return messages
    # One more than the window, so the run boundary before it is visible.
    query = _messages_query(alias, _scoped(context), limit + 1, with_runs=True)
    rows = query.rows(alias, values)
    if not rows:
        _check_owner(context, alias, values)
        return []
    rows.reverse()
    start = window_start([run_id for run_id, _ in rows], limit)
    return [message for _, message in rows[start:]]


@retry_if_connection_lost
def load_latest_messages(
    context: MemoryContext,
    count: int,
    *,
    using: str | None = None,
    scope: ConversationScope | None = None,
) -> list[Message]:
    """The session's newest ``count`` messages in position order, cut exactly
    at ``count`` (not aligned to runs): what framework sessions mean by a
    history limit. ``count`` 0 gives an empty list (after the scope check).
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidMemoryInputError("must be a non-negative integer", path="limit")
    validate_context(context, app_settings.input_limits)
    values = _values(context, scope)
    alias = write_alias(using)
    if not count:
        _check_owner(context, alias, values)
        return []
    codec = codec_for(alias)
    if codec.opens:
        return _load_opened(codec, context, alias, values, count, latest=True)
    messages = _messages_query(alias, _scoped(context), count).column(alias, values)
    if not messages:
        _check_owner(context, alias, values)
    messages.reverse()
    return messages


def _load_opened(
    codec: Codec,
    context: MemoryContext,
    alias: str,
    values: dict[str, Any],
    limit: int | None,
    *,
    latest: bool,
) -> list[Message]:
    """``load_messages`` (``latest``: ``load_latest_messages``) where the
    codec opens what is stored: each row's place read with it."""
    newest = None if limit is None else (limit if latest else limit + 1)
    query = _messages_query(alias, _scoped(context), newest, with_runs=True, located=True)
    rows = query.rows(alias, values)
    if not rows:
        _check_owner(context, alias, values)
        return []
    if newest is not None:
        rows.reverse()
    if limit is not None and not latest:
        rows = rows[window_start([row[2] for row in rows], limit) :]
    return codec.open_texts((cid, position, text) for cid, position, _, text in rows)


def _scoped(context: MemoryContext) -> bool:
    """Whether the context's user must own the session (else it is trusted)."""
    return bool(context.user_id)


def _values(context: MemoryContext, scope: ConversationScope | None) -> dict[str, Any]:
    return {**lookup(context, scope), "user_id": context.user_id}


@lru_cache(maxsize=64)
def _messages_query(
    alias: str,
    scoped: bool,
    newest: int | None,
    *,
    with_runs: bool = False,
    located: bool = False,
) -> CompiledQuery:
    """The message column (``run_id`` and message with ``with_runs``) in
    position order, or the ``newest`` rows newest first."""
    conversation = Conversation._meta
    session = _session_slots()
    if scoped:
        # The owner condition is part of the query, so another user's
        # messages never leave the database.
        session["user_id"] = Slot("user_id", conversation.get_field("user_id"))
    # The conversation's id as a scalar subquery (the pair is unique), not
    # a join: given ``conversation_id = (subquery)`` PostgreSQL reads the
    # messages in order from the (conversation, position) index and plans in
    # half the time, where over a join it sorted the whole session, even to
    # keep the newest few of a window (benchmarks/analysis.md).
    # Sliced: the pair is unique, and Django 6.1 refuses an unsliced
    # queryset as the value of an exact lookup.
    owner = Subquery(Conversation.objects.filter(**session).values("pk")[:1])
    messages = MemoryMessage.objects.filter(conversation=owner)
    columns: tuple[str, ...] = ("run_id", "message") if with_runs else ("message",)
    if located:
        # Where each row is (what the codec opens it by), and the column's
        # text as stored: an envelope is opened, not JSON-decoded.
        messages = messages.annotate(text=Cast("message", output_field=TextField()))
        columns = ("conversation_id", "position", "run_id", "text")
    ordered = messages.order_by("position" if newest is None else "-position")
    return compile_once(ordered.values_list(*columns)[:newest], alias)


def _check_owner(context: MemoryContext, alias: str, values: dict[str, Any]) -> None:
    """Raise ``ConversationScopeError`` when the session exists and belongs
    to another user; needed only after a user-scoped read found nothing."""
    if not context.user_id:
        return
    for owner in _owner_query(alias).column(alias, values):
        check_scope(owner, context.user_id)


@lru_cache(maxsize=16)
def _owner_query(alias: str) -> CompiledQuery:
    owners = Conversation.objects.filter(**_session_slots()).values_list("user_id")
    return compile_once(owners, alias)


def _session_slots() -> dict[str, Slot]:
    """The conversation's unique key, filled in at call time."""
    return {
        name: Slot(name, cast("Field[Any, Any]", Conversation._meta.get_field(name)))
        for name in ("session_id", "scope_key")
    }
