"""Read-only admin pages for conversations, messages, runs, failed runs,
summaries and ADK sessions, and LangGraph's checkpoints and store items
when LangGraph is installed.

Staff with view permission browse; nobody, superusers included, adds,
changes or deletes here. Each page's query count is constant in its rows.
"""

import importlib.util

from django.contrib import admin

from anvia_django.models import (
    AdkSession,
    AgentRun,
    Conversation,
    FailedRun,
    MemoryMessage,
    MemorySummary,
)

from .adk import AdkSessionAdmin
from .agent_runs import AgentRunAdmin
from .conversation import ConversationAdmin
from .records import FailedRunAdmin, MemoryMessageAdmin, MemorySummaryAdmin

admin.site.register(Conversation, ConversationAdmin)
admin.site.register(MemoryMessage, MemoryMessageAdmin)
admin.site.register(FailedRun, FailedRunAdmin)
admin.site.register(AgentRun, AgentRunAdmin)
admin.site.register(MemorySummary, MemorySummaryAdmin)
admin.site.register(AdkSession, AdkSessionAdmin)

if importlib.util.find_spec("langgraph") is not None:  # the langgraph extra
    from anvia_django.integrations.langgraph.models import LangGraphCheckpoint, LangGraphStoreItem

    from .langgraph import LangGraphCheckpointAdmin
    from .langgraph_store import LangGraphStoreItemAdmin

    admin.site.register(LangGraphCheckpoint, LangGraphCheckpointAdmin)
    admin.site.register(LangGraphStoreItem, LangGraphStoreItemAdmin)

__all__ = [
    "AdkSessionAdmin",
    "AgentRunAdmin",
    "ConversationAdmin",
    "FailedRunAdmin",
    "MemoryMessageAdmin",
    "MemorySummaryAdmin",
]
