"""The stored form of Pydantic AI messages: exact round trips through the
store for every part kind (hypothesis), and format 1 pinned by a file of
messages written by the Pydantic AI version the dev extra pins.

Run with ``ANVIA_TEST_ENCRYPTION=1`` too (CI's encrypted cell does): the
round trips then go through sealed rows.
"""

from __future__ import annotations

import json
import typing
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext
from anvia_django.integrations.pydantic_ai.stored_form import (
    KEY,
    StoredFormError,
    from_stored,
    to_stored,
)
from anvia_django.store import DjangoMemoryStore
from tests.helpers import run

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
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
)
from pydantic_ai.usage import RequestUsage

from anvia_django.integrations.pydantic_ai import (
    DjangoMemory,
    messages_to_stored,
    stored_to_messages,
)

from .pydantic_ai_strategies import (
    REQUEST_PART_KINDS,
    RESPONSE_PART_KINDS,
    model_messages,
    response_parts,
    user_content,
    words,
)
from .pydantic_ai_support import Script

pytestmark = pytest.mark.django_db

FORMAT_1_FILE = Path(__file__).with_name("pydantic_ai_format_1.json")
PINNED = "2.78.0"
"""The pydantic-ai-slim version the dev extra pins, which wrote FORMAT_1_FILE."""

# Part kinds the strategies leave out, and why. A kind Pydantic AI adds
# fails test_the_strategies_cover_every_part_kind until it is listed in one
# of the two.
NOT_GENERATED = {
    # Deprecated: Pydantic AI loads them as a tool return with outcome
    # "retried" or as retry feedback, both generated (and see
    # test_a_stored_legacy_retry_prompt_loads_as_what_replaced_it).
    "retry-prompt": "deprecated",
    "legacy-retry-tool-return": "deprecated",
    "legacy-retry-feedback": "deprecated",
    # Tool call and return parts of Pydantic AI's own tool search and
    # deferred capabilities, stored under the tool-call / tool-return kinds.
    "tool-search-return": "a tool-return",
    "capability-load-return": "a tool-return",
    "tool-search-call": "a tool-call",
    "capability-load-call": "a tool-call",
    "builtin-tool-search-call": "a builtin-tool-call",
    "builtin-tool-search-return": "a builtin-tool-return",
    # Bookkeeping Pydantic AI's capabilities write into requests.
    "model-settings-delta": "bookkeeping",
    "instruction-delta": "bookkeeping",
    "instruction-baseline": "bookkeeping",
    "capability": "bookkeeping",
}


def _tags(union: Any) -> set[str]:
    members = typing.get_args(typing.get_args(union)[0])
    return {
        meta.tag
        for member in members
        for meta in typing.get_args(member)[1:]
        if type(meta).__name__ == "Tag"
    }


def test_the_strategies_cover_every_part_kind() -> None:
    assert _tags(ModelRequestPart) == REQUEST_PART_KINDS | (
        _tags(ModelRequestPart) & NOT_GENERATED.keys()
    )
    assert _tags(ModelResponsePart) == RESPONSE_PART_KINDS | (
        _tags(ModelResponsePart) & NOT_GENERATED.keys()
    )
    known = REQUEST_PART_KINDS | RESPONSE_PART_KINDS | NOT_GENERATED.keys()
    assert (_tags(ModelRequestPart) | _tags(ModelResponsePart)) <= known


def store_and_load(messages: list[ModelMessage]) -> list[ModelMessage]:
    store = DjangoMemoryStore()
    context = MemoryContext(f"form-{uuid.uuid4().hex}", user_id="u1")
    run(store.append, MemoryAppendInput(context, "run-1", 1, messages_to_stored(messages)))
    return stored_to_messages(run(store.load, context))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(model_messages, min_size=1, max_size=3))
def test_every_part_kind_loads_back_equal(messages: list[ModelMessage]) -> None:
    assert store_and_load(messages) == messages


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    prompt=st.lists(user_content, min_size=1, max_size=3),
    parts=st.lists(
        response_parts.filter(lambda part: not isinstance(part, ToolCallPart)), max_size=3
    ),
    answer=words.filter(str.strip),
)
def test_what_a_run_stored_loads_back_equal(
    prompt: list[Any], parts: list[ModelResponsePart], answer: str
) -> None:
    reply = ModelResponse(parts=[*parts, TextPart(answer)], model_name="scripted-1")
    agent = Agent(Script([reply]).model())
    memory = DjangoMemory(f"run-{uuid.uuid4().hex}", user_id="u1")

    async def go() -> list[ModelMessage]:
        return (await agent.run(prompt, capabilities=[memory])).all_messages()

    messages = run(go)

    context = MemoryContext(memory.session_id, user_id="u1")
    assert stored_to_messages(run(DjangoMemoryStore().load, context)) == messages


MOMENT = datetime(2026, 11, 20, 9, 30, 15, 123456, tzinfo=UTC)
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001")

FORMAT_1_MESSAGES: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("Be brief.", timestamp=MOMENT),
            UserPromptPart(
                [
                    "What is on this label?",
                    BinaryImage(data=PNG, media_type="image/png", identifier="label"),
                    ImageUrl("https://example.com/label.png", identifier="remote"),
                    DocumentUrl(
                        "https://example.com/terms.pdf",
                        media_type="application/pdf",
                        identifier="terms",
                    ),
                    BinaryContent(data=b"%PDF-1.7", media_type="application/pdf", identifier="pdf"),
                ],
                timestamp=MOMENT,
            ),
        ],
        timestamp=MOMENT,
        instructions="Answer in English.",
        run_id="run-a",
        conversation_id="conversation-a",
        metadata={"tenant": "acme"},
    ),
    ModelResponse(
        parts=[
            ThinkingPart("The label shows an order number.", signature="sig-1", provider_name="p"),
            TextPart("Let me look it up.", provider_details={"logprob": -0.25}),
            ToolCallPart("lookup", {"order": "42"}, tool_call_id="call-1"),
            NativeToolCallPart(
                "web_search", {"query": "order 42"}, tool_call_id="web-1", provider_name="p"
            ),
            NativeToolReturnPart(
                "web_search",
                [{"title": "Order 42", "url": "https://example.com/42"}],
                tool_call_id="web-1",
                timestamp=MOMENT,
                provider_name="p",
            ),
        ],
        usage=RequestUsage(
            input_tokens=120,
            output_tokens=30,
            cache_read_tokens=64,
            details={"reasoning_tokens": 12},
            cost=Decimal("0.000420"),
        ),
        model_name="model-1",
        timestamp=MOMENT,
        duration=timedelta(milliseconds=850),
        provider_name="p",
        provider_details={"finish_reason": "tool_calls"},
        provider_response_id="resp-1",
        finish_reason="tool_call",
        run_id="run-a",
        conversation_id="conversation-a",
    ),
    ModelRequest(
        parts=[
            ToolReturnPart(
                "lookup",
                {"status": "shipped", "eta": None},
                tool_call_id="call-1",
                timestamp=MOMENT,
                metadata={"source": "warehouse"},
            ),
            ToolReturnPart(
                "lookup",
                "Give the order number without letters.",
                tool_call_id="call-2",
                timestamp=MOMENT,
                outcome="retried",
                retry=RetryInfo(cause="model_retry", attempt=1, max_retries=2),
            ),
            RetryFeedbackPart(
                "Answer with the order's status.",
                retry=RetryInfo(cause="validation_error", attempt=1, max_retries=1),
                timestamp=MOMENT,
            ),
            ToolAvailabilityDeltaPart(tools_added=["refund"]),
            SpeechPart(speaker="user", transcript="and the refund?"),
        ],
        timestamp=MOMENT,
        run_id="run-a",
        conversation_id="conversation-a",
    ),
    ModelResponse(
        parts=[
            FilePart(BinaryImage(data=PNG, media_type="image/png", identifier="chart")),
            CompactionPart("Earlier: the user asked about order 42.", provider_name="p"),
            TextPart("Order 42 shipped."),
        ],
        usage=RequestUsage(input_tokens=200, output_tokens=8),
        model_name="model-1",
        timestamp=MOMENT,
        run_id="run-a",
        conversation_id="conversation-a",
    ),
]


def test_format_1_as_stored_today_loads_as_these_messages() -> None:
    stored = json.loads(FORMAT_1_FILE.read_text())
    assert stored_to_messages(stored) == FORMAT_1_MESSAGES
    assert store_and_load(FORMAT_1_MESSAGES) == FORMAT_1_MESSAGES


@pytest.mark.skipif(version("pydantic-ai-slim") != PINNED, reason="writes as the pinned version")
def test_the_pinned_version_writes_format_1_exactly() -> None:
    # A change here with a new pin is a new stored form: keep reading the
    # file above, and bump FORMAT if the layout around Pydantic AI's JSON
    # changed.
    assert messages_to_stored(FORMAT_1_MESSAGES) == json.loads(FORMAT_1_FILE.read_text())


def test_texts_are_stored_once_as_content_and_put_back_where_they_were() -> None:
    (stored,) = messages_to_stored(FORMAT_1_MESSAGES[:1])

    assert stored["role"] == "user"
    assert stored["content"] == [
        {"type": "text", "text": "Be brief.", "part": 0},
        {"type": "text", "text": "What is on this label?", "part": 1, "item": 0},
    ]
    parts = stored[KEY]["message"]["parts"]
    assert "content" not in parts[0]
    assert parts[1]["content"][0] is None
    assert (
        from_stored(stored)
        == ModelMessagesTypeAdapter.dump_python(FORMAT_1_MESSAGES[:1], mode="json")[0]
    )
    assert stored_to_messages([stored]) == FORMAT_1_MESSAGES[:1]


def test_roles_follow_what_a_message_is() -> None:
    roles = [message["role"] for message in messages_to_stored(FORMAT_1_MESSAGES)]
    # The third request holds the user's speech besides tool results.
    assert roles == ["user", "assistant", "user", "assistant"]
    request = FORMAT_1_MESSAGES[2]
    assert isinstance(request, ModelRequest)
    tool_results = ModelRequest(parts=[p for p in request.parts if p.part_kind != "speech"])
    system_only = ModelRequest(parts=[SystemPromptPart("Be brief.")])
    assert [m["role"] for m in messages_to_stored([tool_results, system_only])] == [
        "tool",
        "system",
    ]


def test_a_stored_legacy_retry_prompt_loads_as_what_replaced_it() -> None:
    stored = to_stored(
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "retry-prompt",
                    "content": "Try again.",
                    "tool_name": "lookup",
                    "tool_call_id": "c1",
                    "timestamp": "2026-01-01T00:00:00Z",
                }
            ],
        }
    )

    (request,) = stored_to_messages([stored])

    (part,) = request.parts
    assert isinstance(part, ToolReturnPart)
    assert (part.outcome, part.content, part.tool_call_id) == ("retried", "Try again.", "c1")


@pytest.mark.parametrize(
    ("stored", "error"),
    [
        (
            {"role": "user", KEY: {"format": 2, "message": {"kind": "request", "parts": []}}},
            "format 2",
        ),
        ({"role": "user", KEY: {"format": 1, "message": "x"}}, "with parts"),
    ],
)
def test_a_stored_form_this_version_cannot_read_is_refused(
    stored: dict[str, Any], error: str
) -> None:
    with pytest.raises(StoredFormError, match=error):
        stored_to_messages([stored])
