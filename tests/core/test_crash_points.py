"""What survives a run stopped at each point, per save policy (docs/runtime.md)."""

from __future__ import annotations

import asyncio

import pytest

from anvia_django.core import AgentBuilder, InProcessMemoryStore, MemoryContext, MemorySavePolicy

from .crash import POINTS, SURVIVES, How, Point, crash_run, well_formed
from .doubles import ScriptedModel, assistant


@pytest.mark.parametrize("how", ["killed", "cancelled"])
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("policy", ["message", "turn", "run"])
def test_what_survives(policy: MemorySavePolicy, point: Point, how: How) -> None:
    store = InProcessMemoryStore()
    asyncio.run(crash_run(store, policy, point, how, "s"))
    assert asyncio.run(store.load(MemoryContext("s"))) == SURVIVES[policy, point]
    # A dying process records nothing: record_error is for failures it survives.
    assert store.failed_runs("s") == []


@pytest.mark.parametrize("point", POINTS)
def test_the_next_run_gets_a_well_formed_conversation(point: Point) -> None:
    store = InProcessMemoryStore()
    asyncio.run(crash_run(store, "message", point, "killed", "s"))
    model = ScriptedModel([assistant("Sorry, where were we?")])
    agent = AgentBuilder("a", model).memory(store).build()
    asyncio.run(agent.session("s").prompt("Hello?").send())
    (conversation,) = model.calls
    assert well_formed(conversation)
    # The repair is for the model only: the stored history is untouched.
    stored = asyncio.run(store.load(MemoryContext("s")))
    assert stored[: len(SURVIVES["message", point])] == SURVIVES["message", point]
