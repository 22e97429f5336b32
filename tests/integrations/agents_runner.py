"""Driving the Agents SDK's Runner the three ways users do, from sync tests."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Runner
from agents.result import RunResult, RunResultStreaming

from tests.helpers import run

RUNNER_METHODS = [
    "run",
    "run_streamed",
    # run_sync starts its own event loop in this thread, so the session's
    # sync_to_async calls run in asgiref's worker thread, on a connection of
    # its own that sees committed data only (conftest closes it).
    pytest.param("run_sync", marks=pytest.mark.django_db(transaction=True)),
]


def drive(method: str, agent: Any, input: Any, **kwargs: Any) -> RunResult | RunResultStreaming:
    """``Runner.<method>(agent, input, **kwargs)`` run to its end."""
    if method == "run":
        return run(Runner.run, agent, input, **kwargs)
    if method == "run_sync":
        # run_sync reuses (and leaves open) the thread's default loop; give it
        # one to close, or a later asyncio.run() orphans it (ResourceWarning).
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return Runner.run_sync(agent, input, **kwargs)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
    assert method == "run_streamed"
    return run(stream_to_end, agent, input, **kwargs)


async def stream_to_end(agent: Any, input: Any, **kwargs: Any) -> RunResultStreaming:
    result = Runner.run_streamed(agent, input, **kwargs)
    async for _event in result.stream_events():
        pass
    return result
