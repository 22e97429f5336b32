"""Helpers for driving LangChain's RunnableWithMessageHistory in tests."""

from __future__ import annotations

import threading

from django.db import connection
from langchain_core.messages import BaseMessage

from anvia_django.integrations.langchain import DjangoChatMessageHistory

# langchain-core >= 1.3.3 deprecates RunnableWithMessageHistory (for LangGraph).
DEPRECATION = "langchain_core._api.deprecation.LangChainDeprecationWarning"
IGNORE_DEPRECATION = f"ignore:RunnableWithMessageHistory is deprecated:{DEPRECATION}"
# ... and (1.6.4) InMemoryChatMessageHistory, our reference implementation.
IGNORE_IN_MEMORY_DEPRECATION = f"ignore:The class `InMemoryChatMessageHistory`:{DEPRECATION}"


class WorkerThreadHistory(DjangoChatMessageHistory):
    """What docs/integrations.md recommends for sync ``invoke``: LangChain loads
    history in a short-lived executor thread, which must close the database
    connection it opened."""

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        try:
            return super().messages
        finally:
            if threading.current_thread() is not threading.main_thread():
                connection.close()
