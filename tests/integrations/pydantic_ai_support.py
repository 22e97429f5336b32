"""Scripted Pydantic AI models, and driving an agent the four ways users do."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

from tests.helpers import run

METHODS = [
    "run",
    "run_stream",
    "iter",
    # run_sync runs its own event loop, so the store's calls run on the
    # store's threads, on connections that see committed data only.
    pytest.param("run_sync", marks=pytest.mark.django_db(transaction=True)),
]


def answer(text: str, *, input_tokens: int = 10, output_tokens: int = 2) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(text)],
        usage=RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens),
        model_name="scripted-1",
    )


def call(
    tool: str, args: dict[str, Any], call_id: str, *, input_tokens: int = 10, output_tokens: int = 2
) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(tool, args, tool_call_id=call_id)],
        usage=RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens),
        model_name="scripted-1",
    )


Step = (
    ModelResponse
    | BaseException
    | Callable[[list[ModelMessage]], ModelResponse]
    | Callable[[list[ModelMessage]], Awaitable[ModelResponse]]
)


class Script:
    """A model that answers each request with the next scripted step.

    A step is a response, an exception to raise, or a function (sync or
    async) of the messages the model was sent. ``seen`` keeps what each
    request sent.
    """

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.seen: list[list[ModelMessage]] = []

    async def _next(self, messages: list[ModelMessage]) -> ModelResponse:
        self.seen.append(list(messages))
        if not self.steps:
            raise AssertionError("the model was asked more often than scripted")
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            response = step(messages)
            return await response if inspect.isawaitable(response) else response
        return step

    async def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return await self._next(messages)

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
        response = await self._next(messages)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        name=part.tool_name,
                        json_args=part.args_as_json_str(),
                        tool_call_id=part.tool_call_id,
                    )
                }

    def model(self) -> FunctionModel:
        return FunctionModel(self.respond, stream_function=self.stream, model_name="scripted-1")


def drive(method: str, agent: Agent[Any, Any], prompt: Any, **kwargs: Any) -> list[ModelMessage]:
    """Run ``agent`` on ``prompt`` by ``method`` to its end; the run's messages."""
    if method == "run_sync":
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return agent.run_sync(prompt, **kwargs).new_messages()
        finally:
            asyncio.set_event_loop(None)
            loop.close()
    return run(drive_async, method, agent, prompt, **kwargs)


async def drive_async(
    method: str, agent: Agent[Any, Any], prompt: Any, **kwargs: Any
) -> list[ModelMessage]:
    if method == "run":
        return (await agent.run(prompt, **kwargs)).new_messages()
    if method == "run_stream":
        async with agent.run_stream(prompt, **kwargs) as streamed:
            async for _ in streamed.stream_output(debounce_by=None):
                pass
        return streamed.new_messages()
    assert method == "iter"
    async with agent.iter(prompt, **kwargs) as agent_run:
        async for _node in agent_run:
            pass
    assert agent_run.result is not None
    return agent_run.result.new_messages()
