"""Read-only admin pages for conversations, messages, runs and failed runs.

Staff with view permission browse; nobody, superusers included, adds,
changes or deletes here. Each page's query count is constant in its rows.
"""

from django.contrib import admin

from anvia_django.models import AgentRun, Conversation, FailedRun, MemoryMessage

from .conversation import ConversationAdmin
from .records import FailedRunAdmin, MemoryMessageAdmin
from .runs import AgentRunAdmin

admin.site.register(Conversation, ConversationAdmin)
admin.site.register(MemoryMessage, MemoryMessageAdmin)
admin.site.register(FailedRun, FailedRunAdmin)
admin.site.register(AgentRun, AgentRunAdmin)

__all__ = ["AgentRunAdmin", "ConversationAdmin", "FailedRunAdmin", "MemoryMessageAdmin"]
