"""Google ADK sessions: their app, user and session state, each linked to
its conversation, whose page reads its events."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from anvia_django.models import AdkSession
from anvia_django.persistence.adk.state import session_state

from .mixins import pretty_json
from .records import ConversationColumnMixin


class AdkSessionAdmin(ConversationColumnMixin):
    list_display = ("conversation_link", "app_name", "user_id", "updated_at")
    search_fields = ("conversation__session_id__exact", "user_id__exact", "app_name__exact")
    search_help_text = "Exact session id, user id or app name."
    # The primary key's index: newest sessions first at any table size.
    ordering = ("-id",)
    show_full_result_count = False
    fields = (
        "conversation_link",
        "app_name",
        "user_id",
        "session_state",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    @admin.display(description="session state")
    def session_state(self, obj: AdkSession) -> SafeString:
        # Opened through the database's codec: sealed when encryption is on.
        return pretty_json(
            session_state(obj._state.db or "default", obj.conversation_id, obj.state)
        )
