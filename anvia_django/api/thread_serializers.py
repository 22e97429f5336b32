"""The wire shape of LangGraph's threads (``api/langgraph.py``), camelCase
like the conversations'; they read the dataclasses of
``integrations/langgraph/threads.py`` and ``decoding.py``."""

from __future__ import annotations

from rest_framework import serializers

from .serializers import MessageField, UtcDateTimeField


class LangGraphThreadSerializer(serializers.Serializer[object]):
    threadId = serializers.CharField(source="thread_id", read_only=True)
    latestCheckpointId = serializers.CharField(source="latest_checkpoint_id", read_only=True)
    checkpointCount = serializers.IntegerField(
        source="checkpoint_count", read_only=True, min_value=1
    )
    updatedAt = UtcDateTimeField(
        source="updated_at", help_text="When its newest checkpoint was written."
    )


class LangGraphCheckpointSummarySerializer(serializers.Serializer[object]):
    checkpointNs = serializers.CharField(
        source="checkpoint_ns",
        read_only=True,
        help_text='"" for the graph, a subgraph\'s otherwise.',
    )
    checkpointId = serializers.CharField(source="checkpoint_id", read_only=True)
    parentCheckpointId = serializers.CharField(
        source="parent_checkpoint_id", read_only=True, allow_null=True
    )
    runId = serializers.CharField(source="run_id", read_only=True, allow_null=True)
    # A field named "source" (the declared fields leave the class; the
    # stubs see Field.source, the attribute path, which it does not replace).
    source = serializers.CharField(  # type: ignore[assignment]
        read_only=True, allow_null=True, help_text='metadata["source"]: input, loop, update, fork.'
    )
    step = serializers.IntegerField(read_only=True, allow_null=True)
    createdAt = UtcDateTimeField(source="created_at")


class LangGraphThreadHistorySerializer(serializers.Serializer[object]):
    """A page of a thread's checkpoints, newest first."""

    threadId = serializers.CharField(source="thread_id", read_only=True)
    checkpoints = LangGraphCheckpointSummarySerializer(many=True, read_only=True)


class LangGraphTranscriptMessageSerializer(serializers.Serializer[object]):
    """A message of a channel's list: its index and stored form, as the
    conversation messages endpoint gives them."""

    position = serializers.IntegerField(read_only=True, min_value=0)
    message = MessageField(read_only=True)


class LangGraphPendingWriteSerializer(serializers.Serializer[object]):
    taskId = serializers.CharField(source="task_id", read_only=True)
    channel = serializers.CharField(read_only=True)
    value = serializers.JSONField(read_only=True)


class LangGraphCheckpointSerializer(LangGraphCheckpointSummarySerializer):
    """A checkpoint decoded: each channel's value (those holding messages as
    transcripts instead) and its pending writes."""

    threadId = serializers.CharField(source="thread_id", read_only=True)
    metadata = serializers.JSONField(read_only=True)
    channelValues = serializers.JSONField(
        source="channel_values",
        read_only=True,
        help_text="Channel name -> value, JSON-safe; channels holding messages are in transcripts.",
    )
    transcripts = serializers.DictField(
        child=LangGraphTranscriptMessageSerializer(many=True),
        read_only=True,
        help_text="Channel name (messages) -> its messages in order.",
    )
    pendingWrites = LangGraphPendingWriteSerializer(
        source="pending_writes", many=True, read_only=True
    )
