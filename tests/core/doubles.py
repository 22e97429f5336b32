"""Test doubles: a scripted chat model and a store that records every call."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anvia_django.core import (
    InProcessMemoryStore,
    MemoryAppendInput,
    MemoryContext,
    MemoryErrorInput,
    Message,
    ToolSpec,
)

Step = Message | BaseException | Callable[[list[Message]], Message]


@dataclass
class ScriptedModel:
    """Answers each turn with the next step: a message, an error to raise,
    or a function of the conversation it was given."""

    steps: list[Step]
    calls: list[list[Message]] = field(default_factory=list)
    tools_seen: list[list[ToolSpec]] = field(default_factory=list)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        self.calls.append(copy.deepcopy(list(messages)))
        self.tools_seen.append(list(tools))
        if len(self.calls) > len(self.steps):
            raise AssertionError(f"the model was called {len(self.calls)} times")
        step = self.steps[len(self.calls) - 1]
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return step(list(messages))
        return copy.deepcopy(step)


@dataclass
class Call:
    method: str
    context: MemoryContext
    run_id: str | None = None
    turn: int | None = None
    messages: list[Message] | None = None
    error: BaseException | None = None


class RecordingStore:
    """An :class:`InProcessMemoryStore` that logs every call, and fails on demand.

    ``fail_append`` maps the 1-based number of an append call to the error it
    raises (before anything is stored); ``fail_load`` and ``fail_record_error``
    make those methods raise.
    """

    def __init__(
        self,
        *,
        fail_append: dict[int, BaseException] | None = None,
        fail_load: BaseException | None = None,
        fail_record_error: BaseException | None = None,
    ) -> None:
        self.inner = InProcessMemoryStore()
        self.calls: list[Call] = []
        self.fail_append = fail_append or {}
        self.fail_load = fail_load
        self.fail_record_error = fail_record_error

    @property
    def appends(self) -> list[tuple[str, int, list[Message]]]:
        return [(c.run_id, c.turn, c.messages) for c in self.calls if c.method == "append"]  # type: ignore[misc]

    @property
    def errors(self) -> list[Call]:
        return [c for c in self.calls if c.method == "record_error"]

    async def load(self, context: MemoryContext) -> list[Message]:
        self.calls.append(Call("load", context))
        if self.fail_load is not None:
            raise self.fail_load
        return await self.inner.load(context)

    async def append(self, input: MemoryAppendInput) -> None:
        self.calls.append(
            Call("append", input.context, input.run_id, input.turn, copy.deepcopy(input.messages))
        )
        number = sum(c.method == "append" for c in self.calls)
        if number in self.fail_append:
            raise self.fail_append[number]
        await self.inner.append(input)

    async def clear(self, context: MemoryContext) -> None:
        self.calls.append(Call("clear", context))
        await self.inner.clear(context)

    async def record_error(self, input: MemoryErrorInput) -> None:
        self.calls.append(
            Call(
                "record_error",
                input.context,
                input.run_id,
                messages=copy.deepcopy(input.messages),
                error=input.error,
            )
        )
        if self.fail_record_error is not None:
            raise self.fail_record_error
        await self.inner.record_error(input)


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str | None, *calls: tuple[str, str, dict[str, Any]]) -> Message:
    message: Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "name": name, "arguments": arguments}
            for call_id, name, arguments in calls
        ]
    return message


def tool_result(call_id: str, name: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}
