"""Read-only admin pages for conversations, messages and failed runs.

Staff with view permission browse; nobody, superusers included, adds,
changes or deletes here. Each page's query count is constant in its rows.
"""

from django.contrib import admin

from anvia_django.models import Conversation, FailedRun, MemoryMessage

from .conversation import ConversationAdmin
from .records import FailedRunAdmin, MemoryMessageAdmin

admin.site.register(Conversation, ConversationAdmin)
admin.site.register(MemoryMessage, MemoryMessageAdmin)
admin.site.register(FailedRun, FailedRunAdmin)

__all__ = ["ConversationAdmin", "FailedRunAdmin", "MemoryMessageAdmin"]
