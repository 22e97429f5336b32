"""What the docs' examples run against in the tests: no network, no key.

The examples name real models (``OpenAICompatibleChatModel("gpt-4o-mini")``,
the Agents SDK's default model). Here those stay what they are, constructor
and all, but answer from offline doubles: the demo's rule-based support
model, and the Agents SDK's scripted model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from anvia_django.core import ModelReply, ToolSpec
from anvia_django.core.adapters.openai_compatible import OpenAICompatibleChatModel
from anvia_django.core.memory import Message
from example_project.demo.offline_model import OfflineSupportModel

AGENTS_REPLY = "Order 42 shipped yesterday."


@pytest.fixture
def offline_models(monkeypatch: pytest.MonkeyPatch) -> None:
    offline = OfflineSupportModel()

    async def complete(
        self: Any, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Message:
        return await offline.complete(messages, tools)

    async def complete_with_usage(
        self: Any, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply:
        reply = await offline.complete_with_usage(messages, tools)
        return ModelReply(reply.message, reply.usage, self.model_name)

    monkeypatch.setattr(OpenAICompatibleChatModel, "complete", complete)
    monkeypatch.setattr(OpenAICompatibleChatModel, "complete_with_usage", complete_with_usage)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _offline_agents_sdk(monkeypatch)


def _offline_agents_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        from agents import set_tracing_disabled
        from agents.models.multi_provider import MultiProvider
        from agents.testing import ScriptedModel, assistant_message
    except ImportError:  # the extra is not installed: its blocks fail on import
        return

    def get_model(self: Any, model_name: str | None) -> Any:
        return ScriptedModel([[assistant_message(AGENTS_REPLY)]] * 8)

    # The SDK's default provider, which Agent(...) without a model goes through.
    monkeypatch.setattr(MultiProvider, "get_model", get_model)
    set_tracing_disabled(True)
