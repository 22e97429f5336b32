"""Compaction in the runtime: keep a long session within a budget.

Opt-in per agent (``AgentBuilder.compaction(...)``). Before a run's first
model call, when the loaded history is over the budget, the store folds the
oldest part into a summary (``store.compact``) and the history is loaded
again: the summary, then the newest messages, about half the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from anvia_django.core.memory.compaction import (
    MemoryCompactionInput,
    Summariser,
    estimate_tokens,
)
from anvia_django.core.memory.types import MemoryContext, MemoryStore, Message

from .model import ChatModel

logger = logging.getLogger("anvia_django.runtime")

SUMMARY_PROMPT = (
    "You maintain the running summary of a conversation between a user and an AI "
    "assistant, so the assistant can continue it without the full transcript. Write a "
    "concise summary in the third person that keeps: the user's goals and requests, "
    "facts and numbers they gave (names, order numbers, dates, preferences), what the "
    "assistant found out or did (including tool results), decisions made, and anything "
    "still open. Leave out greetings and small talk. If a summary so far is given, "
    "merge it with the new messages into one summary. Answer with the summary only."
)

UNBOUNDED = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When to compact (either budget exceeded) and who writes the summary
    (``None``: the agent's own model with :data:`SUMMARY_PROMPT`)."""

    max_messages: int | None = None
    max_tokens: int | None = None
    summariser: Summariser | None = None

    def __post_init__(self) -> None:
        if self.max_messages is None and self.max_tokens is None:
            raise ValueError("compaction needs max_messages, max_tokens or both.")
        for name in ("max_messages", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 2
            ):
                raise ValueError(f"{name} must be an integer of at least 2, not {value!r}.")
        if self.summariser is not None and not callable(self.summariser):
            raise TypeError("summariser must be an async callable (previous, messages) -> str.")

    def over_budget(self, history: Sequence[Message]) -> bool:
        if self.max_messages is not None and len(history) > self.max_messages:
            return True
        if self.max_tokens is None:
            return False
        return sum(estimate_tokens(m) for m in history) > self.max_tokens

    def request(self, context: MemoryContext, model: ChatModel) -> MemoryCompactionInput:
        # Keep about half the budget verbatim, so the next compaction is
        # many runs away rather than one.
        return MemoryCompactionInput(
            context=context,
            summarise=self.summariser or model_summariser(model),
            keep_messages=self.max_messages // 2 if self.max_messages else UNBOUNDED,
            keep_tokens=self.max_tokens // 2 if self.max_tokens else None,
        )


def model_summariser(model: ChatModel) -> Summariser:
    """A summariser that asks ``model`` with :data:`SUMMARY_PROMPT`."""

    async def summarise(previous: str | None, messages: list[Message]) -> str:
        parts = [f"Summary so far:\n{previous}\n"] if previous else []
        parts.append("New messages:")
        parts.extend(_line(message) for message in messages)
        reply = await model.complete(
            [
                {"role": "system", "content": SUMMARY_PROMPT},
                {"role": "user", "content": "\n".join(parts)},
            ],
            [],
        )
        content = reply.get("content") if isinstance(reply, dict) else None
        return content if isinstance(content, str) else ""

    return summarise


def _line(message: Message) -> str:
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        names = ", ".join(str(c.get("name")) for c in calls if isinstance(c, dict))
        text = f"{text} [called {names}]".strip()
    return f"{role}: {text}"


async def compact_if_over_budget(
    policy: CompactionPolicy | None,
    store: MemoryStore,
    context: MemoryContext,
    model: ChatModel,
    history: list[Message],
) -> list[Message]:
    """``history``, or the history loaded again after a compaction.

    A failed compaction (the summariser raised, say) is logged and the run
    goes on with the full history: the store is unchanged by it.
    """
    if policy is None or not policy.over_budget(history):
        return history
    try:
        covered = await store.compact(policy.request(context, model))  # type: ignore[attr-defined]
    except Exception:
        logger.warning("compaction failed for session %s", context.session_id, exc_info=True)
        return history
    return history if covered is None else await load_history(policy, store, context)


async def load_history(
    policy: CompactionPolicy | None, store: MemoryStore, context: MemoryContext
) -> list[Message]:
    """The history a run starts from: through the newest summary when the
    agent compacts (``store.load_compacted``), the whole of it otherwise."""
    if policy is None:
        return await store.load(context)
    loaded: list[Message] = await store.load_compacted(context)  # type: ignore[attr-defined]
    return loaded
