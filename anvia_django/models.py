"""Conversations, their messages, and failed runs.

Writes go through :mod:`anvia_django.persistence`, never through these
models directly: positions and counts are kept consistent there.
"""

from __future__ import annotations

import secrets

from django.db import models

from .conf import ID_MAX_LENGTH
from .fields import ExactJSONField, ExactTextField, IdentifierField

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
    # NULL, not "", for "no owner": "" would be a user id like any other.
    user_id = IdentifierField(max_length=ID_MAX_LENGTH, null=True, blank=True)
    metadata = ExactJSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Stored rather than counted, so no listing needs a COUNT per row.
    message_count = models.PositiveIntegerField(default=0)

    messages: models.Manager[MemoryMessage]
    failed_runs: models.Manager[FailedRun]

    class Meta:
        verbose_name = "conversation"
        constraints = [
            models.UniqueConstraint(fields=["session_id"], name="anvia_conv_session_uniq"),
            models.UniqueConstraint(fields=["ref"], name="anvia_conv_ref_uniq"),
        ]
        indexes = [
            models.Index(fields=["updated_at", "id"], name="anvia_conv_updated_idx"),
            models.Index(
                fields=["user_id", "updated_at", "id"], name="anvia_conv_user_updated_idx"
            ),
        ]

    def __str__(self) -> str:
        return str(self.session_id)


class MemoryMessage(models.Model):
    # No index of its own: the (conversation, position) constraint leads with it.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    position = models.PositiveBigIntegerField()
    run_id = IdentifierField(max_length=ID_MAX_LENGTH)
    turn = models.PositiveIntegerField()
    role = IdentifierField(max_length=ID_MAX_LENGTH)
    message = ExactJSONField()
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
        return f"{self.conversation_id}#{self.position} {self.role}"


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

    class Meta:
        verbose_name = "failed run"

    def __str__(self) -> str:
        return f"{self.run_id}: {self.error_type}"
