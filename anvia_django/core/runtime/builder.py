"""The fluent way to configure an :class:`Agent`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anvia_django.core.memory.compaction import Summariser
from anvia_django.core.memory.options import resolve_memory_options
from anvia_django.core.memory.types import (
    JsonObject,
    MemoryOptions,
    MemoryRegistration,
    MemorySavePolicy,
    MemoryStore,
)

from .agent import Agent
from .compaction import CompactionPolicy
from .model import ChatModel
from .tools import Tool, make_tool

DEFAULT_MAX_TURNS = 10


class AgentBuilder:
    """``AgentBuilder(name, model).instructions(...).tool(fn).memory(store).build()``.

    Each method returns the builder; :meth:`build` returns an immutable agent,
    so later builder calls never change an agent already built.
    """

    def __init__(self, name: str, model: ChatModel) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("An agent needs a non-empty name.")
        if not callable(getattr(model, "complete", None)):
            raise TypeError("model must be a ChatModel (an object with async complete()).")
        self._name = name
        self._model = model
        self._instructions: str | None = None
        self._tools: dict[str, Tool] = {}
        self._memory: MemoryRegistration | None = None
        self._max_turns = DEFAULT_MAX_TURNS
        self._compaction: CompactionPolicy | None = None

    def instructions(self, text: str) -> AgentBuilder:
        """The system prompt, sent first on every turn and never stored."""
        if not isinstance(text, str):
            raise TypeError("instructions must be a string.")
        self._instructions = text
        return self

    def tool(
        self,
        function: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        parameters: JsonObject | None = None,
    ) -> AgentBuilder:
        """Offer ``function`` to the model; its schema comes from its type hints
        unless ``parameters`` gives one."""
        tool = make_tool(function, name=name, description=description, parameters=parameters)
        if tool.name in self._tools:
            raise ValueError(f"The agent already has a tool named {tool.name!r}.")
        self._tools[tool.name] = tool
        return self

    def memory(
        self,
        store: MemoryStore,
        options: MemoryOptions | None = None,
        *,
        save_policy: MemorySavePolicy | None = None,
    ) -> AgentBuilder:
        """Keep sessions in ``store``, saving by ``save_policy`` (default ``"message"``)."""
        for method in ("load", "append", "clear"):
            if not callable(getattr(store, method, None)):
                raise TypeError(f"store must be a MemoryStore; it has no {method}().")
        if options is not None and save_policy is not None:
            raise ValueError("Pass either options or save_policy, not both.")
        resolved = resolve_memory_options(options or MemoryOptions(save_policy=save_policy))
        self._memory = MemoryRegistration(store=store, options=resolved)
        return self

    def max_turns(self, turns: int) -> AgentBuilder:
        """How many model calls one run may make (default 10)."""
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
            raise ValueError(f"max_turns must be a positive integer, not {turns!r}.")
        self._max_turns = turns
        return self

    def compaction(
        self,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        summariser: Summariser | None = None,
    ) -> AgentBuilder:
        """Compact sessions whose history passes ``max_messages`` messages or
        ``max_tokens`` estimated tokens: the oldest part becomes a summary
        written by ``summariser`` (default: this agent's model with a shipped
        prompt). The store must support compaction (``compact()``)."""
        self._compaction = CompactionPolicy(max_messages, max_tokens, summariser)
        return self

    def build(self) -> Agent:
        if self._compaction is not None and (
            self._memory is None
            or not callable(getattr(self._memory.store, "compact", None))
            or not callable(getattr(self._memory.store, "load_compacted", None))
        ):
            raise TypeError(
                "compaction needs a memory store that can compact (one with compact() "
                "and load_compacted()); call .memory(store) with such a store."
            )
        return Agent(
            name=self._name,
            model=self._model,
            instructions=self._instructions,
            tools=tuple(self._tools.values()),
            memory=self._memory,
            max_turns=self._max_turns,
            compaction=self._compaction,
        )
