"""Hypothesis strategies for Pydantic AI messages: every part kind.

Values are what the store keeps exactly (no NaN, no U+0000, no lone
surrogates) and what Pydantic AI's own JSON form gives back equal: binary
content of a media type Pydantic AI narrows is generated as the narrowed
class, with its identifier given (a missing one is filled on load).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    BinaryImage,
    CapabilityLoadDeltaPart,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_ai.usage import RequestUsage

from .common import json_text, json_values

words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=40)
names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
ids = st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
details = st.none() | st.dictionaries(json_text, json_values, max_size=3)
json_objects = st.dictionaries(json_text, json_values, max_size=3)
binary = st.binary(max_size=64)


def _images() -> st.SearchStrategy[BinaryContent]:
    return st.builds(
        BinaryImage,
        data=binary,
        media_type=st.sampled_from(["image/png", "image/jpeg", "image/webp"]),
        identifier=ids,
    )


def _other_binary() -> st.SearchStrategy[BinaryContent]:
    # Media types Pydantic AI does not narrow to a subclass.
    return st.builds(
        BinaryContent,
        data=binary,
        media_type=st.sampled_from(["application/pdf", "application/octet-stream", "text/plain"]),
        identifier=ids,
    )


urls = st.sampled_from(["https://example.com/a.png", "https://example.com/b?x=1"])
user_content = st.one_of(
    words,
    _images(),
    _other_binary(),
    st.builds(ImageUrl, url=urls, identifier=ids),
    st.builds(AudioUrl, url=urls, media_type=st.just("audio/mpeg"), identifier=ids),
    st.builds(DocumentUrl, url=urls, media_type=st.just("application/pdf"), identifier=ids),
    st.builds(VideoUrl, url=urls, media_type=st.just("video/mp4"), identifier=ids),
)


def _retry_infos(causes: list[str]) -> st.SearchStrategy[Any]:
    return st.builds(
        RetryInfo,
        cause=st.sampled_from(causes),
        attempt=st.integers(1, 3),
        max_retries=st.integers(1, 3),
    )


request_parts = st.one_of(
    st.builds(SystemPromptPart, content=words, timestamp=moments),
    st.builds(
        UserPromptPart, content=words | st.lists(user_content, max_size=3), timestamp=moments
    ),
    st.builds(
        ToolReturnPart,
        tool_name=names,
        content=json_values,
        tool_call_id=ids,
        timestamp=moments,
        metadata=st.none() | json_objects,
        outcome=st.sampled_from(["success", "failed", "denied"]),
    ),
    st.builds(
        ToolReturnPart,
        tool_name=names,
        content=words,
        tool_call_id=ids,
        timestamp=moments,
        outcome=st.just("retried"),
        retry=_retry_infos(["model_retry", "validation_error"]),
    ),
    st.builds(
        RetryFeedbackPart,
        content=words,
        retry=_retry_infos(["validation_error", "no_output", "model_retry"]),
        timestamp=moments,
    ),
    st.builds(
        ToolAvailabilityDeltaPart,
        tools_added=st.lists(names, max_size=3),
        tool_call_id=st.none() | ids,
    ),
    st.builds(
        CapabilityLoadDeltaPart, loaded=st.lists(names, max_size=3), tool_call_id=st.none() | ids
    ),
    st.builds(CompactionPart, content=st.none() | words, metadata=st.none() | json_objects),
    st.builds(
        SpeechPart, speaker=st.just("user"), transcript=st.none() | words, id=st.none() | ids
    ),
)
REQUEST_PART_KINDS = {
    "system-prompt",
    "user-prompt",
    "tool-return",
    "retry-feedback",
    "tool-availability-delta",
    "capability-load-delta",
    "compaction",
    "speech",
}
"""The request part kinds (the tags of ``ModelRequestPart``) generated above."""

response_parts = st.one_of(
    st.builds(TextPart, content=words, id=st.none() | ids, provider_details=details),
    st.builds(
        ThinkingPart,
        content=words,
        id=st.none() | ids,
        signature=st.none() | ids,
        provider_name=st.none() | names,
    ),
    st.builds(
        ToolCallPart,
        tool_name=names,
        args=st.none() | words | json_objects,
        tool_call_id=ids,
        provider_details=details,
    ),
    st.builds(
        NativeToolCallPart,
        tool_name=names,
        args=st.none() | json_objects,
        tool_call_id=ids,
        provider_name=names,
    ),
    st.builds(
        NativeToolReturnPart,
        tool_name=names,
        content=json_values,
        tool_call_id=ids,
        timestamp=moments,
        provider_name=names,
    ),
    st.builds(FilePart, content=_images() | _other_binary(), id=st.none() | ids),
    st.builds(CompactionPart, content=st.none() | words, id=st.none() | ids, provider_name=names),
    st.builds(
        SpeechPart,
        speaker=st.just("assistant"),
        transcript=st.none() | words,
        audio=st.none()
        | st.builds(
            BinaryContent, data=binary, media_type=st.just("audio/wav"), identifier=ids
        ).map(BinaryContent.narrow_type),
    ),
)
RESPONSE_PART_KINDS = {
    "text",
    "thinking",
    "tool-call",
    "builtin-tool-call",
    "builtin-tool-return",
    "file",
    "compaction",
    "speech",
}
"""The response part kinds (the tags of ``ModelResponsePart``) generated above."""

usages = st.builds(
    RequestUsage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    cache_read_tokens=st.integers(0, 1000),
    details=st.dictionaries(names, st.integers(0, 1000), max_size=2),
    cost=st.none() | st.decimals(min_value=0, max_value=100, places=6).map(Decimal),
)

requests = st.builds(
    ModelRequest,
    parts=st.lists(request_parts, min_size=1, max_size=4),
    timestamp=st.none() | moments,
    instructions=st.none() | words,
    run_id=st.none() | ids,
    conversation_id=st.none() | ids,
    metadata=st.none() | json_objects,
)
responses = st.builds(
    ModelResponse,
    parts=st.lists(response_parts, min_size=1, max_size=4),
    usage=usages,
    model_name=st.none() | names,
    timestamp=moments,
    duration=st.none() | st.integers(0, 10**6).map(lambda ms: timedelta(milliseconds=ms)),
    provider_name=st.none() | names,
    provider_details=details,
    provider_response_id=st.none() | ids,
    finish_reason=st.none() | st.sampled_from(["stop", "length", "tool_call"]),
    run_id=st.none() | ids,
    conversation_id=st.none() | ids,
)
model_messages: st.SearchStrategy[ModelMessage] = requests | responses
