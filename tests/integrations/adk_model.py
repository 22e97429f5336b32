"""A scripted ADK model (no network) and the agent of the runner tests.

Each user message makes the model call the ``remember`` tool with the
message's text; the tool's result makes it answer. The tool changes state
in every scope: ``user:fact``, ``app:remembered`` (a count), the session's
``remembered`` (a count) and ``temp:scratch`` (never stored); the agent
keeps its answer in the session's ``last_answer`` (``output_key``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.tool_context import ToolContext
from google.genai import types


class ScriptedModel(BaseLlm):
    """Calls ``remember`` for a user message, answers a tool result."""

    seen: list[int] = []
    """How many contents each request carried (the history the model saw)."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append(len(llm_request.contents))
        last = llm_request.contents[-1].parts or []
        results = [part.function_response for part in last if part.function_response]
        if results:
            fact = (results[0].response or {}).get("fact")
            part = types.Part(text=f"noted: {fact}")
        else:
            text = "".join(part.text or "" for part in last)
            part = types.Part(
                function_call=types.FunctionCall(name="remember", args={"fact": text})
            )
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def remember(fact: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remember a fact about the user."""
    state = tool_context.state
    state["user:fact"] = fact
    state["app:remembered"] = state.get("app:remembered", 0) + 1
    state["remembered"] = state.get("remembered", 0) + 1
    state["temp:scratch"] = fact.upper()
    return {"fact": fact}


def make_agent(model: ScriptedModel) -> LlmAgent:
    return LlmAgent(
        name="helper",
        model=model,
        instruction="Remember what the user says.",
        tools=[remember],
        output_key="last_answer",
    )


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def one_turn(app_name: str, user_id: str, text: str) -> str:
    """A new session of ``user_id`` in ``app_name``, and one turn of the
    agent there through a ``Runner`` on ``DjangoSessionService``; its id."""
    from google.adk.runners import Runner

    from anvia_django.integrations.adk import DjangoSessionService

    service = DjangoSessionService()
    agent = make_agent(ScriptedModel(model="scripted"))
    runner = Runner(agent=agent, app_name=app_name, session_service=service)
    session = await service.create_session(app_name=app_name, user_id=user_id)
    async for _ in runner.run_async(
        user_id=user_id, session_id=session.id, new_message=user_says(text)
    ):
        pass
    return session.id
