"""A worker process running Pydantic AI runs on shared threads
(``test_pydantic_ai_concurrency``)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.workers import START_TIMEOUT, setup_django, start_together


def run_agents(database_name: str, worker: int, runs: int, gate: Any) -> int:
    """``runs`` runs on each of the threads "by-run" (save="run") and
    "by-turn" (save="turn"), alternating; each run a tool call, its
    return and an answer. The workers start together at ``gate``, and meet
    there again before the answer of their first "by-turn" run, whose
    first turns are then both saved: the runs overlap for sure. Returns how
    many runs finished."""
    setup_django(database_name)
    from django.db import connections
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from anvia_django.integrations.pydantic_ai import DjangoMemory
    from anvia_django.store import close_db_threads

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # The request sent last holds this run's prompt (after another run's
        # unanswered tool returns, when runs interleave), or its tool return.
        last = messages[-1].parts
        prompts = [p.content for p in last if isinstance(p, UserPromptPart)]
        if prompts:
            prompt = str(prompts[-1])
            return ModelResponse(
                parts=[ToolCallPart("lookup", {"order": prompt}, tool_call_id=f"c-{prompt}")]
            )
        # Turn 1 is saved by now (save="turn"): the other worker's writes
        # come in between.
        if meet_before_answering:
            meet_before_answering.clear()
            await asyncio.to_thread(gate.wait, START_TIMEOUT)
        await asyncio.sleep(0.02)
        return ModelResponse(parts=[TextPart(f"done {last[-1].tool_call_id}")])  # type: ignore[union-attr]

    meet_before_answering: list[bool] = []
    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    async def lookup(order: str) -> str:
        return f"order {order} shipped"

    async def all_runs() -> int:
        finished = 0
        for index in range(runs):
            for session_id, save in (("by-run", "run"), ("by-turn", "turn")):
                if session_id == "by-turn" and index == 0:
                    meet_before_answering.append(True)
                memory = DjangoMemory(session_id, save=save)  # type: ignore[arg-type]
                await agent.run(f"{worker}:{index}", capabilities=[memory])
            finished += 1
        return finished

    start_together(gate)
    try:
        return asyncio.run(all_runs())
    finally:
        close_db_threads()
        connections.close_all()
