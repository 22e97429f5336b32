"""The demo agent: the real runtime, durable memory in this project's database.

Offline and deterministic by default. With ``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` set, the same agent talks to that OpenAI-compatible
endpoint instead (model from ``OPENAI_MODEL``, default ``gpt-4o-mini``).
"""

from __future__ import annotations

import os
from functools import cache

from anvia_django.core import Agent, AgentBuilder, ChatModel
from anvia_django.store import DjangoMemoryStore

from .offline_model import OfflineSupportModel
from .tools import lookup_order, track_shipment

INSTRUCTIONS = (
    "You are the support agent of a small coffee-equipment shop. Use lookup_order "
    "for any order number and track_shipment for shipped parcels. Be brief."
)


def uses_remote_model() -> bool:
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def chat_model() -> ChatModel:
    if uses_remote_model():
        # Imported only here: httpx is needed for the remote model alone.
        from anvia_django.core.adapters.openai_compatible import OpenAICompatibleChatModel

        return OpenAICompatibleChatModel(os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return OfflineSupportModel()


def build_agent(model: ChatModel | None = None) -> Agent:
    return (
        AgentBuilder("order-support", model or chat_model())
        .instructions(INSTRUCTIONS)
        .tool(lookup_order)
        .tool(track_shipment)
        .memory(DjangoMemoryStore(), save_policy="message")
        .build()
    )


@cache
def demo_agent() -> Agent:
    """The agent the chat page and ``seed_demo`` share (built once; it is immutable)."""
    return build_agent()
