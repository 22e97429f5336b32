"""Pydantic AI agents with their history in the Django database.

    from pydantic_ai import Agent
    from anvia_django.integrations.pydantic_ai import DjangoMemory

    memory = DjangoMemory("thread_123", user_id="user_456", save="turn")
    result = await agent.run("Where is order 42?", capabilities=[memory])

:class:`DjangoMemory` (``pip install "anvia-django[pydantic-ai]"``) loads
the session's history before each run and saves what the run adds, by the
store's save policies, with run records and failed-run records.
:mod:`.stored_form` describes how a message is stored; it needs no Pydantic
AI, so the admin and the API read stored messages without the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .capability import DjangoMemory
    from .codec import messages_to_stored, stored_to_messages

__all__ = ["DjangoMemory", "messages_to_stored", "stored_to_messages"]


def __getattr__(name: str) -> Any:
    # Imported on first use: importing the package (for .stored_form) must
    # not need Pydantic AI.
    if name == "DjangoMemory":
        from .capability import DjangoMemory

        return DjangoMemory
    if name in ("messages_to_stored", "stored_to_messages"):
        from . import codec

        return getattr(codec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
