"""The wire shape of SPEC section 5: the TypeScript camelCase keys, exactly.

Fields are named in camelCase here (``source=`` maps them to the contract's
dataclasses) so no project-wide renderer or parser setting is involved.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rest_framework import serializers


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
    metadata = MetadataField(read_only=True, allow_null=True)
    createdAt = UtcDateTimeField(source="created_at")
    updatedAt = UtcDateTimeField(source="updated_at")
    messageCount = serializers.IntegerField(source="message_count", read_only=True, min_value=0)


class ConversationMessageSerializer(serializers.Serializer[object]):
    position = serializers.IntegerField(read_only=True, min_value=0)
    runId = serializers.CharField(source="run_id", read_only=True)
    turn = serializers.IntegerField(read_only=True)
    createdAt = UtcDateTimeField(source="created_at")
    message = MessageField(read_only=True)


class ConversationSerializer(ConversationSummarySerializer):
    """The summary plus a page of messages (the first, unless paged on)."""

    messages = ConversationMessageSerializer(many=True, read_only=True)
