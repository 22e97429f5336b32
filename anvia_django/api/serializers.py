"""The wire shape of SPEC section 5: the TypeScript camelCase keys, exactly.

Fields are named in camelCase here (``source=`` maps them to the contract's
dataclasses) so no project-wide renderer or parser setting is involved.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from rest_framework import serializers

from anvia_django.integrations.pydantic_ai.display import without_inline_media


class UtcDateTimeField(serializers.DateTimeField):
    """ISO 8601 in UTC with an explicit ``+00:00`` offset.

    DRF's own field renders in the project's current time zone and format
    (``REST_FRAMEWORK["DATETIME_FORMAT"]``); the contract fixes both.
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(read_only=True, **kwargs)  # type: ignore[arg-type]

    def to_representation(self, value: datetime) -> str:
        return value.astimezone(UTC).isoformat()


class MessageField(serializers.JSONField):
    """A stored message: a JSON object with a string ``role``, as appended."""


class MetadataField(serializers.JSONField):
    """The conversation's metadata: a JSON object, or null."""


class ConversationSummarySerializer(serializers.Serializer[object]):
    ref = serializers.CharField(read_only=True)
    sessionId = serializers.CharField(source="session_id", read_only=True)
    userId = serializers.CharField(source="user_id", read_only=True, allow_null=True)
    scopeKey = serializers.CharField(
        source="scope_key",
        read_only=True,
        help_text=(
            "What tells this conversation apart from others with its session id "
            '(ANVIA_DJANGO["SCOPE"]): the user id, a JSON list of the user id and '
            'metadata values, a scope function\'s string, or "" for none.'
        ),
    )
    metadata = MetadataField(read_only=True, allow_null=True)
    createdAt = UtcDateTimeField(source="created_at")
    updatedAt = UtcDateTimeField(source="updated_at")
    messageCount = serializers.IntegerField(source="message_count", read_only=True, min_value=0)


class ConversationMessageSerializer(serializers.Serializer[object]):
    """A stored message. In a Pydantic AI message, binary data over 2 KiB is
    given as ``dataUrl`` (``data`` null, ``dataOmitted`` its size in bytes)
    when the view passes ``media_url(position, part, item)`` in the context."""

    position = serializers.IntegerField(read_only=True, min_value=0)
    runId = serializers.CharField(source="run_id", read_only=True)
    turn = serializers.IntegerField(read_only=True)
    createdAt = UtcDateTimeField(source="created_at")
    message = MessageField(read_only=True)

    def to_representation(self, instance: Any) -> Any:
        data = super().to_representation(instance)
        media_url = self.context.get("media_url")
        if media_url is not None:
            data["message"] = without_inline_media(
                data["message"], partial(media_url, instance.position)
            )
        return data


class ConversationSerializer(ConversationSummarySerializer):
    """The summary plus a page of messages (the first, unless paged on)."""

    messages = ConversationMessageSerializer(many=True, read_only=True)


_COUNT: dict[str, Any] = {"read_only": True, "allow_null": True, "min_value": 0}


class RunSerializer(serializers.Serializer[object]):
    """A run record; token counts are null when the model did not report them."""

    runId = serializers.CharField(source="run_id", read_only=True)
    status = serializers.ChoiceField(choices=["succeeded", "failed"], read_only=True)
    startedAt = UtcDateTimeField(source="started_at")
    finishedAt = UtcDateTimeField(source="finished_at")
    model = serializers.CharField(read_only=True, allow_null=True)
    inputTokens = serializers.IntegerField(
        source="usage.input_tokens", read_only=True, allow_null=True
    )
    outputTokens = serializers.IntegerField(
        source="usage.output_tokens", read_only=True, allow_null=True
    )
    totalTokens = serializers.IntegerField(
        source="usage.total_tokens", read_only=True, allow_null=True
    )
    messageCount = serializers.IntegerField(source="message_count", read_only=True, min_value=0)
    errorType = serializers.CharField(source="error_type", read_only=True, allow_null=True)
    errorMessage = serializers.CharField(source="error_message", read_only=True, allow_null=True)


class RunTotalsSerializer(serializers.Serializer[object]):
    runCount = serializers.IntegerField(source="runs", read_only=True)
    failedRunCount = serializers.IntegerField(source="failed_runs", read_only=True)
    inputTokens = serializers.IntegerField(source="input_tokens", read_only=True)
    outputTokens = serializers.IntegerField(source="output_tokens", read_only=True)
    totalTokens = serializers.IntegerField(source="total_tokens", read_only=True)


class ConversationRunsSerializer(serializers.Serializer[object]):
    """Totals over every run of the conversation, and its newest runs."""

    totals = RunTotalsSerializer(read_only=True)
    runs = RunSerializer(many=True, read_only=True)


class ForkLineageSerializer(serializers.Serializer[object]):
    """One end of a fork; ``ref`` and ``sessionId`` are null once that
    conversation is deleted (or not the caller's)."""

    ref = serializers.CharField(read_only=True, allow_null=True)
    sessionId = serializers.CharField(source="session_id", read_only=True, allow_null=True)
    position = serializers.IntegerField(read_only=True, min_value=0)


class LineageSerializer(serializers.Serializer[object]):
    forkedFrom = ForkLineageSerializer(source="forked_from", read_only=True, allow_null=True)
    forks = ForkLineageSerializer(many=True, read_only=True)


class SummarySerializer(serializers.Serializer[object]):
    """A compaction summary; ``load`` shows it in place of positions 0..coversThrough."""

    coversThrough = serializers.IntegerField(source="covers_through", read_only=True, min_value=0)
    createdAt = UtcDateTimeField(source="created_at")
    message = MessageField(read_only=True)
