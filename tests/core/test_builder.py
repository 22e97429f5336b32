"""AgentBuilder's options and their validation."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from anvia_django.core import (
    DEFAULT_MAX_TURNS,
    AgentBuilder,
    InProcessMemoryStore,
    MemoryOptions,
)

from .doubles import ScriptedModel


def test_defaults() -> None:
    agent = AgentBuilder("a", ScriptedModel([])).memory(InProcessMemoryStore()).build()
    assert (agent.max_turns, agent.instructions, agent.tools) == (DEFAULT_MAX_TURNS, None, ())
    assert DEFAULT_MAX_TURNS == 10
    assert agent.memory is not None
    assert agent.memory.options.save_policy == "message"


def test_memory_accepts_options_or_a_policy_but_not_both() -> None:
    store = InProcessMemoryStore()
    builder = AgentBuilder("a", ScriptedModel([]))
    built = builder.memory(store, MemoryOptions(save_policy="run")).build()
    assert built.memory is not None
    assert built.memory.options.save_policy == "run"
    with pytest.raises(ValueError, match="not both"):
        builder.memory(store, MemoryOptions(save_policy="run"), save_policy="turn")
    with pytest.raises(ValueError, match="save_policy"):
        builder.memory(store, save_policy="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MemoryStore"):
        builder.memory(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("turns", [0, -1, True, 2.5])
def test_max_turns_must_be_positive(turns: object) -> None:
    with pytest.raises(ValueError, match="max_turns"):
        AgentBuilder("a", ScriptedModel([])).max_turns(turns)  # type: ignore[arg-type]


def test_built_agents_do_not_change_with_the_builder() -> None:
    builder = AgentBuilder("a", ScriptedModel([])).instructions("one")
    first = builder.build()
    builder.instructions("two").max_turns(3)
    assert (first.instructions, first.max_turns) == ("one", 10)


def test_bad_names_and_models() -> None:
    with pytest.raises(ValueError, match="name"):
        AgentBuilder(" ", ScriptedModel([]))
    with pytest.raises(TypeError, match="ChatModel"):
        AgentBuilder("a", object())  # type: ignore[arg-type]


def test_core_never_imports_django() -> None:
    code = (
        "import sys, anvia_django.core, anvia_django.core.runtime, anvia_django.core.memory;"
        "import anvia_django.core.adapters.openai_compatible;"
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'));"
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_session_history_and_clear() -> None:
    store = InProcessMemoryStore()
    model = ScriptedModel([Exception("down"), {"role": "assistant", "content": "hi"}])
    session = AgentBuilder("a", model).memory(store, save_policy="turn").build().session("s")
    with pytest.raises(Exception, match="down"):
        asyncio.run(session.prompt("one").send())
    asyncio.run(session.prompt("two").send())
    assert asyncio.run(session.history()) == [
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "hi"},
    ]
    assert len(store.failed_runs("s")) == 1
    asyncio.run(session.clear())
    assert asyncio.run(session.history()) == []
    assert store.failed_runs("s") == []


def test_prompts_are_strings() -> None:
    session = AgentBuilder("a", ScriptedModel([])).memory(InProcessMemoryStore()).build()
    with pytest.raises(TypeError, match="string"):
        session.session("s").prompt(["hi"])  # type: ignore[arg-type]
