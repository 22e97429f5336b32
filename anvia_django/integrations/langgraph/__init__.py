"""LangGraph on Django: :class:`DjangoSaver`, a checkpointer whose every
statement runs on Django's connections (``pip install "anvia-django[langgraph]"``),
and :class:`~.store.DjangoStore`, LangGraph's long-term memory store.

    from anvia_django.integrations.langgraph import DjangoSaver

    graph = builder.compile(checkpointer=DjangoSaver())

The package imports LangGraph only when ``DjangoSaver`` is asked for: its
models (:mod:`.models`) belong to the app and load without the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conflicts import ConcurrentRunError
    from .saver import DjangoSaver

__all__ = ["ConcurrentRunError", "DjangoSaver"]


def __getattr__(name: str) -> Any:
    if name == "DjangoSaver":
        from .saver import DjangoSaver

        return DjangoSaver
    if name == "ConcurrentRunError":
        from .conflicts import ConcurrentRunError

        return ConcurrentRunError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
