"""Token usage from the models: the OpenAI-compatible adapter and the offline demo."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from anvia_django.core import AgentBuilder, InProcessMemoryStore, ModelReply
from anvia_django.core.adapters.openai_compatible import (
    OpenAICompatibleChatModel,
    usage_from_wire,
)
from anvia_django.core.memory import TokenUsage
from example_project.demo.offline_model import OfflineSupportModel

from .stub_server import StubServer, no_proxies, stub

__all__ = ["no_proxies", "stub"]  # fixtures used by the tests below


def answer(content: str, usage: Any, model: str = "gpt-test-2026") -> dict[str, Any]:
    return {
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": usage,
    }


def test_the_adapter_reads_usage_and_the_serving_model(stub: StubServer) -> None:
    usage = {"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35}
    stub.replies.append((200, answer("Hello.", usage)))
    model = OpenAICompatibleChatModel("gpt-test", base_url=stub.url, api_key="k")
    store = InProcessMemoryStore()
    agent = AgentBuilder("a", model).memory(store).build()

    response = asyncio.run(agent.session("s").prompt("Hi").send())

    assert response.usage == TokenUsage(31, 4, 35)
    assert response.model == "gpt-test-2026"
    (record,) = store.runs("s")
    assert (record.usage, record.model) == (TokenUsage(31, 4, 35), "gpt-test-2026")


def test_complete_still_returns_the_message_alone(stub: StubServer) -> None:
    stub.replies.append((200, answer("Hi.", None)))
    model = OpenAICompatibleChatModel("gpt-test", base_url=stub.url, api_key="k")
    assert asyncio.run(model.complete([{"role": "user", "content": "x"}], [])) == {
        "role": "assistant",
        "content": "Hi.",
    }


@pytest.mark.parametrize(
    ("wire", "usage"),
    [
        (None, None),
        ("lots", None),
        ({}, None),
        ({"prompt_tokens": 3, "completion_tokens": 2}, TokenUsage(3, 2, 5)),
        (
            {"prompt_tokens": -1, "completion_tokens": True, "total_tokens": 9},
            TokenUsage(None, None, 9),
        ),
        ({"prompt_tokens": 1.5}, None),
    ],
)
def test_usage_from_the_wire_keeps_only_whole_counts(wire: Any, usage: TokenUsage | None) -> None:
    assert usage_from_wire(wire) == usage


def test_the_offline_model_reports_plausible_counts() -> None:
    model = OfflineSupportModel()
    short = [{"role": "user", "content": "hi"}]
    long = [{"role": "user", "content": "hello " * 400}]
    small = asyncio.run(model.complete_with_usage(short, []))
    big = asyncio.run(model.complete_with_usage(long, []))
    assert isinstance(small, ModelReply)
    assert small.model == "offline-support-demo"
    assert small.usage is not None
    assert big.usage is not None
    assert 0 < (small.usage.input_tokens or 0) < (big.usage.input_tokens or 0)
    assert big.usage.total_tokens == (big.usage.input_tokens or 0) + (big.usage.output_tokens or 0)
    assert small.message == asyncio.run(model.complete(short, []))
