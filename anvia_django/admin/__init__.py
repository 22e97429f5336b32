"""Read-only admin pages for conversations, messages, runs, failed runs,
summaries and ADK sessions.

Staff with view permission browse; nobody, superusers included, adds,
changes or deletes here. Each page's query count is constant in its rows.
"""

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

__all__ = [
    "AdkSessionAdmin",
    "AgentRunAdmin",
    "ConversationAdmin",
    "FailedRunAdmin",
    "MemoryMessageAdmin",
    "MemorySummaryAdmin",
]
