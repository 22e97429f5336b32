"""Google ADK (Agent Development Kit) sessions and memory in the Django database.

    from google.adk.runners import Runner
    from anvia_django.integrations.adk import DjangoSessionService

    runner = Runner(agent=agent, app_name="support", session_service=DjangoSessionService())

:class:`DjangoSessionService` (``pip install "anvia-django[google-adk]"``)
keeps ADK sessions as conversations of the store: their events are its
messages (:mod:`.stored_form`), their state in three scopes beside them
(``anvia_django.persistence.adk``). :class:`DjangoMemoryService` searches
an app's sessions of one user with the store's content search.
:mod:`.stored_form` needs no ADK to read a stored event as a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memory_service import DjangoMemoryService
    from .session_service import DjangoSessionService

__all__ = ["DjangoMemoryService", "DjangoSessionService"]


def __getattr__(name: str) -> Any:
    # Imported on first use: importing the package (for .stored_form) must
    # not need ADK.
    if name == "DjangoSessionService":
        from .session_service import DjangoSessionService

        return DjangoSessionService
    if name == "DjangoMemoryService":
        from .memory_service import DjangoMemoryService

        return DjangoMemoryService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
