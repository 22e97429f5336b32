"""A scripted chat model that reports token usage, for the run-record tests."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

from anvia_django.core import ModelReply, ToolSpec
from anvia_django.core.memory import Message, TokenUsage


@dataclass
class MeteredModel:
    """Answers with the next scripted message and its scripted usage.

    An exception in ``steps`` is raised instead of answering.
    """

    steps: list[tuple[Message, TokenUsage | None] | BaseException]
    model_name: str = "metered-test-model"
    calls: int = 0
    seen: list[list[Message]] = field(default_factory=list)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        return (await self.complete_with_usage(messages, tools)).message

    async def complete_with_usage(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply:
        self.seen.append(copy.deepcopy(list(messages)))
        step = self.steps[self.calls]
        self.calls += 1
        if isinstance(step, BaseException):
            raise step
        message, usage = step
        return ModelReply(copy.deepcopy(message), usage)


@dataclass
class EchoModel:
    """Repeats the last user message; reports usage of one token per word."""

    model_name: str = "echo"

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        return (await self.complete_with_usage(messages, tools)).message

    async def complete_with_usage(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> ModelReply:
        last = next(m for m in reversed(messages) if m.get("role") == "user")
        text = f"echo: {last['content']}"
        words = sum(len(str(m.get("content") or "").split()) for m in messages)
        return ModelReply(
            {"role": "assistant", "content": text}, TokenUsage(words, len(text.split()))
        )
