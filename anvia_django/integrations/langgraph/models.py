"""The tables of LangGraph's checkpoints (:class:`~.saver.DjangoSaver`).

Laid out as LangGraph's own Postgres saver keeps them: a checkpoint row
holds the versions of its channels, not their values; each value is one row
of :class:`LangGraphBlob`, stored once per (thread, namespace, channel,
version), so a thread grows with what changed, not with a full snapshot per
step. Pending writes are rows of :class:`LangGraphWrite`.

Values are LangGraph's serializer's ``(type, bytes)`` pairs; with encryption
at rest on they are sealed (``persistence/codec/``). Metadata is plain JSON
text: ``list(filter=...)`` compares it (``reads.matching``).

Imported by ``anvia_django.models`` (their app); imports no LangGraph.
"""

from __future__ import annotations

from django.db import models

from anvia_django.conf import ID_MAX_LENGTH
from anvia_django.fields import ExactJSONField, IdentifierField

CHECKPOINT_ID_LENGTH = 64
"""Checkpoint ids are UUIDs (36 characters) in LangGraph."""
CHANNEL_LENGTH = 128
"""Channel names of a blob's key: with two 255-character ids and a version,
the key stays within MariaDB's 3,072-byte index limit in utf8mb4."""
TASK_ID_LENGTH = 128


class ThreadRow(models.Model):
    """What every row of a thread's checkpoints starts with: the thread and
    the namespace (``""`` for the graph, a subgraph's otherwise)."""

    thread_id = IdentifierField(max_length=ID_MAX_LENGTH)
    checkpoint_ns = IdentifierField(max_length=ID_MAX_LENGTH, blank=True, default="")

    class Meta:
        abstract = True


class LangGraphCheckpoint(ThreadRow):
    checkpoint_id = IdentifierField(max_length=CHECKPOINT_ID_LENGTH)
    parent_checkpoint_id = IdentifierField(max_length=CHECKPOINT_ID_LENGTH, null=True, blank=True)
    # metadata["run_id"], kept in a column of its own for delete_for_runs.
    run_id = IdentifierField(max_length=ID_MAX_LENGTH, null=True, blank=True)
    # The checkpoint without its channel values, as the serializer typed it.
    type = IdentifierField(max_length=32)
    checkpoint = models.BinaryField()
    # JSON text, as the app keeps every JSON column (exact on every backend).
    metadata = ExactJSONField(default=dict)
    created_at = models.DateTimeField()

    class Meta(ThreadRow.Meta):
        verbose_name = "LangGraph checkpoint"
        constraints = [
            models.UniqueConstraint(
                fields=["thread_id", "checkpoint_ns", "checkpoint_id"],
                name="anvia_lg_checkpoint_uniq",
            ),
        ]
        indexes = [
            models.Index(fields=["run_id"], name="anvia_lg_checkpoint_run_idx"),
            # A list across threads, newest first.
            models.Index(fields=["checkpoint_id"], name="anvia_lg_checkpoint_id_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} · {self.checkpoint_ns or '-'} · {self.checkpoint_id}"


class LangGraphBlob(ThreadRow):
    """One channel's value at one version: what checkpoints share."""

    channel = IdentifierField(max_length=CHANNEL_LENGTH)
    version = IdentifierField(max_length=CHECKPOINT_ID_LENGTH)
    # "empty" (the channel had no value at that version) carries no bytes.
    type = IdentifierField(max_length=32)
    blob = models.BinaryField(null=True)
    # A list stored as the items appended to the value at base_version (same
    # thread, namespace and channel), whose chain starts at the whole value
    # anchor_version, depth rows before this one (``deltas.py``). Both None:
    # the row holds the whole value.
    base_version = IdentifierField(max_length=CHECKPOINT_ID_LENGTH, null=True, blank=True)
    anchor_version = IdentifierField(max_length=CHECKPOINT_ID_LENGTH, null=True, blank=True)
    depth = models.PositiveSmallIntegerField(default=0)
    # The writing process's keyed digest of the chain's bytes (``deltas.Remembered``).
    digest = IdentifierField(max_length=32, null=True, blank=True)

    class Meta(ThreadRow.Meta):
        verbose_name = "LangGraph channel value"
        constraints = [
            models.UniqueConstraint(
                fields=["thread_id", "checkpoint_ns", "channel", "version"],
                name="anvia_lg_blob_uniq",
            ),
        ]
        indexes = [
            # A chain's rows, read together by their anchor.
            models.Index(
                fields=["thread_id", "checkpoint_ns", "channel", "anchor_version"],
                name="anvia_lg_blob_anchor_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} · {self.channel} @ {self.version}"


class LangGraphWrite(ThreadRow):
    """A pending write of a task, against the checkpoint it follows."""

    checkpoint_id = IdentifierField(max_length=CHECKPOINT_ID_LENGTH)
    task_id = IdentifierField(max_length=TASK_ID_LENGTH)
    idx = models.IntegerField()
    task_path = IdentifierField(max_length=ID_MAX_LENGTH, blank=True, default="")
    channel = IdentifierField(max_length=ID_MAX_LENGTH)
    type = IdentifierField(max_length=32)
    blob = models.BinaryField(null=True)

    class Meta(ThreadRow.Meta):
        verbose_name = "LangGraph pending write"
        constraints = [
            models.UniqueConstraint(
                fields=["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="anvia_lg_write_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} · {self.checkpoint_id} · {self.task_id}[{self.idx}]"


NAMESPACE_LENGTH = 500
"""A store namespace's labels joined with dots: with a 255-character key,
the unique key stays within MariaDB's 3,072-byte index limit in utf8mb4."""


class LangGraphStoreItem(models.Model):
    """An item of :class:`~.store.DjangoStore`, LangGraph's long-term memory."""

    namespace = IdentifierField(max_length=NAMESPACE_LENGTH)
    key = IdentifierField(max_length=ID_MAX_LENGTH)
    # The value's JSON, or sealed (encryption at rest).
    value = models.BinaryField()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Minutes an item lives after its last write (or read, when reads refresh).
    ttl_minutes = models.FloatField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "LangGraph store item"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "key"], name="anvia_lg_item_uniq"),
        ]
        indexes = [
            models.Index(fields=["expires_at"], name="anvia_lg_item_expiry_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace} · {self.key}"
