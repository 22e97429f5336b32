"""Conversations, their messages, and failed runs.

Writes go through :mod:`anvia_django.persistence`, never through these
models directly: positions and counts are kept consistent there.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from typing import Any, Self

from django.db import models

from . import fields
from .conf import ID_MAX_LENGTH
from .core.memory.scope import SCOPE_KEY_MAX_LENGTH
from .fields import ExactJSONField, ExactTextField, IdentifierField, SealedJSONField

REF_LENGTH = 22
"""Length of :func:`new_ref` tokens (16 random bytes, URL-safe base64)."""


def new_ref() -> str:
    """An opaque, unguessable conversation reference for developer tools."""
    return secrets.token_urlsafe(16)


class Conversation(models.Model):
    # Unique through Meta.constraints, not unique=True: on PostgreSQL that
    # would add a second (varchar_pattern_ops) index per column for LIKE
    # queries nothing runs, which every insert would have to maintain.
    ref = IdentifierField(max_length=32, default=new_ref, editable=False)
    session_id = IdentifierField(max_length=ID_MAX_LENGTH)
    # What tells conversations with one session id apart (ANVIA_DJANGO["SCOPE"]):
    # by default the user id, "" for none. See anvia_django/core/memory/scope.py.
    # The database default too: a row inserted by SQL that predates scopes
    # (an operator's script) is the unscoped conversation of its session.
    scope_key = IdentifierField(
        max_length=SCOPE_KEY_MAX_LENGTH, default="", db_default="", blank=True
    )
    # NULL, not "", for "no owner": "" would be a user id like any other.
    user_id = IdentifierField(max_length=ID_MAX_LENGTH, null=True, blank=True)
    metadata = ExactJSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Stored rather than counted, so no listing needs a COUNT per row.
    message_count = models.PositiveIntegerField(default=0)
    # Lineage of a fork. No database constraint and DO_NOTHING: deleting a
    # conversation must not cascade into (or rewrite) its forks, which keep
    # their copy of the history; a vanished source reads as "deleted".
    # Indexed by a partial index (Meta), so the many conversations that are
    # not forks cost no index entry on insert.
    forked_from = models.ForeignKey(
        "self",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        blank=True,
        related_name="forks",
    )
    # Not a PositiveBigIntegerField: its CHECK constraint would make adding
    # the column scan the whole table under an exclusive lock. Forks are
    # made by fork_conversation only, which validates the position.
    forked_at_position = models.BigIntegerField(
        null=True, blank=True, help_text="How many of the source's messages the fork copied."
    )

    messages: models.Manager[MemoryMessage]
    failed_runs: models.Manager[FailedRun]
    runs: models.Manager[AgentRun]
    summaries: models.Manager[MemorySummary]
    forks: models.Manager[Conversation]

    class Meta:
        verbose_name = "conversation"
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "scope_key"], name="anvia_conv_scope_uniq"
            ),
            models.UniqueConstraint(fields=["ref"], name="anvia_conv_ref_uniq"),
        ]
        indexes = [
            models.Index(fields=["updated_at", "id"], name="anvia_conv_updated_idx"),
            models.Index(
                fields=["user_id", "updated_at", "id"], name="anvia_conv_user_updated_idx"
            ),
            models.Index(
                fields=["forked_from"],
                name="anvia_conv_forked_from_idx",
                condition=models.Q(forked_from__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return str(self.session_id)


class SealedRowQuerySet(models.QuerySet[Any]):
    """``bulk_create`` tells each new row its database before the insert:
    :class:`SealedJSONField` stores it as that database's codec does (with
    encryption on, sealed with the data key of its conversation there);
    Django records the database only after."""

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        objs = list(objs)
        for obj in objs:
            if obj._state.db is None:
                obj._state.db = self.db
        return super().bulk_create(objs, *args, **kwargs)


class SealedRowMixin(models.Model):
    """``save()`` tells the row its database before the insert, as
    :class:`SealedRowQuerySet` does for ``bulk_create``."""

    objects = SealedRowQuerySet.as_manager()

    class Meta:
        abstract = True

    def save_base(
        self,
        raw: bool = False,
        force_insert: Any = False,
        force_update: bool = False,
        using: str | None = None,
        update_fields: Any = None,
    ) -> None:
        if using is not None:
            self._state.db = using
        super().save_base(raw, force_insert, force_update, using, update_fields)


class MemoryMessage(SealedRowMixin):
    # No index of its own: the (conversation, position) constraint leads with it.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    position = models.PositiveBigIntegerField()
    run_id = IdentifierField(max_length=ID_MAX_LENGTH)
    turn = models.PositiveIntegerField()
    role = IdentifierField(max_length=ID_MAX_LENGTH)
    message = SealedJSONField()
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "message"
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "position"], name="anvia_msg_position_uniq"
            ),
        ]
        indexes = [
            # Finds the tail of one run's turn, for idempotent retried appends.
            models.Index(
                fields=["conversation", "run_id", "turn", "position"], name="anvia_msg_run_turn_idx"
            ),
        ]

    def __str__(self) -> str:
        # The session id when the conversation is loaded (the admin selects
        # it with the message); never a query of its own.
        if MemoryMessage.conversation.is_cached(self):
            where = self.conversation.session_id
        else:
            where = f"conversation {self.conversation_id}"
        return f"{where} · #{self.position} {self.role}"

    @classmethod
    def from_db(
        cls, db: str | None, field_names: Collection[str], values: Collection[Any], **kwargs: Any
    ) -> Self:
        instance = super().from_db(db, field_names, values, **kwargs)
        # Model instances (the admin's record pages) read messages as the
        # store does; a deferred message or place stays as it is.
        loaded = instance.__dict__
        if "message" in loaded and "position" in loaded and "conversation_id" in loaded:
            instance.message = fields.codec_for(db or "default").open_message(
                instance.conversation_id, instance.position, instance.message
            )
        return instance


class FailedRun(models.Model):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="failed_runs"
    )
    run_id = IdentifierField(max_length=ID_MAX_LENGTH)
    error_type = IdentifierField(max_length=ID_MAX_LENGTH)
    error_message = ExactTextField(blank=True)
    traceback = ExactTextField(blank=True)
    messages = ExactJSONField(default=list)
    created_at = models.DateTimeField()

    # Set by from_db when it opened a sealed payload.
    opened_from_sealed = False

    class Meta:
        verbose_name = "failed run"

    def __str__(self) -> str:
        return f"{self.run_id}: {self.error_type}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.opened_from_sealed:
            # Its three payload fields hold the opened record.
            raise ValueError(
                f"failed run {self.pk} was opened from a sealed record: saving it would store "
                "its error and partial messages in plain text. Record failures through the store."
            )
        super().save(*args, **kwargs)

    @classmethod
    def from_db(
        cls, db: str | None, field_names: Collection[str], values: Collection[Any], **kwargs: Any
    ) -> Self:
        instance = super().from_db(db, field_names, values, **kwargs)
        loaded = instance.__dict__
        needed = ("conversation_id", "run_id", "error_message", "traceback", "messages")
        if all(name in loaded for name in needed):
            # The admin's record pages open a sealed payload too.
            codec = fields.codec_for(db or "default")
            opened = codec.open_failed_run(*(loaded[name] for name in needed))
            if opened[2] is not loaded["messages"]:
                instance.error_message, instance.traceback, instance.messages = opened
                instance.opened_from_sealed = True
        return instance


class AgentRun(models.Model):
    """One run of an agent, succeeded or failed, with the usage the model reported."""

    STATUS_CHOICES = [("succeeded", "succeeded"), ("failed", "failed")]

    # No index of its own: the (conversation, run_id) constraint leads with it.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    run_id = IdentifierField(max_length=ID_MAX_LENGTH)
    status = IdentifierField(max_length=16, choices=STATUS_CHOICES)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    model_name = IdentifierField(max_length=ID_MAX_LENGTH, blank=True)
    # NULL: the model did not report this count (not the same as zero).
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    total_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    message_count = models.PositiveIntegerField(default=0)
    # The failed run's error record. DO_NOTHING without a constraint: both
    # rows always leave together (with their conversation), and a foreign
    # key here would make every FailedRun deletion look for runs first.
    failed_run = models.ForeignKey(
        FailedRun,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,  # read through the run, never looked up from the error
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        verbose_name = "run"
        constraints = [
            models.UniqueConstraint(fields=["conversation", "run_id"], name="anvia_run_uniq"),
        ]
        indexes = [
            # Usage reports select runs by start time (and then by user).
            models.Index(fields=["started_at"], name="anvia_run_started_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.status}"


class MemorySummary(SealedRowMixin):
    """A compaction's summary of a conversation's positions 0..``covers_through``.

    The transcript itself is never shortened: ``load`` shows the newest
    summary in place of the messages it covers.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="summaries", db_index=False
    )
    covers_through = models.PositiveBigIntegerField()
    message = SealedJSONField()
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "summary"
        verbose_name_plural = "summaries"
        constraints = [
            # A second worker compacting the same range cannot add a twin.
            models.UniqueConstraint(
                fields=["conversation", "covers_through"], name="anvia_summary_range_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} 0..{self.covers_through}"

    @classmethod
    def from_db(
        cls, db: str | None, field_names: Collection[str], values: Collection[Any], **kwargs: Any
    ) -> Self:
        instance = super().from_db(db, field_names, values, **kwargs)
        loaded = instance.__dict__
        needed = ("conversation_id", "covers_through", "message")
        if all(name in loaded for name in needed):
            codec = fields.codec_for(db or "default")
            instance.message = codec.open_summary(*(loaded[name] for name in needed))
        return instance


class DataKey(models.Model):
    """A data key of encryption at rest (``ANVIA_DJANGO["ENCRYPTION"]``), wrapped
    by a master key: one per user, or per conversation when it has no user.

    An owner's current key is its highest generation. Older generations
    exist only while ``anvia_memory rotate-keys --reencrypt`` moves the
    owner's messages to a new key; it destroys them when nothing is sealed
    under them any more.

    Destroying the row makes every message sealed under it unreadable,
    wherever copies of those rows are. May live on a database of its own
    (``ENCRYPTION["KEY_DATABASE"]``, with a router): see docs/production.md.
    """

    # "user:<user id>" or "conversation:<ref>".
    owner = IdentifierField(max_length=ID_MAX_LENGTH + 16)
    generation = models.PositiveIntegerField(default=1)
    master_key_id = IdentifierField(max_length=64)
    # The master key current when the key was made. Re-wrapping does not
    # change it: a key made under a master key that may have leaked stays
    # exposed whatever wraps it now, and --reencrypt replaces it.
    created_under = IdentifierField(max_length=64)
    # URL-safe base64 of the nonce and the sealed key.
    wrapped_key = IdentifierField(max_length=128)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "data key"
        # Not in the admin; no permission should let anyone browse keys.
        default_permissions = ()
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "generation"], name="anvia_datakey_owner_generation_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"data key {self.pk} ({self.master_key_id}, generation {self.generation})"


# LangGraph's checkpoints and store: their own module, models of this app.
from .integrations.langgraph import models as langgraph_models  # noqa: E402

LangGraphBlob = langgraph_models.LangGraphBlob
LangGraphCheckpoint = langgraph_models.LangGraphCheckpoint
LangGraphStoreItem = langgraph_models.LangGraphStoreItem
LangGraphWrite = langgraph_models.LangGraphWrite


# Google ADK sessions (anvia_django/integrations/adk/). An ADK session is a
# conversation: its events are that conversation's messages, so retention,
# erasure, export, encryption and the inspector apply to them as to any
# transcript. These tables hold what a transcript has no place for: the
# session's state, the state ADK shares per app and per user, and each
# event's timestamp (get_session's after_timestamp reads it by index).


class AdkSession(models.Model):
    """The ADK side of a conversation: its app, its session state, its times."""

    conversation = models.OneToOneField(
        Conversation, on_delete=models.CASCADE, related_name="adk_session"
    )
    # The app name with the tenant values of the scope (ANVIA_DJANGO["SCOPE"]):
    # what app and user state are shared within, and sessions are listed by.
    app_scope = IdentifierField(max_length=SCOPE_KEY_MAX_LENGTH)
    app_name = IdentifierField(max_length=ID_MAX_LENGTH)
    user_id = IdentifierField(max_length=ID_MAX_LENGTH)
    # The session's own keys (no app:, user: or temp: prefix).
    state = ExactJSONField(default=dict)
    created_at = models.DateTimeField()
    # The timestamp of the last event appended (ADK's last_update_time).
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "ADK session"
        indexes = [
            models.Index(
                fields=["app_scope", "updated_at", "id"], name="anvia_adk_app_updated_idx"
            ),
            models.Index(
                fields=["app_scope", "user_id", "updated_at", "id"],
                name="anvia_adk_user_updated_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.app_name} · {self.user_id}"


class AdkEvent(models.Model):
    """When each event of an ADK session happened, by its position there."""

    # No index of its own: the (conversation, position) constraint leads with it.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    position = models.PositiveBigIntegerField()
    event_id = IdentifierField(max_length=ID_MAX_LENGTH)
    timestamp = models.FloatField()

    class Meta:
        verbose_name = "ADK event"
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "position"], name="anvia_adk_event_position_uniq"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "timestamp"], name="anvia_adk_event_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} · #{self.position}"


class AdkAppState(models.Model):
    """The state an ADK app shares across its users (keys under ``app:``)."""

    app_scope = IdentifierField(max_length=SCOPE_KEY_MAX_LENGTH)
    state = ExactJSONField(default=dict)
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "ADK app state"
        constraints = [
            models.UniqueConstraint(fields=["app_scope"], name="anvia_adk_app_state_uniq"),
        ]

    def __str__(self) -> str:
        return str(self.app_scope)


class AdkUserState(models.Model):
    """The state an ADK app keeps per user across sessions (keys under ``user:``)."""

    app_scope = IdentifierField(max_length=SCOPE_KEY_MAX_LENGTH)
    user_id = IdentifierField(max_length=ID_MAX_LENGTH)
    state = ExactJSONField(default=dict)
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name = "ADK user state"
        constraints = [
            models.UniqueConstraint(
                fields=["app_scope", "user_id"], name="anvia_adk_user_state_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.app_scope} · {self.user_id}"
